"""benchmarks.report: the writer on synthetic rows, and its flag table against the benchmarks' flags.

No benchmark runs here. The benchmarks define absl flags whose names clash
with the programs' (`--output_dir`, `--batch_size`), so the writer runs in a
child process and the flag table is checked against the benchmarks' sources.
"""

import ast
import json
import os
import subprocess
import sys

import pytest

from tests.programs import program

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_WRITE_SYNTHETIC_REPORT = """
import sys
from benchmarks import measurements, report

rows = [
    measurements.measurement(
        "backbone", "bert_tiny train step seq/s", 30.0, "keras-hub", 20.0,
        backend="jax", settings="batch 8, seq 64",
    ),
    measurements.measurement(
        "serving", "p50 latency ms, batch 1", 5.0, "transformers pipeline", 10.0,
        higher_is_better=False,
    ),
    measurements.failure("tokenizer", "exit status 1: ImportError: no | tokenizers"),
]
runs = [
    {"benchmark": "backbone", "backend": None, "flags": "--sizes=bert_tiny", "seconds": 12.3,
     "status": "ok"},
    {"benchmark": "tokenizer", "backend": None, "flags": "--megabytes=0.5", "seconds": 1.0,
     "status": "failed"},
]
context = {
    "date": "2025-01-02T03:04:05+00:00",
    "mode": "quick",
    "machine": "Some CPU, 2 cores (2 usable), 8.0 GiB memory",
    "versions": {"keras": "3.0.0", "torch": "not installed"},
}
print(report.write_report(rows, runs, context, sys.argv[1]))
"""


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("bench")
    completed = subprocess.run(
        [sys.executable, "-c", _WRITE_SYNTHETIC_REPORT, str(directory)],
        cwd=REPOSITORY,
        env={**os.environ, "MPLBACKEND": "Agg"},
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == str(directory / "report.md")
    return directory


def test_writes_the_three_files_and_nothing_partial(report_dir):
    assert sorted(os.listdir(report_dir)) == ["ratios.png", "report.json", "report.md"]


def test_markdown_has_context_measurements_and_runs(report_dir):
    text = (report_dir / "report.md").read_text()
    assert "- Date: 2025-01-02T03:04:05+00:00" in text
    assert "- Machine: Some CPU, 2 cores (2 usable), 8.0 GiB memory" in text
    assert "- Packages: keras 3.0.0, torch not installed" in text
    assert (
        "| backbone | jax | bert_tiny train step seq/s | 30.00 | keras-hub | 20.00 | 1.50 "
        "| higher | ok |" in text
    )
    assert (
        "| serving | — | p50 latency ms, batch 1 | 5.000 | transformers pipeline | 10.00 | 0.50 "
        "| lower | ok |" in text
    )
    assert "- backbone: batch 8, seq 64" in text
    assert "| backbone | — | `--sizes=bert_tiny` | 12.3 | ok | — | — |" in text


def test_a_failed_benchmark_is_shown_as_failed(report_dir):
    text = (report_dir / "report.md").read_text()
    failed = [line for line in text.splitlines() if line.startswith("| tokenizer |")]
    # The error's "|" is escaped, so the table keeps its columns.
    assert failed[0].endswith("| FAILED: exit status 1: ImportError: no \\| tokenizers |")
    assert failed[1] == "| tokenizer | — | `--megabytes=0.5` | 1.0 | failed | — | — |"


def test_json_holds_the_rows_and_the_context(report_dir):
    report = json.loads((report_dir / "report.json").read_text())
    assert report["mode"] == "quick"
    assert report["versions"] == {"keras": "3.0.0", "torch": "not installed"}
    assert [row["ratio"] for row in report["measurements"]] == [1.5, 0.5, None]
    assert report["measurements"][2]["error"].startswith("exit status 1")
    assert [run["status"] for run in report["runs"]] == ["ok", "failed"]


def test_chart_is_a_png(report_dir):
    data = (report_dir / "ratios.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert width > 500 and height > 100


def _defined_flags(module, seen=None):
    """Flag names (aliases included) that importing `module` defines, from the sources of it
    and of the benchmarks modules it imports."""
    seen = set() if seen is None else seen
    if module in seen:
        return set()
    seen.add(module)
    path = os.path.join(REPOSITORY, *module.split(".")) + ".py"
    with open(path, encoding="utf-8") as file:
        tree = ast.parse(file.read())
    names = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr.startswith("DEFINE_")
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            names.add(node.args[0].value)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("benchmarks"):
            imported = [node.module] if node.module != "benchmarks" else []
            imported += [f"benchmarks.{alias.name}" for alias in node.names]
            for name in imported:
                if os.path.exists(os.path.join(REPOSITORY, *name.split(".")) + ".py"):
                    names |= _defined_flags(name, seen)
    return names


def _benchmarks_table():
    """BENCHMARKS of benchmarks.report, read in a child process (its flags stay out of this one)."""
    code = (
        "import json\nfrom benchmarks import report\n"
        "print(json.dumps([b._asdict() for b in report.BENCHMARKS]))"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=REPOSITORY, capture_output=True, text=True
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def test_the_flag_table_names_only_flags_each_benchmark_defines():
    table = _benchmarks_table()
    assert {benchmark["name"] for benchmark in table} >= {"backbone", "pretraining", "tokenizer"}
    for benchmark in table:
        defined = _defined_flags(benchmark["module"])
        assert "json_output" in defined, benchmark["module"]
        for argument in (benchmark["full_flags"] or []) + (benchmark["quick_flags"] or []):
            name = argument.lstrip("-").split("=")[0]
            assert name in defined or (name.startswith("no") and name[2:] in defined), (
                f"{benchmark['name']}: {argument} is not a flag of {benchmark['module']}"
            )


def _child(code, *arguments):
    completed = subprocess.run(
        [sys.executable, "-c", code, *map(str, arguments)],
        cwd=REPOSITORY,
        env={**os.environ, "MPLBACKEND": "Agg"},
        capture_output=True,
        text=True,
    )
    return completed


def _readme_with_a_report_section(directory, before="", after=""):
    """directory/README.md holding "old table" in the published report's section."""
    readme = directory / "README.md"
    readme.write_text(
        f"{before}<!-- From here to the end marker: written by `python -m "
        "benchmarks.report --publish`. -->\nold table\n"
        f"<!-- End of the published benchmark report. -->\n{after}"
    )
    return readme


_PUBLISH = """
import sys
from benchmarks import report
report.publish(sys.argv[1], published_dir=sys.argv[2], readme=sys.argv[3], partial=True)
"""

_PUBLISH_WITHOUT_PARTIAL = """
import sys
from benchmarks import report
report.publish(sys.argv[1], published_dir=sys.argv[2], readme=sys.argv[3])
"""


def test_publishing_a_quick_or_partial_report_needs_partial(report_dir, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# intro\n")
    # Scratch paths: were the refusal to fail, the repository's README would stay as it is.
    completed = _child(_PUBLISH_WITHOUT_PARTIAL, report_dir, tmp_path / "published", readme)
    assert completed.returncode == 1
    assert (
        f"{report_dir / 'report.json'} is a quick report without ['bert4rec', " in completed.stderr
    )
    assert "add --partial to publish it anyway" in completed.stderr
    missing = program("benchmarks.report")("--publish", f"--output_dir={tmp_path}")
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    assert f"{tmp_path / 'report.json'} is missing" in missing.stderr


def test_publishing_copies_the_report_and_rewrites_only_the_readme_section(report_dir, tmp_path):
    readme = _readme_with_a_report_section(tmp_path, "# intro\n\n", "\n## Layout\n")
    completed = _child(_PUBLISH, report_dir, tmp_path / "published", readme)
    assert completed.returncode == 0, completed.stderr
    assert sorted(os.listdir(tmp_path / "published")) == ["ratios.png", "report.json", "report.md"]
    text = readme.read_text()
    assert text.startswith("# intro\n\n<!-- From here") and text.endswith(" -->\n\n## Layout\n")
    assert "old table" not in text
    assert "| serving | — | p50 latency ms, batch 1 | 5.000 | transformers pipeline |" in text
    assert "- Date: 2025-01-02T03:04:05+00:00" in text


def test_publishing_into_a_readme_without_the_markers_changes_nothing(report_dir, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# intro\n")
    completed = _child(_PUBLISH, report_dir, tmp_path / "published", readme)
    assert "The README has no benchmark report between" in completed.stderr
    assert readme.read_text() == "# intro\n"
    assert not (tmp_path / "published").exists()


def test_the_readmes_benchmark_table_is_the_published_reports_output():
    code = (
        "import json, os\nfrom benchmarks import report\n"
        "with open(os.path.join(report.PUBLISHED_DIR, 'report.json')) as file:\n"
        "    print(report.readme_section(json.load(file)))"
    )
    completed = _child(code)
    assert completed.returncode == 0, completed.stderr
    with open(os.path.join(REPOSITORY, "README.md"), encoding="utf-8") as file:
        readme = file.read()
    assert completed.stdout.strip() in readme


_WRITE_PREVIOUS_QUICK_REPORT = """
import sys
from benchmarks import measurements, report

rows = [
    measurements.measurement("tokenizer", "MB/s", 3.0, "transformers", 2.0),
    measurements.measurement("sst2", "program seconds", 9.0, "transformers (torch)", 10.0),
]
runs = [
    {"benchmark": name, "backend": None, "flags": "", "seconds": 5.0, "status": "ok"}
    for name in ("tokenizer", "sst2")
]
context = {
    "date": "2025-01-02T03:04:05+00:00",
    "mode": sys.argv[2],
    "machine": report.machine_description(),
    "versions": report.package_versions(),
}
report.write_report(rows, runs, context, sys.argv[1])
"""


def _update_sst2(output_dir):
    """`benchmarks.report --update` of sst2, which has no quick flags: its run is a "skipped"
    row, made without starting a benchmark."""
    return program("benchmarks.report")(
        "--quick", "--only=sst2", "--update", f"--output_dir={output_dir}"
    )


def test_an_update_measures_again_only_its_benchmarks_and_keeps_the_others(tmp_path):
    assert _child(_WRITE_PREVIOUS_QUICK_REPORT, tmp_path, "quick").returncode == 0
    completed = _update_sst2(tmp_path)
    assert completed.returncode == 0, completed.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    tokenizer, sst2 = report["measurements"]
    assert tokenizer["benchmark"] == "tokenizer" and tokenizer["ratio"] == 1.5
    assert sst2["benchmark"] == "sst2" and sst2["skipped"] and sst2["ratio"] is None
    kept, updated = report["runs"]
    assert kept == {
        "benchmark": "tokenizer",
        "backend": None,
        "flags": "",
        "seconds": 5.0,
        "status": "ok",
        "date": "2025-01-02T03:04:05+00:00",
    }
    assert updated["status"] == "skipped" and updated["date"] > kept["date"]
    assert updated["commit"]  # the checkout's git describe
    assert report["runs_finished"] == "2 of 2"
    text = (tmp_path / "report.md").read_text()
    assert f"- Date: {report['date']} (sst2); the other runs: 2025-01-02T03:04:05+00:00" in text


def test_an_update_refuses_a_report_of_another_mode(tmp_path):
    assert _child(_WRITE_PREVIOUS_QUICK_REPORT, tmp_path, "full").returncode == 0
    before = (tmp_path / "report.json").read_text()
    completed = _update_sst2(tmp_path)
    assert completed.returncode != 0
    assert f"--update: {tmp_path / 'report.json'} has mode 'full', this run 'quick'" in (
        completed.stderr
    )
    assert (tmp_path / "report.json").read_text() == before


def test_an_update_without_a_report_says_which_file_is_missing(tmp_path):
    completed = _update_sst2(tmp_path)
    assert completed.returncode != 0
    assert f"--update: {tmp_path / 'report.json'} is missing" in completed.stderr


_UPDATE_ONE_OF_TWO_RUNS_OF_A_MODULE = """
from benchmarks import measurements, report

context = {"date": "2025-01-02", "mode": "full", "machine": "a CPU", "versions": {}}
row = measurements.measurement("bert4rec", "HR@10", 0.2, "item_transition baseline", 0.1)
rows = report.rows_of_run("bert4rec", [row]) + report.rows_of_run("bert4rec_recbole", [row])
runs = [{"benchmark": name} for name in ("bert4rec", "bert4rec_recbole")]
previous = {**context, "measurements": rows, "runs": runs}
for name in ("bert4rec", "bert4rec_recbole"):
    kept_rows, kept_runs = report.kept_by_update(previous, context, [name])
    print([row["benchmark"] for row in kept_rows], [run["benchmark"] for run in kept_runs])
"""


def test_an_update_of_one_of_two_benchmarks_of_a_module_keeps_the_others_rows():
    completed = _child(_UPDATE_ONE_OF_TWO_RUNS_OF_A_MODULE)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == [
        "['bert4rec_recbole'] ['bert4rec_recbole']",
        "['bert4rec'] ['bert4rec']",
    ]


_WRITE_INTERRUPTED_REPORT = """
import sys
from benchmarks import measurements, report

rows = [measurements.measurement("tokenizer", "MB/s", 3.0, "transformers", 2.0)]
runs = [
    {"benchmark": "tokenizer", "backend": None, "flags": "", "seconds": 5.0, "status": "ok"},
    *report._pending([(b.name, None, ()) for b in report.BENCHMARKS if b.name != "tokenizer"]),
]
context = {
    "date": "2025-01-02T03:04:05+00:00",
    "mode": sys.argv[2],
    "machine": report.machine_description(),
    "versions": report.package_versions(),
    "runs_finished": f"1 of {len(runs)}",
}
report.write_report(rows, runs, context, sys.argv[1])
"""


def test_publishing_an_interrupted_full_report_needs_partial(tmp_path):
    assert _child(_WRITE_INTERRUPTED_REPORT, tmp_path, "full").returncode == 0
    readme = _readme_with_a_report_section(tmp_path)
    completed = _child(_PUBLISH_WITHOUT_PARTIAL, tmp_path, tmp_path / "published", readme)
    assert completed.returncode == 1
    assert "old table" in readme.read_text()
    assert not (tmp_path / "published").exists()
    assert f"{tmp_path / 'report.json'} is a full report without ['backbone', " in completed.stderr
    assert "'serving', 'sst2']: it would replace the full report" in completed.stderr
    assert "add --partial to publish it anyway" in completed.stderr


def test_an_update_of_an_interrupted_report_keeps_the_runs_it_never_started(tmp_path):
    assert _child(_WRITE_INTERRUPTED_REPORT, tmp_path, "quick").returncode == 0
    completed = _update_sst2(tmp_path)
    assert completed.returncode == 0, completed.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert [row["benchmark"] for row in report["measurements"]] == ["tokenizer", "sst2"]
    runs = {run["benchmark"]: run for run in report["runs"]}
    assert len(runs) == len(report["runs"])
    assert runs["tokenizer"]["status"] == "ok" and runs["sst2"]["status"] == "skipped"
    assert runs["serving"]["status"] == "not run yet" and "date" not in runs["serving"]
    assert report["runs_finished"] == f"2 of {len(runs)}"
    assert report["total_seconds"] == 5.0
    assert report["update"]["others_since"] == "2025-01-02T03:04:05+00:00"
