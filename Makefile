# Build, test and run bert_keras.
#
#   make test                       lint, then pytest on tests/ once per Keras backend, in parallel
#   make lint                       ruff (format and lint) and the import-layering contracts
#   make format                     ruff format and ruff's safe fixes, in place
#   make test BACKENDS=jax          one backend only
#   make test PYTEST_ARGS='-k encoder -x'   extra pytest options
#   make test TEST_MARKERS='not slow and not large'  the quick subset
#   make test-slow                  only the learning runs of many minutes (marked slow), which
#                                   `make test` (and so CI) leaves out: the whole demo, MiniLM on
#                                   CoNLL, BERT4Rec on MovieLens, the SQuAD program's learning run
#   make test TESTS=tests/layers    a part of tests/
#   make demo                       python -m tasks.demo
#   make bench                      every benchmark against its peer: build/bench/report.md, report.json,
#                                   ratios.png (python -m benchmarks.report); QUICK=1: small sizes, minutes;
#                                   then python -m benchmarks.report --publish: into docs/ and README.md
#   make gpu-wheels                 Keras and keras-hub as Python 3.12 wheels in build/gpu-wheels/, for
#                                   benchmarks/gpu.sh on a GPU machine without network or TensorFlow
#   make recbole-venv               RecBole's BERT4Rec in .venv-recbole, the peer of benchmarks.bert4rec
#                                   (make bench builds it first)
#   make serving-compat             every task's SavedModel answers the same under TensorFlow 2.17
#                                   (TF Serving 2.17-2.19's core) and its tensorflow-text, in .venv-tf217
#   make bazel-build                bazel build //... (installs Debian's bazel-bootstrap when bazel is missing)
#   make lock                       rewrite requirements-lock.txt from the current .venv
#   make clean                      remove caches and build outputs (keeps .venv)
#   make distclean                  clean, and remove .venv too
#
# Every target that runs Python first creates .venv from requirements.txt, with every transitive
# version pinned by requirements-lock.txt; editing either file re-installs on the next run.

SHELL := /bin/bash
# A failing command anywhere in a recipe line, pipelines included, fails the target.
.SHELLFLAGS := -eo pipefail -c
.DEFAULT_GOAL := test

PYTHON3 ?= python3
VENV := .venv
PYTHON := $(VENV)/bin/python
VENV_STAMP := $(VENV)/.installed
REQUIREMENTS := requirements.txt
LOCK := requirements-lock.txt
# Installed without their dependencies (pinned, so nothing unlocked comes in).
NO_DEPS := requirements-no-deps.txt

BACKENDS ?= tensorflow jax torch
PYTEST_ARGS ?=
TEST_MARKERS ?= not slow
TESTS ?= tests

# Offline, quiet and reproducible test runs: no hub downloads, no TF start-up chatter.
TEST_ENV := HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TF_CPP_MIN_LOG_LEVEL=2
# The tests' models are tiny, so XLA spends its time compiling, not running: LLVM's cheapest
# optimisation level takes a fifth off jax's model tests (results agree to float32 rounding).
TEST_XLA_FLAGS := XLA_FLAGS="--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
# The three suites share the machine's cores, so each runs torch's and TensorFlow's ops on one thread
# (on 2 cores: 23% less CPU time for torch's model tests, 11% for TensorFlow's; jax's own pool is
# left alone, one thread made its tests slower).
SUITE_THREADS := OMP_NUM_THREADS=1 TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1

.PHONY: test test-slow lint format demo bench gpu-wheels recbole-venv tf217-venv serving-compat bazel-install bazel-build lock clean distclean venv

venv: $(VENV_STAMP)

$(VENV_STAMP): $(REQUIREMENTS) $(LOCK) $(NO_DEPS)
	test -x $(PYTHON) || $(PYTHON3) -m venv $(VENV)
	$(PYTHON) -m pip install --quiet -r $(REQUIREMENTS) -c $(LOCK)
	$(PYTHON) -m pip install --quiet --no-deps -r $(NO_DEPS)
	touch $@

# Prints "backend: N passed, N failed, N skipped" for each backend from pytest's JUnit XML reports
# (argv: report folder, then the backends), then the same line summed over all backends, then the
# slowest tests, which CI's time limit is spent on; every test's seconds go to build/test-seconds.tsv.
define JUNIT_SUMMARY_PY
import os
import sys
import xml.etree.ElementTree as ET

report_dir, backends = sys.argv[1], sys.argv[2:]
total = [0, 0, 0]
cases = []
print("===== summary =====")
for backend in backends:
    try:
        root = ET.parse(f"{report_dir}/{backend}.xml").getroot()
    except (OSError, ET.ParseError):
        print(f"{backend}: no report, pytest did not finish")
        continue
    suites = list(root.iter("testsuite"))
    tests = sum(int(suite.get("tests", 0)) for suite in suites)
    failed = sum(int(suite.get("failures", 0)) + int(suite.get("errors", 0)) for suite in suites)
    skipped = sum(int(suite.get("skipped", 0)) for suite in suites)
    counts = [tests - failed - skipped, failed, skipped]
    total = [t + c for t, c in zip(total, counts)]
    print(f"{backend}: {counts[0]} passed, {counts[1]} failed, {counts[2]} skipped")
    cases += [
        (float(case.get("time", 0)), backend, f"{case.get('classname')}::{case.get('name')}")
        for case in root.iter("testcase")
    ]
print(f"all: {total[0]} passed, {total[1]} failed, {total[2]} skipped")
print("slowest tests:")
cases.sort(reverse=True)
for seconds, backend, name in cases[:15]:
    print(f"{seconds:7.1f} s  {backend:<10} {name}")
os.makedirs("build", exist_ok=True)
with open("build/test-seconds.tsv", "w") as file:
    file.writelines(f"{s:.2f}\t{b}\t{n}\n" for s, b, n in cases)
endef
export JUNIT_SUMMARY_PY

# Runs the backends at the same time (one pytest process each, mostly single-threaded, so two cores
# finish three runs in about the time of the longest), each line prefixed with "[backend] ". Every run
# goes to the end even after another fails; the failed ones are named, one line per backend follows
# and the target exits non-zero if any run failed. The last line sums all runs.
test: lint
	@junit_dir=$$(mktemp -d); pids=""; \
	for backend in $(BACKENDS); do \
	  ( env $(TEST_ENV) $(TEST_XLA_FLAGS) $(SUITE_THREADS) KERAS_BACKEND=$$backend $(PYTHON) -m pytest -p no:cacheprovider \
	      --basetemp=$$junit_dir/tmp-$$backend --junitxml=$$junit_dir/$$backend.xml -m "$(TEST_MARKERS)" $(PYTEST_ARGS) $(TESTS) \
	      2>&1 | sed -u "s/^/[$$backend] /" ) & pids="$$pids $$!"; \
	done; \
	failed=""; set -- $(BACKENDS); \
	for pid in $$pids; do wait $$pid || failed="$$failed $$1"; shift; done; \
	if [ -n "$$failed" ]; then echo "===== FAILED backends:$$failed ====="; fi; \
	$(PYTHON) -c "$$JUNIT_SUMMARY_PY" $$junit_dir $(BACKENDS); \
	rm -rf $$junit_dir; \
	[ -z "$$failed" ]

test-slow:
	$(MAKE) test TEST_MARKERS=slow

# The checks `make test` runs first; `make format` fixes what ruff can fix by itself.
lint: $(VENV_STAMP)
	$(VENV)/bin/ruff format --check --quiet .
	$(VENV)/bin/ruff check --quiet .
	$(VENV)/bin/lint-imports --no-cache > /dev/null || $(VENV)/bin/lint-imports --no-cache

format: $(VENV_STAMP)
	$(VENV)/bin/ruff format --quiet .
	$(VENV)/bin/ruff check --quiet --fix .

demo: $(VENV_STAMP)
	env $(TEST_ENV) $(PYTHON) -m tasks.demo

# TensorFlow 2.17 and its tensorflow-text alone, pinned: the side environment of serving-compat.
TF217_VENV := .venv-tf217
TF217_STAMP := $(TF217_VENV)/.installed

$(TF217_STAMP): requirements-tf217.txt requirements-tf217-lock.txt
	test -x $(TF217_VENV)/bin/python || $(PYTHON3) -m venv $(TF217_VENV)
	$(TF217_VENV)/bin/python -m pip install --quiet -r requirements-tf217.txt -c requirements-tf217-lock.txt
	touch $@

tf217-venv: $(TF217_STAMP)

serving-compat: $(VENV_STAMP) $(TF217_STAMP)
	env $(TEST_ENV) KERAS_BACKEND=tensorflow $(PYTHON) -m tests.export.compat_exports \
	  --side_python=$(TF217_VENV)/bin/python

# RecBole 1.2.1 and what its BERT4Rec imports, pinned: the side environment of the BERT4Rec benchmark.
RECBOLE_VENV := .venv-recbole
RECBOLE_STAMP := $(RECBOLE_VENV)/.installed

$(RECBOLE_STAMP): requirements-recbole.txt requirements-recbole-lock.txt
	test -x $(RECBOLE_VENV)/bin/python || $(PYTHON3) -m venv $(RECBOLE_VENV)
	$(RECBOLE_VENV)/bin/python -m pip install --quiet -r requirements-recbole.txt \
	  -c requirements-recbole-lock.txt
	$(RECBOLE_VENV)/bin/python -m pip install --quiet --no-deps recbole==1.2.1
	touch $@

recbole-venv: $(RECBOLE_STAMP)

# RecBole's environment is built first; if it cannot be (no network), its benchmark row says so.
bench: $(VENV_STAMP)
	$(MAKE) recbole-venv || echo "make recbole-venv failed: RecBole's BERT4Rec will not run"
	env $(TEST_ENV) $(PYTHON) -m benchmarks.report $(if $(filter 1,$(QUICK)),--quick)

# What a CUDA image holding jax, torch and transformers lacks to run benchmarks/gpu.sh, at this
# project's pinned versions, as wheels for the machine's Python 3.12 on Linux x86-64.
GPU_WHEELS := build/gpu-wheels
gpu-wheels: $(VENV_STAMP)
	rm -rf $(GPU_WHEELS)
	$(PYTHON) -m pip download -q --no-deps --only-binary=:all: -d $(GPU_WHEELS) \
	  --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
	  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
	  $$(grep -iE '^(keras|keras-hub|namex|optree|kagglehub|kagglesdk)==' $(LOCK))
	ls $(GPU_WHEELS)

# Debian's bazel-bootstrap (4.2.3); third_party/bazel_offline/ lets it build without network.
bazel-install:
	@if command -v bazel >/dev/null; then \
	  echo "bazel found at $$(command -v bazel)"; \
	else \
	  echo "bazel not found: installing Debian's bazel-bootstrap"; \
	  sudo_cmd=""; [ "$$(id -u)" = 0 ] || sudo_cmd=sudo; \
	  $$sudo_cmd apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$sudo_cmd apt-get install -y -qq --no-install-recommends \
	    bazel-bootstrap >/dev/null; \
	fi

bazel-build: bazel-install
	bazel build //...

# Pins every installed distribution (pip itself aside). torch's local label (+cpu) is dropped so the
# pin also matches a plain 2.13.0 wheel; PEP 440 ignores local labels in "==" without one.
lock: $(VENV_STAMP)
	{ echo "# Every version in the working .venv; regenerate with 'make lock'."; \
	  $(PYTHON) -m pip freeze --all --exclude-editable | grep -v '^pip==' | sed -E 's/\+[a-z0-9.]+$$//'; \
	} > $(LOCK).tmp
	mv $(LOCK).tmp $(LOCK)
	touch $(VENV_STAMP)

clean:
	if command -v bazel >/dev/null && [ -e bazel-bin ]; then bazel --batch clean --expunge; fi
	rm -f bazel-bin bazel-out bazel-testlogs bazel-$(notdir $(CURDIR))
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
	rm -rf .pytest_cache build dist *.egg-info benchmark_outputs

distclean: clean
	rm -rf $(VENV) $(TF217_VENV) $(RECBOLE_VENV)
