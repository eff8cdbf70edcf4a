"""benchmarks.backbone's command line: bad flags are refused before anything is measured."""

import pytest

from tests.programs import program

_run = program("benchmarks.backbone")


@pytest.mark.one_backend
@pytest.mark.parametrize(
    "flag, message",
    [
        ("--sizes=bert_huge", "flag --sizes=['bert_huge']: unknown bert_huge; known: bert_tiny"),
        ("--sizes=", "flag --sizes=[]: names nothing to measure"),
        ("--backends=", "flag --backends=[]: names nothing to measure"),
        ("--dtype=float8", "flag --dtype=float8: value should be one of"),
        ("--json_output=NOTES/rows.json", "NOTES is a file, so this cannot be written"),
    ],
)
def test_bad_flags_are_refused_before_measuring(tmp_path, flag, message):
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    completed = _run(flag.replace("NOTES", str(notes)))
    assert completed.returncode == 1
    assert message.replace("NOTES", str(notes)) in completed.stderr
    assert "Traceback" not in completed.stderr and notes.read_text() == "mine"
