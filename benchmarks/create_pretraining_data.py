r"""Pretraining-data throughput: our tool against Model Garden's, same corpus.

Builds a corpus of real English prose from the docstrings of the installed
Python packages (one sentence a line, one module a document), then runs, one
after the other on the same corpus and flags (dupe_factor 10 unless told),

* `python -m tools.create_pretraining_data` (this repository), and
* Model Garden's `official/nlp/data/create_pretraining_data.py`
  (tf-models-official 2.20.0, installed with `--no-deps` plus tf-keras 2.21.0
  into its own virtual environment, .venv-modelgarden, made on first use),

and prints for each the throughput in MB of input text per minute, the CPU
seconds of its whole process tree (user + system: steadier than the wall time
on a shared machine), the peak resident memory of its largest process and of
its whole process tree (sampled every 0.25 s), the peak of each of its
processes, and the ratio of the throughputs.

When the installed packages hold less such prose than --corpus_megabytes,
the corpus is all of it; the first line printed gives its size.

    python -m benchmarks.create_pretraining_data --corpus_megabytes=10
    python -m benchmarks.create_pretraining_data --corpus_megabytes=2 --skip_model_garden \
        --benchmark_num_workers=1 --baseline_checkout=/tmp/old
"""

import os
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time

from absl import app
from absl import flags

from benchmarks import flag_checks
from benchmarks import measurements
from benchmarks.common import REPOSITORY
from bert_keras.data.offline_text import docstring_corpus
from bert_keras.data.offline_text import vocab_file

_MEGABYTES = flags.DEFINE_float("corpus_megabytes", 10.0, "Size of the corpus.")
flag_checks.require_positive(_MEGABYTES)
_DUPE_FACTOR = flags.DEFINE_integer(
    "benchmark_dupe_factor", 10, "--dupe_factor of both tools.", lower_bound=1
)
_NUM_WORKERS = flags.DEFINE_integer(
    "benchmark_num_workers", None, "--num_workers of ours (default: all cores).", lower_bound=1
)
_SKIP_MODEL_GARDEN = flags.DEFINE_bool("skip_model_garden", False, "Run only our tool.")
_WORK_DIR = flags.DEFINE_string(
    "benchmark_dir", None, "Where the corpus and outputs go (default: a temp dir)."
)
_BASELINE = flags.DEFINE_string(
    "baseline_checkout",
    None,
    "Another checkout of this repository (e.g. `git worktree add /tmp/old HEAD~1`) "
    "whose tool runs too, right after ours, with the same flags.",
)
flag_checks.require_directory(_BASELINE)

MODEL_GARDEN_VENV = os.path.join(REPOSITORY, ".venv-modelgarden")


def tool_flags(corpus, output, vocabulary, dupe_factor):
    """The flags both tools run with: the original's settings, `dupe_factor` aside.

    Example:
    >>> tool_flags("corpus.txt", "out.tfrecord", "vocab.txt", 10)[-1]
    '--dupe_factor=10'
    """
    return [
        f"--input_file={corpus}",
        f"--output_file={output}",
        f"--vocab_file={vocabulary}",
        "--do_lower_case=true",
        "--max_seq_length=128",
        "--max_predictions_per_seq=20",
        "--masked_lm_prob=0.15",
        "--random_seed=12345",
        f"--dupe_factor={dupe_factor}",
    ]


def _tree_rss_bytes(pid):
    """Resident bytes of a process and of each of its descendants, by pid (from /proc)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    resident, stack = {}, [pid]
    while stack:
        current = stack.pop()
        stack.extend(children.get(current, []))
        try:
            with open(f"/proc/{current}/statm") as statm:
                resident[current] = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError):
            pass
    return resident


def run_measured(command, environment, cwd=REPOSITORY):
    """Runs `command`; returns (seconds, CPU seconds, largest and tree peak RSS, peaks, stdout).

    `peaks` lists the peak RSS of each process of the tree but /usr/bin/time,
    in the order they started (the tool's main process first).
    """
    start = time.perf_counter()
    process = subprocess.Popen(
        ["/usr/bin/time", "-f", "%M %U %S", *command],
        env=environment,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    peak_tree, peaks = [0], {}

    def sample():
        while process.poll() is None:
            resident = _tree_rss_bytes(process.pid)
            resident.pop(process.pid, None)  # /usr/bin/time itself
            peak_tree[0] = max(peak_tree[0], sum(resident.values()))
            for pid, size in resident.items():
                peaks[pid] = max(peaks.get(pid, 0), size)
            time.sleep(0.25)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = process.communicate()
    seconds = time.perf_counter() - start
    sampler.join()
    if process.returncode != 0:
        raise RuntimeError(f"{command[:3]} failed:\n{stderr[-3000:]}")
    largest_kb, user, system = stderr.strip().splitlines()[-1].split()
    in_start_order = [peaks[pid] for pid in sorted(peaks)]
    return (
        seconds,
        float(user) + float(system),
        int(largest_kb) * 1024,
        peak_tree[0],
        in_start_order,
        stdout,
    )


def _same_files(directory, prefix, other_prefix):
    """Whether the shards `prefix-*` and `other_prefix-*` hold the same bytes."""
    names = sorted(name for name in os.listdir(directory) if name.startswith(prefix + "-"))
    for name in names:
        other = os.path.join(directory, other_prefix + name[len(prefix) :])
        if not os.path.exists(other):
            return False
        with open(os.path.join(directory, name), "rb") as file, open(other, "rb") as other_file:
            if file.read() != other_file.read():
                return False
    return bool(names)


def ensure_model_garden():
    """Creates .venv-modelgarden (tf-models-official --no-deps, tf-keras) once.

    Its other dependencies (tensorflow 2.21, absl, sentencepiece) come from
    this repository's .venv through a .pth file; nothing is installed there.
    """
    python = os.path.join(MODEL_GARDEN_VENV, "bin", "python")
    site_packages = os.path.join(
        MODEL_GARDEN_VENV,
        "lib",
        f"python{sys.version_info.major}.{sys.version_info.minor}",
        "site-packages",
    )
    script = os.path.join(site_packages, "official", "nlp", "data", "create_pretraining_data.py")
    if not os.path.exists(script):
        subprocess.run([sys.executable, "-m", "venv", MODEL_GARDEN_VENV], check=True)
        subprocess.run(
            [
                python,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "tf-models-official==2.20.0",
                "tf-keras==2.21.0",
            ],
            check=True,
        )
        with open(os.path.join(site_packages, "bert_keras_venv.pth"), "w") as link:
            link.write(sysconfig.get_paths()["purelib"] + "\n")
    return python, script


def main(argv):
    del argv
    work_dir = _WORK_DIR.value or tempfile.mkdtemp(prefix="pretraining_benchmark_")
    os.makedirs(work_dir, exist_ok=True)
    corpus = os.path.join(work_dir, "corpus.txt")
    wanted = int(_MEGABYTES.value * 1e6)
    if os.path.exists(corpus) and abs(os.path.getsize(corpus) - wanted) < 0.05 * wanted:
        size = os.path.getsize(corpus)  # made by an earlier run: the same text
    else:
        size = docstring_corpus(corpus, wanted)
    megabytes = size / 1e6
    for name in os.listdir(work_dir):
        if name.lstrip(".").split(".tfrecord")[0] in ("ours", "baseline", "model_garden"):
            # Outputs of an earlier run, hidden progress logs included: ours
            # would resume from them and skip the work.
            os.remove(os.path.join(work_dir, name))
    vocabulary = vocab_file()
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": REPOSITORY}
    print(
        f"Corpus: {megabytes:.1f} MB of docstring prose in {corpus}; dupe_factor {_DUPE_FACTOR.value}; "
        f"{len(os.sched_getaffinity(0))} cores."
    )
    ours = [
        sys.executable,
        "-m",
        "tools.create_pretraining_data",
        *tool_flags(
            corpus, os.path.join(work_dir, "ours.tfrecord"), vocabulary, _DUPE_FACTOR.value
        ),
    ]
    if _NUM_WORKERS.value:
        ours.append(f"--num_workers={_NUM_WORKERS.value}")
    results = {"bert_keras": run_measured(ours, environment)}
    if _BASELINE.value:
        baseline = [part.replace("ours.tfrecord", "baseline.tfrecord") for part in ours]
        results["baseline"] = run_measured(
            baseline, {**environment, "PYTHONPATH": _BASELINE.value}, cwd=_BASELINE.value
        )
    model_garden_missing = "skipped (--skip_model_garden)" if _SKIP_MODEL_GARDEN.value else None
    if not _SKIP_MODEL_GARDEN.value:
        try:
            python, script = ensure_model_garden()
        except (OSError, subprocess.CalledProcessError) as error:
            model_garden_missing = f"Model Garden could not be installed: {error}"
            print(model_garden_missing)
    if model_garden_missing is None:
        theirs = [
            python,
            script,
            *tool_flags(
                corpus,
                os.path.join(work_dir, "model_garden.tfrecord"),
                vocabulary,
                _DUPE_FACTOR.value,
            ),
        ]
        results["model_garden"] = run_measured(theirs, {**environment, "PYTHONPATH": ""})
    print(
        f"{'tool':<14}{'seconds':>10}{'MB/min':>10}{'CPU s':>10}{'peak RSS MB':>14}{'tree RSS MB':>14}"
    )
    for name, (seconds, cpu_seconds, largest, tree, _, _) in results.items():
        print(
            f"{name:<14}{seconds:>10.1f}{megabytes / seconds * 60:>10.2f}{cpu_seconds:>10.1f}"
            f"{largest / 2**20:>14.0f}{tree / 2**20:>14.0f}"
        )
    for name, (*_, peaks, _) in results.items():
        print(
            f"Peak RSS MB of each process of {name}, main first: "
            f"{', '.join(f'{peak / 2**20:.0f}' for peak in peaks)}"
        )
    for other, label in (("model_garden", "ours / Model Garden"), ("baseline", "ours / baseline")):
        if other in results:
            print(
                f"Throughput ratio ({label}): {results[other][0] / results['bert_keras'][0]:.2f}x "
                f"(CPU seconds: {results[other][1] / results['bert_keras'][1]:.2f}x)"
            )
    if "baseline" in results:
        print(
            f"Same output bytes as the baseline: {_same_files(work_dir, 'ours.tfrecord', 'baseline.tfrecord')}"
        )
    print(results["bert_keras"][-1])
    measurements.write_measurements(_measurement_rows(results, megabytes, model_garden_missing))


def _measurement_rows(results, megabytes, model_garden_missing):
    """Our MB/min and peak RSS beside each peer's; a missing Model Garden gives rows with its reason."""
    settings = f"{megabytes:.1f} MB corpus, dupe_factor {_DUPE_FACTOR.value}"
    ours_seconds, _, ours_largest, *_ = results["bert_keras"]
    peers = {"model_garden": "Model Garden", "baseline": "baseline checkout"}
    rows = []
    for name, label in peers.items():
        if name not in results and not (name == "model_garden" and model_garden_missing):
            continue
        seconds, _, largest, *_ = results.get(name, (None, None, None))
        pair = [
            measurements.measurement(
                "create_pretraining_data",
                "MB/min",
                megabytes / ours_seconds * 60,
                label,
                seconds and megabytes / seconds * 60,
                settings=settings,
            ),
            measurements.measurement(
                "create_pretraining_data",
                "peak RSS MB",
                ours_largest / 2**20,
                label,
                largest and largest / 2**20,
                higher_is_better=False,
                settings=settings,
            ),
        ]
        if name not in results:
            pair = [{**row, "error": model_garden_missing} for row in pair]
        rows += pair
    return rows


if __name__ == "__main__":
    app.run(main)
