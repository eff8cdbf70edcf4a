"""The classification program's flags, and what a run checks of its data and checkpoint.

The real MiniLM checkpoint fine-tuned on SST-2 (../shared/data) is checked by
tests/tasks/test_demo.py, whose fine-tuning step is that run.
"""

import csv
import json
import subprocess
import sys

import numpy as np
import pytest

from bert_keras.checkpoints import read_checkpoint
from bert_keras.checkpoints import write_checkpoint
from bert_keras.finetuning.classification import ClassificationRun
from tests.finetuning.tiny_checkpoint import save_tiny_checkpoint
from tests.programs import run_module


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            ["--data_dir=x", "--init_checkpoint=y", "--output_dir=z", "--do_train"],
            "--task_name is required",
        ),
        (
            ["--task_name=SST-2", "--data_dir=x", "--init_checkpoint=y", "--output_dir=z"],
            "At least one of --do_train, --do_eval, --do_predict",
        ),
    ],
)
def test_program_flags_are_checked_and_named_in_one_line(flags, message):
    completed = subprocess.run(
        [sys.executable, "-m", "tasks.classify", *flags], capture_output=True, text=True
    )
    assert completed.returncode == 1
    [line] = completed.stderr.splitlines()  # not after the docstring and flags, as absl's
    assert line.startswith(f"classify: {message}")


WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "movie", "film", "fine"]


@pytest.fixture
def checkpoint(tmp_path):
    return save_tiny_checkpoint(tmp_path, WORDS)


def _with_head(checkpoint, directory, outputs, label_names=None, task_config=None, answer=None):
    """`checkpoint` with a classifier head of `outputs` outputs, always answering `answer`."""
    headed = read_checkpoint(checkpoint)
    bias = np.zeros(outputs, "float32")
    if answer is not None:
        bias[answer] = 10.0
    headed.head_weights["classifier"] = {"kernel": np.zeros((8, outputs), "float32"), "bias": bias}
    headed.label_names = label_names
    headed.task_config = task_config or {}
    write_checkpoint(headed, directory)
    return directory


def _data(directory, **files):
    directory.mkdir(exist_ok=True)
    for name, text in files.items():
        (directory / name.replace("_", ".")).write_text(text)
    return str(directory)


def test_a_regression_export_scores_and_predicts_without_a_train_file(checkpoint, tmp_path):
    rows = "text,label\ngood movie,4.5\nbad film,0.5\nfine,2.5\ngood,3.0\n"
    data = _data(tmp_path / "reg", train_csv=rows, dev_csv=rows)
    trained = ClassificationRun("csv", data, checkpoint, str(tmp_path / "a"), 8)
    trained.train(batch_size=2, learning_rate=1e-2, num_epochs=2, verbose=0)
    expected = trained.evaluate("dev", batch_size=2)
    scoring_only = _data(tmp_path / "reg_eval", dev_csv=rows, test_csv="text\nfine\ngood\n")
    export = str(tmp_path / "a" / "export")

    run = ClassificationRun(
        "csv", scoring_only, export, str(tmp_path / "b"), 8, splits=("dev", "test")
    )

    assert run.label_names == () and run.head_loaded
    results = run.evaluate("dev", batch_size=2)
    assert results["pearson"] == pytest.approx(expected["pearson"], abs=1e-5)
    assert (tmp_path / "b" / "predictions_dev.tsv").read_text() == (
        tmp_path / "a" / "predictions_dev.tsv"
    ).read_text()
    # A head of one output named as transformers names it is a regression too.
    named = _with_head(checkpoint, str(tmp_path / "named"), 1, label_names=["LABEL_0"])
    run = ClassificationRun("csv", scoring_only, named, str(tmp_path / "c"), 8, splits=("dev",))
    assert run.label_names == () and run.head_loaded


@pytest.mark.parametrize("names", [list(range(11)), [f"LABEL_{i}" for i in range(11)]])
def test_integer_classes_are_taken_in_run_glues_order(checkpoint, tmp_path, names):
    # run_glue names a csv task's integer classes by ints, else a head is named LABEL_i.
    head = _with_head(checkpoint, str(tmp_path / "head"), 11, label_names=names, answer=2)
    data = _data(
        tmp_path / "num",
        train_csv="text,label\n" + "".join(f"good,{label}\n" for label in range(11)),
        dev_csv="text,label\ngood,2\nbad,2\n",
    )

    run = ClassificationRun("csv", data, head, str(tmp_path / "out"), 8, splits=("dev",))

    assert run.label_names == tuple(str(label) for label in range(11))
    assert run.evaluate("dev", batch_size=2)["accuracy"] == 1.0
    written = (tmp_path / "out" / "predictions_dev.tsv").read_text()
    assert written == "index\tprediction\n0\t2\n1\t2\n"


def test_the_text_pair_column_is_in_every_file_or_in_none(checkpoint, tmp_path):
    pairs = _data(
        tmp_path / "pairs",
        train_csv="text,text_pair,label\ngood,movie,pos\nbad,film,neg\n",
        dev_csv="text,label\ngood,pos\n",
    )
    with pytest.raises(
        ValueError,
        match=r"dev.csv:1: the header has no text_pair column, but "
        r".*train.csv has",
    ):
        ClassificationRun("csv", pairs, checkpoint, str(tmp_path / "a"), 8)
    single = _data(
        tmp_path / "single",
        train_csv="text,label\ngood,pos\nbad,neg\n",
        test_csv="text,text_pair\ngood,movie\n",
    )
    with pytest.raises(
        ValueError,
        match=r"test.csv:1: the header names text_pair column, but "
        r".*train.csv has none",
    ):
        ClassificationRun("csv", single, checkpoint, str(tmp_path / "b"), 8)
    # Without a train file, an export says whether it reads pairs.
    export = _with_head(
        checkpoint, str(tmp_path / "pair_export"), 2, ["neg", "pos"], {"text_pair": True}
    )
    dev_only = _data(tmp_path / "dev_only", dev_csv="text,label\ngood,pos\n")
    with pytest.raises(ValueError, match=r"dev.csv:1: .* no text_pair column, but .*pair_export"):
        ClassificationRun("csv", dev_only, export, str(tmp_path / "c"), 8, splits=("dev",))


def test_the_files_the_steps_read_are_checked_when_the_run_is_built(checkpoint, tmp_path):
    data = _data(tmp_path / "data", train_csv="text,label\ngood,pos\nbad,neg\n")
    for splits, message in [
        (("train", "dev"), "--do_eval reads dev.csv or dev.tsv, but .*data has neither"),
        (("train", "test"), "--do_predict reads test.csv or test.tsv, but .*data has neither"),
    ]:
        with pytest.raises(ValueError, match=message):
            ClassificationRun("csv", data, checkpoint, str(tmp_path / "out"), 8, splits=splits)
    (tmp_path / "data" / "dev.csv").write_text("text\ngood\n")
    with pytest.raises(ValueError, match="--do_eval scores .*dev.csv, which has no label column"):
        ClassificationRun("csv", data, checkpoint, str(tmp_path / "out"), 8, ("train", "dev"))
    export = _with_head(checkpoint, str(tmp_path / "export"), 2, ["neg", "pos"])
    with pytest.raises(ValueError, match="--do_train reads train.csv or train.tsv, but .*has"):
        ClassificationRun("csv", str(tmp_path), export, str(tmp_path / "out"), 8, ("train",))
    glue = _data(tmp_path / "sst2", train_tsv="sentence\tlabel\ngood\t1\n")
    with pytest.raises(ValueError, match=r"--do_eval reads .*sst2/dev.tsv, which is not there"):
        ClassificationRun("SST-2", glue, checkpoint, str(tmp_path / "out"), 8, ("train", "dev"))


@pytest.mark.one_backend("tensorflow")  # a usage error, before any training
def test_a_missing_dev_file_stops_the_program_before_training(checkpoint, tmp_path):
    data = _data(tmp_path / "data", train_csv="text,label\ngood,pos\nbad,neg\n")
    output = tmp_path / "out"
    completed = run_module(
        "tasks.classify",
        "--task_name=csv",
        f"--data_dir={data}",
        f"--init_checkpoint={checkpoint}",
        f"--output_dir={output}",
        "--do_train",
        "--do_eval",
        "--max_seq_length=8",
        "--train_batch_size=2",
    )
    assert completed.returncode != 0
    assert "--do_eval reads dev.csv or dev.tsv, but" in completed.stderr
    assert "Traceback" not in completed.stderr  # a usage error
    assert not (output / "export").exists() and not (output / "history.jsonl").exists()


@pytest.mark.one_backend("tensorflow")  # a usage error, before any training
def test_scoring_without_a_train_file_or_class_names_is_a_usage_error(checkpoint, tmp_path):
    data = _data(tmp_path / "data", dev_csv="text,label\ngood,pos\n")
    completed = run_module(
        "tasks.classify",
        "--task_name=csv",
        f"--data_dir={data}",
        f"--init_checkpoint={checkpoint}",
        f"--output_dir={tmp_path / 'out'}",
        "--do_eval",
        "--max_seq_length=8",
    )
    assert completed.returncode == 1, completed.stderr[-2000:]
    assert "No train.csv or train.tsv in" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_scoring_needs_a_head_that_fits_unless_the_run_trains_one(checkpoint, tmp_path, caplog):
    data = _data(
        tmp_path / "three",
        train_csv="text,label\ngood,a\nbad,b\nfine,c\n",
        dev_csv="text,label\ngood,a\n",
    )
    export = _with_head(checkpoint, str(tmp_path / "two"), 2, ["neg", "pos"])
    with pytest.raises(
        ValueError,
        match=r"two's classifier head has 2 outputs \(classes \['neg', "
        r"'pos'\]\), but the data has 3 classes \['a', 'b', 'c'\]: it is not loa",
    ):
        ClassificationRun("csv", data, export, str(tmp_path / "out"), 8, splits=("dev",))
    with pytest.raises(ValueError, match="checkpoint has no classifier head, so --do_eval"):
        ClassificationRun("csv", data, checkpoint, str(tmp_path / "out"), 8, splits=("dev",))

    run = ClassificationRun("csv", data, export, str(tmp_path / "out"), 8, ("train", "dev"))

    assert "but the data has 3 classes ['a', 'b', 'c']: it is not loaded; the run trains" in (
        caplog.text
    )
    assert "taken in the data's order" not in caplog.text  # the head is not taken at all
    assert not run.head_loaded
    run.evaluate("dev", batch_size=2)  # a library caller is warned
    assert "Scoring with a classifier head of random weights" in caplog.text


def test_mrpc_f1_is_the_f1_of_class_1_whatever_the_heads_order(checkpoint, tmp_path):
    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    dev = "".join(f"{label}\t{i}\t{i}\tgood\tfine\n" for i, label in enumerate("110"))
    data = _data(tmp_path / "mrpc", dev_tsv=header + dev)
    head = _with_head(checkpoint, str(tmp_path / "head"), 2, label_names=["1", "0"], answer=0)

    run = ClassificationRun("MRPC", data, head, str(tmp_path / "out"), 8, splits=("dev",))

    assert run.label_names == ("1", "0")
    results = run.evaluate("dev", batch_size=2)  # "1" every time: precision 2/3, recall 1
    assert results["accuracy"] == pytest.approx(2 / 3) and results["f1"] == pytest.approx(0.8)


def test_an_undefined_correlation_is_written_as_null(checkpoint, tmp_path, caplog):
    data = _data(tmp_path / "one", dev_csv="text,label\ngood,4.5\n")
    head = _with_head(checkpoint, str(tmp_path / "head"), 1)

    run = ClassificationRun("csv", data, head, str(tmp_path / "out"), 8, splits=("dev",))
    returned = run.evaluate("dev", batch_size=2)  # the program prints it

    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    text = (tmp_path / "out" / "eval_results.json").read_text()
    results = json.loads(text, parse_constant=refuse)
    assert results["pearson"] is None and results["spearman"] is None
    assert returned == results
    assert "pearson, spearman undefined on these 1 examples" in caplog.text


def test_a_split_under_both_endings_is_refused_naming_both(checkpoint, tmp_path):
    rows = "text,label\ngood,pos\nbad,neg\n"
    data = _data(tmp_path / "both", train_csv=rows, train_tsv=rows.replace(",", "\t"))
    with pytest.raises(ValueError, match=r"both holds both train.csv and train.tsv: keep the one"):
        ClassificationRun("csv", data, checkpoint, str(tmp_path / "out"), 8, splits=("train",))


def test_a_class_name_with_a_tab_is_quoted_in_the_predictions(checkpoint, tmp_path):
    data = _data(tmp_path / "tab", dev_csv='text,label\ngood,"p\tos"\nbad,neg\n')
    head = _with_head(checkpoint, str(tmp_path / "head"), 2, ["neg", "p\tos"], answer=1)
    run = ClassificationRun("csv", data, head, str(tmp_path / "out"), 8, splits=("dev",))
    run.evaluate("dev", batch_size=2)
    with open(tmp_path / "out" / "predictions_dev.tsv", newline="") as file:
        rows = list(csv.reader(file, delimiter="\t"))
    assert rows == [["index", "prediction"], ["0", "p\tos"], ["1", "p\tos"]]


@pytest.mark.parametrize(
    "test_csv, answer, predicted",
    [
        ('text\ngood movie\n""\nbad movie\ngood film\n', 1, ["pos"] * 4),  # an empty text too
        ("text,label\ngood movie,-1\nbad film,\n", 0, ["neg"] * 2),  # Hugging Face's unlabelled
    ],
    ids=["without labels", "labels -1 or empty"],
)
def test_every_row_of_a_test_file_is_predicted(checkpoint, tmp_path, test_csv, answer, predicted):
    export = _with_head(checkpoint, str(tmp_path / "export"), 2, ["neg", "pos"], answer=answer)
    data = _data(tmp_path / "data", test_csv=test_csv)
    run = ClassificationRun("csv", data, export, str(tmp_path / "out"), 8, splits=("test",))
    run.predict("test", batch_size=3)
    written = (tmp_path / "out" / "predictions_test.tsv").read_text().splitlines()
    assert written == ["index\tprediction"] + [f"{i}\t{name}" for i, name in enumerate(predicted)]


def test_a_train_file_of_one_class_is_refused_not_taken_for_a_regression(checkpoint, tmp_path):
    data = _data(tmp_path / "data", train_csv="text,label\ngood film,pos\ngreat,pos\n")
    with pytest.raises(
        ValueError, match=r"train.csv: every example's label is 'pos'; a classifier needs two"
    ):
        ClassificationRun("csv", data, checkpoint, str(tmp_path / "out"), 8)


def test_a_data_dir_whose_name_looks_like_a_glob_is_read_as_named(checkpoint, tmp_path):
    data = _data(tmp_path / "sst2 [v2]*?", train_csv="text,label\ngood,pos\nbad,neg\n")
    run = ClassificationRun("csv", data, checkpoint, str(tmp_path / "out"), 8, splits=("train",))
    assert run.label_names == ("neg", "pos")


def test_transformers_default_class_names_stand_for_the_class_ids(checkpoint, tmp_path):
    names = ["LABEL_0", "LABEL_1"]
    export = _with_head(checkpoint, str(tmp_path / "export"), 2, names, answer=1)
    data = _data(tmp_path / "data", dev_csv="text,label\ngood movie,1\nbad film,0\ngood,1\n")
    run = ClassificationRun("csv", data, export, str(tmp_path / "out"), 8, splits=("dev",))
    assert run.label_names == ("0", "1")
    assert run.evaluate("dev", batch_size=2)["accuracy"] == pytest.approx(2 / 3)
