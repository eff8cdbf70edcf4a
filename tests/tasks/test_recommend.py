"""python -m tasks.recommend: the files it writes, its errors (run as a program, as users do).

The program runs in a child process: its flags (input_file, output_dir,
preset, ...) share names, not defaults, with other programs that tests
import.
"""

import json

import pytest

from tests.programs import program
from tests.recommendation.synthetic_logs import write_cluster_walks

run_program = program("tasks.recommend")


@pytest.mark.large
def test_trains_evaluates_and_predicts(tmp_path):
    log = write_cluster_walks(tmp_path / "walks.csv", num_users=40)
    output_dir = tmp_path / "run"
    data = [f"--input_file={log}", "--input_format=csv", f"--output_dir={output_dir}"]
    completed = run_program(
        *data,
        "--preset=bert4rec_steam",
        "--max_sequence_length=16",
        "--num_train_epochs=2",
        "--train_batch_size=16",
        "--num_negatives=20",
        "--sampled_negatives=8",
        "--top_k=3",
        "--do_train",
        "--do_eval",
        "--do_predict",
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "40 users (0 with fewer than 5 interactions dropped)" in completed.stdout
    results = json.loads((output_dir / "eval_results.json").read_text())
    assert results["users"] == 40
    expected_keys = {"test/full/ndcg@10", "test/full/hr@10", "test/pop20/ndcg@10", "test/pop20/mrr"}
    assert expected_keys <= set(results)
    assert len(json.loads((output_dir / "history.json").read_text())["loss"]) == 2
    assert (output_dir / "history.png").read_bytes()[:4] == b"\x89PNG"
    assert len((output_dir / "predictions.tsv").read_text().splitlines()) == 1 + 40 * 3
    assert json.loads((output_dir / "item_ids.json").read_text())["item_ids"][0].startswith("item")
    # A later run evaluates the saved model, with the same answer.
    completed = run_program(*data, "--preset=bert4rec_steam", "--num_negatives=20", "--do_eval")
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert json.loads((output_dir / "eval_results.json").read_text()) == results


@pytest.mark.large
def test_a_second_run_resumes_training_and_a_third_finds_it_finished(tmp_path):
    log = write_cluster_walks(tmp_path / "walks.csv", num_users=20)
    output_dir = tmp_path / "run"
    flags = [
        f"--input_file={log}",
        "--input_format=csv",
        f"--output_dir={output_dir}",
        "--preset=bert4rec_steam",
        "--max_sequence_length=8",
        "--num_train_epochs=3",
        "--train_batch_size=16",
        # Steps this small leave every float32 weight as it is, so validation NDCG@10 never
        # changes: the first run stops after epoch 2 under --patience=0, and a larger patience
        # takes it further.
        "--learning_rate=1e-30",
        "--do_train",
    ]
    completed = run_program(*flags, "--patience=0")
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert len(json.loads((output_dir / "history.json").read_text())["loss"]) == 2
    completed = run_program(*flags, "--patience=2")
    assert completed.returncode == 0, completed.stderr[-3000:]
    checkpoint = output_dir / "checkpoints" / "ckpt-00000002.weights.h5"
    assert f"Resuming training from {checkpoint}, after epoch 2 of 3." in completed.stderr
    history = json.loads((output_dir / "history.json").read_text())
    assert len(history["loss"]) == 3
    completed = run_program(*flags, "--patience=2", "--do_eval", "--num_negatives=5")
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "finished training after epoch 3 of 3; loading its model.keras" in completed.stderr
    assert json.loads((output_dir / "history.json").read_text()) == history
    assert json.loads((output_dir / "eval_results.json").read_text())["users"] == 20


DATA = ["--input_file=f", "--input_format=csv", "--output_dir=o"]


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--input_format=csv", "--output_dir=o", "--do_train"], "--input_file is required"),
        (DATA, "At least one of --do_train"),
        ([*DATA, "--do_eval", "--min_interactions=2"], "--min_interactions must be at least 3"),
        ([*DATA, "--do_eval", "--sampled_negatives=0"], "--sampled_negatives must be positive"),
        ([*DATA, "--do_eval", "--num_negatives=-1"], "--num_negatives must be 0 or more, got -1"),
        (["--input_file=.", *DATA[1:], "--do_eval"], "--input_file=. is a directory, not a log"),
        ([*DATA, "--do_train", "--num_warmup_steps=-5"], "--num_warmup_steps must not be negative"),
        ([*DATA, "--do_train", "--seed=-1"], "--seed must be in 0..2**32 - 1"),
        ([*DATA, "--do_train", "--learning_rate=nan"], "--learning_rate must be positive, got nan"),
    ],
)
def test_bad_flags_are_named(arguments, message):
    completed = run_program(*arguments)
    assert completed.returncode != 0
    assert message in completed.stderr


def test_a_malformed_log_or_preset_is_named(tmp_path):
    log = tmp_path / "ratings.dat"
    log.write_text("1::10::5::100\n1::11::5\n")
    data = [f"--input_file={log}", "--input_format=movielens", f"--output_dir={tmp_path}/o"]
    completed = run_program(*data, "--do_train")
    assert completed.returncode != 0
    assert "ratings.dat:2: expected UserID::MovieID::Rating::Timestamp" in completed.stderr
    completed = run_program(*data, "--do_train", "--preset=bert_tiny")
    assert "--preset=bert_tiny: not one of" in completed.stderr
