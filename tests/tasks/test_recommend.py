"""python -m tasks.recommend: flags, the files it writes, its errors."""

import json

import pytest
from absl import app
from absl import flags

from tasks import recommend
from tests.recommendation.synthetic_logs import write_cluster_walks


def run_main(*arguments):
    flags.FLAGS.unparse_flags()
    argv = flags.FLAGS(["recommend", *arguments])
    try:
        recommend.main(argv)
    finally:
        flags.FLAGS.unparse_flags()


def test_trains_evaluates_and_predicts(tmp_path, capsys):
    log = write_cluster_walks(tmp_path / "walks.csv", num_users=40)
    output_dir = tmp_path / "run"
    run_main(
        f"--input_file={log}",
        "--input_format=csv",
        f"--output_dir={output_dir}",
        "--preset=bert4rec_steam",
        "--max_sequence_length=16",
        "--num_train_epochs=2",
        "--train_batch_size=16",
        "--num_negatives=20",
        "--top_k=3",
        "--do_train",
        "--do_eval",
        "--do_predict",
    )
    assert "40 users (0 with fewer than 5 interactions dropped)" in capsys.readouterr().out
    results = json.loads((output_dir / "eval_results.json").read_text())
    assert results["users"] == 40
    assert {"test/full/ndcg@10", "test/full/hr@10", "test/pop20/ndcg@10", "test/pop20/mrr"} <= set(
        results
    )
    assert len(json.loads((output_dir / "history.json").read_text())["loss"]) == 2
    assert len((output_dir / "predictions.tsv").read_text().splitlines()) == 1 + 40 * 3
    assert json.loads((output_dir / "item_ids.json").read_text())["item_ids"][0].startswith("item")
    # A later run evaluates the saved model.
    run_main(
        f"--input_file={log}",
        "--input_format=csv",
        f"--output_dir={output_dir}",
        "--preset=bert4rec_steam",
        "--num_negatives=20",
        "--do_eval",
    )
    assert json.loads((output_dir / "eval_results.json").read_text()) == results


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--input_format=csv", "--output_dir=o", "--do_train"], "--input_file is required"),
        (["--input_file=f", "--input_format=csv", "--output_dir=o"], "At least one of --do_train"),
        (
            [
                "--input_file=f",
                "--input_format=csv",
                "--output_dir=o",
                "--do_eval",
                "--min_interactions=2",
            ],
            "--min_interactions must be at least 3",
        ),
        (
            [
                "--input_file=f",
                "--input_format=csv",
                "--output_dir=o",
                "--do_eval",
                "--preset=bert_tiny",
            ],
            "--preset=bert_tiny: not one of",
        ),
    ],
)
def test_bad_flags_are_named(arguments, message):
    with pytest.raises(app.UsageError, match=message):
        run_main(*arguments)


def test_a_malformed_log_names_its_line(tmp_path):
    log = tmp_path / "ratings.dat"
    log.write_text("1::10::5::100\n1::11::5\n")
    with pytest.raises(ValueError, match=r"ratings.dat:2: expected UserID::MovieID"):
        run_main(
            f"--input_file={log}",
            "--input_format=movielens",
            f"--output_dir={tmp_path}/o",
            "--do_train",
        )
