"""One report of every benchmark: each beside its peer, measured in the same run.

Runs each benchmark of `BENCHMARKS` as a child process (one per Keras
backend where the benchmark measures the current backend), with its full or,
with `--quick`, its quick flags and `--json_output`, gathers the rows they
hand back (`benchmarks.measurements`) and writes to `--output_dir`:

* `report.md`: the machine, the package versions, the date, a table of every
  measurement (ours, the peer's, the ratio ours / peer) and one of every run
  (flags, seconds, status);
* `report.json`: the same as data;
* `ratios.png`: a bar of ours / peer per measurement, with a line at 1.0.

A benchmark that fails, times out or whose peer is missing shows up as a row
with its error; the report is written all the same.

    python -m benchmarks.report --quick          # what `make bench QUICK=1` runs
    python -m benchmarks.report --only=backbone,tokenizer
    python -m benchmarks.report --only=sst2 --update   # sst2 again, the other rows kept
    python -m benchmarks.report --publish        # build/bench -> docs/benchmarks, README.md
"""

import collections
import datetime
import importlib.metadata
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags

from benchmarks import flag_checks
from benchmarks import measurements
from benchmarks.common import REPOSITORY
from bert_keras.atomic_files import atomic_file
from bert_keras.atomic_files import write_text

BACKENDS = ("tensorflow", "jax", "torch")
PACKAGES = ("keras", "tensorflow", "jax", "torch", "keras-hub", "transformers")

# backends: None runs the program once (it picks its backends itself, or has none); a tuple
# runs it once per backend with KERAS_BACKEND set. quick_flags None: left out of --quick.
Benchmark = collections.namedtuple(
    "Benchmark", "name module backends quick_backends full_flags quick_flags"
)

BENCHMARKS = (
    Benchmark(
        "backbone",
        "benchmarks.backbone",
        None,
        None,
        [],
        [
            "--backends=jax",
            "--sizes=bert_tiny",
            "--batch_size=8",
            "--sequence_length=64",
            "--repeats=3",
        ],
    ),
    Benchmark(
        "pretraining",
        "benchmarks.pretraining",
        BACKENDS,
        ("jax",),
        [],
        [
            "--preset=bert_tiny",
            "--batch_size=8",
            "--sequence_length=64",
            "--predictions=5",
            "--repeats=3",
        ],
    ),
    Benchmark(
        "tokenizer",
        "benchmarks.tokenizer",
        None,
        None,
        [],
        ["--megabytes=0.5", "--batch_size=1024", "--repeats=2"],
    ),
    Benchmark(
        "create_pretraining_data",
        "benchmarks.create_pretraining_data",
        None,
        None,
        [],
        ["--corpus_megabytes=0.5", "--benchmark_dupe_factor=1", "--skip_model_garden"],
    ),
    Benchmark(
        "finetuning",
        "benchmarks.finetuning",
        BACKENDS,
        ("jax",),
        [],
        [
            "--preset=bert_tiny",
            "--squad_questions=100",
            "--squad_repeats=1",
            "--squad_window_questions=8",
            "--finetuning_examples=64",
            "--batch_size=8",
            "--sequence_length=64",
            "--repeats=2",
            "--steps_per_round=2",
        ],
    ),
    Benchmark(
        "sst2",
        "benchmarks.finetuning",
        None,
        None,
        ["--parts=sst2", "--sst2_bucket_by_length"],
        None,
    ),
    Benchmark(
        "serving",
        "benchmarks.serving",
        None,
        None,
        [],
        ["--requests=20", "--batches=2", "--batch_size=8"],
    ),
    Benchmark(
        "bert4rec",
        "benchmarks.bert4rec",
        BACKENDS,
        ("jax",),
        [],
        ["--parts=movielens", "--movielens_epochs=1"],
    ),
    Benchmark(
        "bert4rec_recbole",
        "benchmarks.bert4rec",
        ("jax",),  # ours on one backend, named in the rows, beside RecBole's torch
        None,
        ["--parts=movielens,recbole"],
        None,
    ),
    Benchmark("scaling", "benchmarks.scaling", BACKENDS, None, [], None),
)

# `--publish` copies a report here and into the README, between these markers.
PUBLISHED_DIR = os.path.join(REPOSITORY, "docs", "benchmarks")
README = os.path.join(REPOSITORY, "README.md")
README_BEGIN = (
    "<!-- From here to the end marker: written by `python -m benchmarks.report --publish`. -->"
)
README_END = "<!-- End of the published benchmark report. -->"
# The status of a planned run that an interrupted report never started.
NOT_RUN_YET = "not run yet"

_QUICK = flags.DEFINE_bool("quick", False, "Small sizes and few rounds: minutes, not hours.")
_OUTPUT_DIR = flags.DEFINE_string(
    "output_dir", os.path.join(REPOSITORY, "build", "bench"), "Where the report goes."
)
flag_checks.require_writable_path(_OUTPUT_DIR, directory=True)
_ONLY = flags.DEFINE_list("only", [], "Run only these benchmarks (default: all).")
flag_checks.require_known_names(_ONLY, [benchmark.name for benchmark in BENCHMARKS])
_PUBLISH = flags.DEFINE_bool(
    "publish",
    False,
    "Run nothing: copy --output_dir's report to docs/benchmarks/ and its table into README.md.",
)
_PARTIAL = flags.DEFINE_bool(
    "partial", False, "With --publish: publish a quick report, or one of some benchmarks, too."
)
_UPDATE = flags.DEFINE_bool(
    "update",
    False,
    "Keep the report in --output_dir and measure again only the benchmarks of --only, replacing "
    "their rows and runs; the report must be of the same mode, machine and packages.",
)
_TIMEOUT = flags.DEFINE_integer(
    "timeout_s",
    None,
    "Seconds one benchmark run may take (default: 600 quick, 7200 full).",
    lower_bound=1,
)


def machine_description():
    """The CPU model, its cores (and those this process may use) and the memory, in words.

    Example:
    >>> "cores" in machine_description()
    True
    """
    model = platform.processor() or platform.machine()
    memory = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            names = [
                line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")
            ]
        model = names[0] if names else model
        with open("/proc/meminfo", encoding="utf-8") as meminfo:
            kilobytes = int(
                next(line for line in meminfo if line.startswith("MemTotal")).split()[1]
            )
        memory = f", {kilobytes / 2**20:.1f} GiB memory"
    except (OSError, StopIteration, ValueError):
        pass
    return (
        f"{model}, {os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable){memory}, "
        f"{platform.system()} {platform.release()}"
    )


def package_versions(packages=PACKAGES):
    """{package: installed version, or "not installed"}, read from the distributions' metadata.

    Example:
    >>> package_versions(("absl-py", "no-such-package-here"))["no-such-package-here"]
    'not installed'
    """
    versions = {}
    for package in packages:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "not installed"
    return versions


def runs(quick, only=()):
    """(benchmark, backend or None, flags) of every child process a report starts.

    Example:
    >>> [(name, backend) for name, backend, _ in runs(quick=True, only=["pretraining"])]
    [('pretraining', 'jax')]
    """
    planned = []
    for benchmark in BENCHMARKS:
        if only and benchmark.name not in only:
            continue
        benchmark_flags = benchmark.quick_flags if quick else benchmark.full_flags
        if benchmark_flags is None:
            planned.append((benchmark, None, None))
            continue
        backends = (benchmark.quick_backends if quick else None) or benchmark.backends or (None,)
        planned += [(benchmark, backend, benchmark_flags) for backend in backends]
    return [(benchmark.name, backend, flags_) for benchmark, backend, flags_ in planned]


def _error_tail(text, lines=6):
    kept = [line for line in text.strip().splitlines() if line.strip()][-lines:]
    return "\n".join(kept) or "no output"


def run_benchmark(name, backend, benchmark_flags, timeout_s):
    """Runs one benchmark in a child process; returns (rows, run record).

    The rows are the child's `--json_output`, or one failure row with the
    end of its error output when it fails, times out or writes none.
    """
    module = next(benchmark.module for benchmark in BENCHMARKS if benchmark.name == name)
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    if backend:
        environment["KERAS_BACKEND"] = backend
    with tempfile.TemporaryDirectory(prefix="bench_report_") as directory:
        output = os.path.join(directory, "rows.json")
        command = [sys.executable, "-m", module, *benchmark_flags, f"--json_output={output}"]
        start = time.perf_counter()
        error = None
        try:
            completed = subprocess.run(
                command,
                cwd=REPOSITORY,
                env=environment,
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
            if completed.returncode != 0:
                error = f"exit status {completed.returncode}: {_error_tail(completed.stderr)}"
            elif not os.path.exists(output):
                error = f"wrote no measurements: {_error_tail(completed.stdout)}"
        except subprocess.TimeoutExpired:
            error = f"timed out after {timeout_s} s"
        seconds = time.perf_counter() - start
        if error is None:
            with open(output, encoding="utf-8") as file:
                rows = rows_of_run(name, json.load(file))
        else:
            rows = [measurements.failure(name, error, backend=backend)]
    record = _run_record(
        name, backend, benchmark_flags, round(seconds, 1), "failed" if error else "ok"
    )
    print(f"{name} ({backend or 'no backend'}): {record['status']} in {seconds:.0f} s", flush=True)
    return rows, record


def rows_of_run(name, rows):
    """`rows` that a run of the report's benchmark `name` wrote, each named `name`.

    Two benchmarks of the report may run one module (bert4rec and
    bert4rec_recbole run `benchmarks.bert4rec`), whose rows name the module's
    benchmark; `--update` replaces rows by the report's name.

    Example:
    >>> rows_of_run("bert4rec_recbole", [{"benchmark": "bert4rec", "measure": "HR@10"}])
    [{'benchmark': 'bert4rec_recbole', 'measure': 'HR@10'}]
    """
    return [{**row, "benchmark": name} for row in rows]


def _cell(value, digits=2):
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}" if abs(value) < 1e4 else f"{value:.0f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _measured(value):
    """A measured value to four significant digits (no exponent), or as `_cell` shows it.

    Example:
    >>> [_measured(value) for value in (0.08123, 7.3, 139.11, 8309.57, None)]
    ['0.08123', '7.300', '139.1', '8310', '—']
    """
    if not isinstance(value, float) or value == 0 or abs(value) >= 1000:
        return _cell(value, digits=0)
    return f"{value:.{3 - math.floor(math.log10(abs(value)))}f}"


def _table(header, alignment, rows_of_cells):
    """Markdown table lines: the header, the alignment row, one line per row of cells."""
    lines = ["| " + " | ".join(header) + " |", alignment]
    lines += ["| " + " | ".join(_cell(cell) for cell in cells) + " |" for cells in rows_of_cells]
    return lines


def _status(row):
    if row.get("skipped"):
        return f"skipped: {row['error']}"
    return f"FAILED: {row['error']}" if row.get("error") else "ok"


_RATIO_NOTE = (
    "Ratio is ours / peer, measured in the same run; the `better` column says which way is better."
)


def _context_lines(context):
    versions = ", ".join(f"{package} {version}" for package, version in context["versions"].items())
    quick_note = " (small sizes and few rounds: a smoke run, not figures to quote)"
    date = context["date"]
    if context.get("update"):
        update = context["update"]
        date += f" ({', '.join(update['benchmarks'])}); the other runs: {update['others_since']} or later"
    return [
        f"- Date: {date}",
        f"- Mode: {context['mode']}" + (quick_note if context["mode"] == "quick" else ""),
        f"- Machine: {context['machine']}",
        f"- Packages: {versions}",
        f"- Runs finished: {context.get('runs_finished', 'all')}",
    ]


def _measurement_lines(rows):
    return _table(
        ["benchmark", "backend", "measure", "bert_keras", "peer", "peer value", "ratio", "better"]
        + ["status"],
        "|---|---|---|---:|---|---:|---:|---|---|",
        [
            [
                row["benchmark"],
                row.get("backend") or "—",
                row.get("measure") or "—",
                _measured(row.get("ours")),
                row.get("peer") or "—",
                _measured(row.get("peer_value")),
                _cell(row.get("ratio")),
                "higher" if row.get("higher_is_better", True) else "lower",
                _status(row),
            ]
            for row in rows
        ],
    )


def markdown_report(rows, run_records, context):
    """The report as Markdown: context, a table of the measurements, a table of the runs.

    `context` holds "date", "machine", "versions" ({package: version}) and
    "mode" ("quick" or "full").

    Example:
    >>> from benchmarks.measurements import measurement
    >>> row = measurement("backbone", "train step seq/s", 30.0, "keras-hub", 20.0, backend="jax")
    >>> context = {"date": "2025-01-01", "machine": "a CPU", "versions": {"keras": "3"}, "mode": "quick"}
    >>> "| backbone | jax | train step seq/s | 30.00 | keras-hub | 20.00 | 1.50 | higher | ok |" in (
    ...     markdown_report([row], [], context)
    ... )
    True
    """
    lines = ["# bert_keras benchmarks", "", *_context_lines(context), ""]
    lines += [_RATIO_NOTE, "", "## Measurements", "", *_measurement_lines(rows)]
    settings = sorted(
        {(row["benchmark"], row.get("settings")) for row in rows if row.get("settings")}
    )
    if settings:
        lines += ["", "## Settings", ""]
        lines += [f"- {benchmark}: {text}" for benchmark, text in settings]
    if run_records:
        lines += ["", "## Runs", ""]
        lines += _table(
            ["benchmark", "backend", "flags", "seconds", "status", "date", "commit"],
            "|---|---|---|---:|---|---|---|",
            [
                [
                    record["benchmark"],
                    record.get("backend") or "—",
                    f"`{record['flags']}`" if record.get("flags") else "—",
                    _cell(record.get("seconds"), digits=1),
                    record["status"],
                    record.get("date") or "—",
                    f"`{record['commit']}`" if record.get("commit") else "—",
                ]
                for record in run_records
            ],
        )
    return "\n".join(lines) + "\n"


_RATIO_TICKS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500)


def ratio_chart(rows, path):
    """Draws a horizontal bar of ours / peer per measurement that has a ratio, a line at 1.0.

    Example:
    >>> import os, tempfile
    >>> from benchmarks.measurements import measurement
    >>> path = os.path.join(tempfile.mkdtemp(), "ratios.png")
    >>> ratio_chart([measurement("tokenizer", "MB/s", 3.0, "transformers", 2.0)], path)
    >>> open(path, "rb").read(4)
    b'\\x89PNG'
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    measured = [row for row in rows if row.get("ratio") is not None]
    labels = [
        " ".join(filter(None, (row["benchmark"], row.get("backend"), row["measure"])))
        + f" vs {row['peer']}"
        f" ({'higher' if row.get('higher_is_better', True) else 'lower'} is better)"
        for row in measured
    ]
    ratios = [row["ratio"] for row in measured]
    figure, axes = pyplot.subplots(figsize=(11, 1.5 + 0.35 * max(len(measured), 1)))
    good = [
        (ratio >= 1) == row.get("higher_is_better", True) for ratio, row in zip(ratios, measured)
    ]
    # Each bar runs from the line at 1.0 to its ratio, on a log axis: 0.5 and 2 look alike.
    axes.barh(
        range(len(ratios)),
        [ratio - 1.0 for ratio in ratios],
        left=1.0,
        color=["tab:green" if g else "tab:red" for g in good],
    )
    axes.set_xscale("log")
    axes.axvline(1.0, color="black", linewidth=1)
    for position, ratio in enumerate(ratios):
        axes.annotate(
            f"{ratio:.2f}",
            (ratio, position),
            xytext=(3 if ratio >= 1 else -3, 0),
            textcoords="offset points",
            ha="left" if ratio >= 1 else "right",
            va="center",
            fontsize=7,
        )
    low, high = min([*ratios, 1.0]) / 1.6, max([*ratios, 1.0]) * 1.6  # room for the labels
    axes.set_xlim(low, high)
    ticks = [tick for tick in _RATIO_TICKS if low <= tick <= high]
    axes.set_xticks(ticks, [f"{tick:g}" for tick in ticks])
    axes.minorticks_off()
    axes.set_yticks(range(len(ratios)), labels, fontsize=8)
    axes.invert_yaxis()
    axes.set_xlabel("ours / peer, log scale (green: bert_keras better)")
    axes.set_title("bert_keras against its peers, same run" if measured else "no ratios measured")
    figure.tight_layout()
    with atomic_file(path) as temporary:
        figure.savefig(temporary, format="png", dpi=100)
    pyplot.close(figure)


def write_report(rows, run_records, context, directory):
    """Writes report.md, report.json and ratios.png to `directory`, each atomically; returns report.md's path.

    Example:
    >>> import os, tempfile
    >>> from benchmarks.measurements import failure
    >>> context = {"date": "2025-01-01", "machine": "a CPU", "versions": {}, "mode": "full"}
    >>> directory = tempfile.mkdtemp()
    >>> _ = write_report([failure("serving", "boom")], [], context, directory)
    >>> sorted(os.listdir(directory))
    ['ratios.png', 'report.json', 'report.md']
    """
    report = {**context, "measurements": rows, "runs": run_records}
    write_text(os.path.join(directory, "report.json"), json.dumps(report, indent=1) + "\n")
    ratio_chart(rows, os.path.join(directory, "ratios.png"))
    path = os.path.join(directory, "report.md")
    write_text(path, markdown_report(rows, run_records, context))
    return path


def readme_section(report):
    """The README's benchmark lines for a report (report.json's contents), markers included.

    Example:
    >>> from benchmarks.measurements import measurement
    >>> report = {"date": "2025-01-01", "machine": "a CPU", "versions": {}, "mode": "full",
    ...           "measurements": [measurement("tokenizer", "MB/s", 3.0, "transformers", 2.0)]}
    >>> print(readme_section(report).splitlines()[-6])
    | tokenizer | — | MB/s | 3.000 | transformers | 2.000 | 1.50 | higher | ok |
    """
    lines = [README_BEGIN, "", *_context_lines(report), "", _RATIO_NOTE, ""]
    lines += _measurement_lines(report["measurements"])
    lines += [
        "",
        "![ours / peer for each measurement](docs/benchmarks/ratios.png)",
        "",
        "Each benchmark's settings and runs: [docs/benchmarks/report.md](docs/benchmarks/report.md).",
        README_END,
    ]
    return "\n".join(lines)


def with_readme_section(readme_text, section):
    """`readme_text` with everything from the begin marker to the end marker replaced by `section`.

    Raises:
        ValueError: the markers are missing or out of order.

    Example:
    >>> text = f"intro\\n{README_BEGIN}\\nold\\n{README_END}\\noutro\\n"
    >>> with_readme_section(text, f"{README_BEGIN}\\nnew\\n{README_END}").splitlines()[2]
    'new'
    """
    begin = readme_text.find(README_BEGIN)
    end = readme_text.find(README_END)
    if begin < 0 or end < begin:
        raise ValueError(
            f"The README has no benchmark report between {README_BEGIN!r} and {README_END!r}."
        )
    return readme_text[:begin] + section + readme_text[end + len(README_END) :]


def publish(report_dir, published_dir=PUBLISHED_DIR, readme=README, partial=False):
    """Writes `report_dir`'s report.json again to `published_dir` (with its report.md and
    ratios.png) and its table into `readme`, each atomically.

    Args:
        report_dir: where `benchmarks.report` wrote the report.
        published_dir: where the published copy goes.
        readme: the README whose benchmark section the table replaces.
        partial: publish a quick report, or one without every benchmark, too.

    Raises:
        FileNotFoundError: `report_dir` has no report.json.
        ValueError: the report is quick or partial and `partial` is False.
    """
    source = os.path.join(report_dir, "report.json")
    if not os.path.exists(source):
        raise FileNotFoundError(f"{source} is missing: run `make bench` (benchmarks.report) first.")
    with open(source, encoding="utf-8") as file:
        report = json.load(file)
    measured = {run["benchmark"] for run in report["runs"] if _ran(run)}
    missing = sorted({b.name for b in BENCHMARKS} - measured)
    if not partial and (report["mode"] != "full" or missing):
        raise ValueError(
            f"{source} is a {report['mode']} report without {missing or 'no benchmark'}: it "
            "would replace the full report; add --partial to publish it anyway."
        )
    with open(readme, encoding="utf-8") as file:
        readme_text = with_readme_section(file.read(), readme_section(report))
    context = {key: value for key, value in report.items() if key not in ("measurements", "runs")}
    os.makedirs(published_dir, exist_ok=True)
    write_report(report["measurements"], report["runs"], context, published_dir)
    write_text(readme, readme_text)


def main(argv):
    del argv
    if _PUBLISH.value:
        try:
            publish(_OUTPUT_DIR.value, partial=_PARTIAL.value)
        except (FileNotFoundError, ValueError) as error:
            raise app.UsageError(str(error)) from error
        print(f"{README} and {PUBLISHED_DIR}: the report of {_OUTPUT_DIR.value}")
        return
    mode = "quick" if _QUICK.value else "full"
    timeout_s = _TIMEOUT.value or (600 if _QUICK.value else 7200)
    context = {
        "date": _now(),
        "mode": mode,
        "machine": machine_description(),
        "versions": package_versions(),
    }
    output_dir = _OUTPUT_DIR.value
    planned = runs(_QUICK.value, _ONLY.value)
    kept_rows, kept_records = [], []
    if _UPDATE.value:
        names = sorted({name for name, _, _ in planned}, key=_benchmark_order)
        previous_path = os.path.join(output_dir, "report.json")
        kept_rows, kept_records = kept_by_update(
            _previous_report(previous_path), context, names, previous_path
        )
        context["update"] = {
            "benchmarks": names,
            "others_since": min(
                (record["date"] for record in kept_records if "date" in record), default="—"
            ),
        }
    commit = source_commit()
    rows, run_records = [], []
    for number, (name, backend, benchmark_flags) in enumerate(planned):
        if benchmark_flags is None:
            benchmark_rows = [_skipped(name, mode)]
            record = _run_record(name, None, (), 0.0, "skipped")
        else:
            benchmark_rows, record = run_benchmark(name, backend, benchmark_flags, timeout_s)
        rows += benchmark_rows
        run_records.append({**record, "date": _now(), "commit": commit})
        # Rewritten after every run: an interrupted report keeps what it measured.
        all_records = kept_records + run_records
        finished = [record for record in all_records if _ran(record)]
        context["runs_finished"] = f"{len(finished)} of {len(kept_records) + len(planned)}"
        context["total_seconds"] = round(sum(record["seconds"] for record in finished), 1)
        path = write_report(
            in_benchmark_order(kept_rows + rows),
            in_benchmark_order(all_records + _pending(planned[number + 1 :])),
            context,
            output_dir,
        )
    print(path)


def _now():
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def source_commit(repository=REPOSITORY):
    """The measured code's commit, `git describe --always --dirty`; None outside a git checkout.

    Example:
    >>> import tempfile
    >>> source_commit(tempfile.mkdtemp()) is None
    True
    """
    try:
        completed = subprocess.run(
            ["git", "-C", repository, "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
        )
    except OSError:
        return None
    if completed.returncode != 0:
        return None
    return completed.stdout.strip() or None


def _benchmark_order(name):
    return [benchmark.name for benchmark in BENCHMARKS].index(name)


def in_benchmark_order(items):
    """Rows or run records sorted as `BENCHMARKS` lists their benchmarks, in order within each.

    Example:
    >>> [item["benchmark"] for item in in_benchmark_order(
    ...     [{"benchmark": "sst2"}, {"benchmark": "backbone"}, {"benchmark": "tokenizer"}])]
    ['backbone', 'tokenizer', 'sst2']
    """
    return sorted(items, key=lambda item: _benchmark_order(item["benchmark"]))


def _previous_report(path):
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except FileNotFoundError:
        raise app.UsageError(f"--update: {path} is missing; run the whole report first.") from None


def kept_by_update(previous, context, names, source="the report"):
    """The rows and run records of `previous` (report.json's contents) that measuring again
    the benchmarks `names` keeps: every other benchmark's, each run dated.

    A run record without a date gets `previous`'s, the date of the report
    that measured it; a run that `previous` never started stays "not run yet",
    undated. `source` names `previous` in errors.

    Raises:
        app.UsageError: `previous` is of another mode, machine or packages than `context`.

    Example:
    >>> context = {"date": "2025-01-02", "mode": "full", "machine": "a CPU", "versions": {}}
    >>> previous = {**context, "date": "2025-01-01", "measurements": [
    ...     {"benchmark": "tokenizer"}, {"benchmark": "sst2"}], "runs": [
    ...     {"benchmark": "tokenizer"}, {"benchmark": "sst2"}]}
    >>> kept_by_update(previous, context, ["sst2"])
    ([{'benchmark': 'tokenizer'}], [{'benchmark': 'tokenizer', 'date': '2025-01-01'}])
    """
    for key in ("mode", "machine", "versions"):
        if previous.get(key) != context[key]:
            raise app.UsageError(
                f"--update: {source} has {key} "
                f"{previous.get(key)!r}, this run {context[key]!r}; run the whole report."
            )
    kept_rows = [row for row in previous["measurements"] if row["benchmark"] not in names]
    kept_records = [
        _dated(record, previous["date"]) if _ran(record) else record
        for record in previous["runs"]
        if record["benchmark"] not in names
    ]
    return kept_rows, kept_records


def _ran(record):
    """Whether a run record was measured, not planned by a report that stopped before it."""
    return record.get("status") != NOT_RUN_YET


def _dated(record, date):
    return {**record, "date": record.get("date", date)}


def _pending(planned):
    return [
        _run_record(name, backend, benchmark_flags or (), None, NOT_RUN_YET)
        for name, backend, benchmark_flags in planned
    ]


def _run_record(name, backend, benchmark_flags, seconds, status):
    """One row of the report's table of runs."""
    return {
        "benchmark": name,
        "backend": backend,
        "flags": " ".join(benchmark_flags),
        "seconds": seconds,
        "status": status,
    }


def _skipped(name, mode):
    return {**measurements.failure(name, f"not run in {mode} mode"), "skipped": True}


if __name__ == "__main__":
    app.run(main)
