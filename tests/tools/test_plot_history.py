"""tools.plot_history redraws a run's curves; the plots hold what the history holds."""

import json
import subprocess
import sys

import pytest

from bert_keras.training.history_plots import panels
from bert_keras.training.history_plots import plot_history
from bert_keras.training.history_records import read_history_records
from tests.programs import program

plot_history_tool = program("tools.plot_history")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _png_size(path):
    """(width, height) from the PNG header."""
    header = path.read_bytes()[:24]
    assert header[:8] == PNG_SIGNATURE
    return int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")


def test_the_tool_redraws_each_directory_and_names_one_without_history(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    records = [{"step": step, "loss": 1 / step, "learning_rate": 1e-4} for step in (1, 2, 3)]
    (run / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    completed = subprocess.run(
        [sys.executable, "-m", "tools.plot_history", str(run)], capture_output=True, text=True
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == str(run / "history.png")
    assert _png_size(run / "history.png") == (2 * 420, 340)  # two panels
    (run / "history.png").unlink()
    empty = tmp_path / "empty"
    empty.mkdir()
    completed = subprocess.run(
        [sys.executable, "-m", "tools.plot_history", str(empty), str(run)],
        capture_output=True,
        text=True,
    )
    assert completed.returncode != 0
    assert completed.stderr == f"plot_history: No history.jsonl or history.json in {empty}.\n"
    assert (run / "history.png").exists()  # the directories after it are drawn still


@pytest.mark.parametrize(
    "file_name, text, problem",
    [
        (
            "history.jsonl",
            '{"step": 1, "loss": 2.0}\n{"loss": 1.0}\n',
            ':2: the record has no "step".',
        ),
        (
            "history.jsonl",
            '{"step": 1, "loss": 2.0}\n[1, 2]\n',
            ":2: a record must be a JSON object",
        ),
        ("history.json", "[1.0, 0.5]", ": must hold a JSON object of lists"),
        ("history.jsonl", b'\xff\xfe{"step": 1}\n', " is not UTF-8 text (invalid start byte)."),
        ("history.json", b'{"loss": [1.0, \xe9]}', " is not UTF-8 text"),
    ],
    ids=[
        "a record without a step",
        "a record not an object",
        "history.json of a list",
        "history.jsonl not UTF-8",
        "history.json not UTF-8",
    ],
)
def test_a_malformed_history_is_named_and_the_other_directories_drawn(
    file_name, text, problem, tmp_path
):
    malformed, good = tmp_path / "malformed", tmp_path / "good"
    malformed.mkdir()
    good.mkdir()
    if isinstance(text, bytes):
        (malformed / file_name).write_bytes(text)
    else:
        (malformed / file_name).write_text(text)
    (good / "history.jsonl").write_text('{"step": 1, "loss": 2.0}\n')
    completed = plot_history_tool(str(malformed), str(good))
    assert completed.returncode == 1
    assert completed.stderr.startswith(f"plot_history: {malformed / file_name}{problem}")
    assert "Traceback" not in completed.stderr
    assert (good / "history.png").exists()
    assert not (malformed / "history.png").exists()


def test_validation_metrics_share_their_training_metric_panel():
    records = [
        {"step": 1, "loss": 1.0, "val_loss": 1.1, "accuracy": 0.6, "val_accuracy": 0.5},
        {"step": 2, "loss": 0.5, "masked_lm_loss": 2.0, "examples_per_second": 7.0},
    ]
    assert panels(records) == {
        "loss": ["loss", "masked_lm_loss", "val_loss"],
        "accuracy and ranking": ["accuracy", "val_accuracy"],
        "examples per second": ["examples_per_second"],
    }


def test_a_bert4rec_history_plots_its_epochs_as_steps(tmp_path):
    (tmp_path / "history.json").write_text(json.dumps({"loss": [3.0, 2.0], "val_ndcg@10": [0.1]}))
    assert read_history_records(tmp_path) == [
        {"loss": 3.0, "val_ndcg@10": 0.1, "step": 1},
        {"loss": 2.0, "step": 2},  # a metric missing from an epoch is left out of it
    ]


def test_a_history_without_numbers_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no records"):
        plot_history([], tmp_path / "history.png")
    records = [{"step": 1, "seconds": 3.0, "loss": "0.5", "diverged": True}]
    with pytest.raises(ValueError, match="its records hold no numbers besides epoch, seconds, s"):
        plot_history(records, tmp_path / "history.png")
    assert not (tmp_path / "history.png").exists()


def test_nan_and_infinite_values_are_marked_where_they_first_are(tmp_path, monkeypatch):
    """Keras logs a diverged loss as NaN; matplotlib would leave it out without a word."""
    from matplotlib import axes

    marked = []
    monkeypatch.setattr(
        axes.Axes, "axvline", lambda self, x, **style: marked.append((x, style["label"]))
    )
    records = [{"step": 1, "loss": 1.0}, {"step": 2, "loss": float("inf")}]
    records += [{"step": 3, "loss": float("nan"), "accuracy": 0.5}, {"step": 4, "loss": 0.5}]
    plot_history(records, tmp_path / "history.png")
    assert marked == [(2, "loss inf at step 2 (2 steps)")]
    assert (tmp_path / "history.png").read_bytes()[:8] == PNG_SIGNATURE
