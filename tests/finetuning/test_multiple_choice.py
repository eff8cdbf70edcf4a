"""tasks.multiple_choice end to end on a small synthetic SWAG-format set it must learn."""

import json
import subprocess
import sys

import keras
import numpy as np
import pytest

from bert_keras.checkpoints import read_checkpoint
from bert_keras.checkpoints import write_checkpoint
from bert_keras.data.swag import read_swag
from bert_keras.finetuning.multiple_choice import MultipleChoiceRun
from bert_keras.models.bert_backbone import BertBackbone
from tests.programs import program

COLORS = ["red", "blue", "green", "gold"]
VOCABULARY = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    *COLORS,
    "a",
    "car",
    "is",
    "it",
    "was",
    ".",
]
HEADER = (
    "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"
)


def _swag_file(path, count, seed, labelled=True):
    """Context "a COLOR car ."; only the right ending ("it was a car .") completes it as a car.

    The distractors end "it was COLOR ." or "it was a COLOR ."; the right one
    sits at a random index, so a model that mixes up choices, examples or
    labels stays at chance (0.25).
    """
    rng = np.random.default_rng(seed)
    rows = []
    for index in range(count):
        color = str(rng.choice(COLORS))
        label = int(rng.integers(4))
        endings = [f"{'a ' if rng.random() < 0.5 else ''}{rng.choice(COLORS)} ." for _ in range(4)]
        endings[label] = "a car ."
        context = f"a {color} car ."
        row = [f"v{index}", str(index), f"{context} it was", context, "it was", "gold", *endings]
        rows.append(",".join(row + ([str(label)] if labelled else [])))
    header = HEADER if labelled else HEADER.replace(",label", "")
    path.write_text(header + "\n".join(rows) + "\n")


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    directory = tmp_path_factory.mktemp("checkpoint")
    (directory / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n")
    backbone = BertBackbone(len(VOCABULARY), 1, 2, 32, 64, max_sequence_length=16, dropout=0.0)
    backbone.save_to_preset(str(directory / "tiny"), vocabulary_file=str(directory / "vocab.txt"))
    return str(directory / "tiny")


@pytest.mark.one_backend
@pytest.mark.large
def test_program_learns_to_choose_the_ending_that_completes_the_context(tiny_checkpoint, tmp_path):
    data, output = tmp_path / "data", tmp_path / "output"
    data.mkdir()
    _swag_file(data / "train.csv", 128, seed=0)
    _swag_file(data / "val.csv", 64, seed=1)
    _swag_file(data / "test.csv", 8, seed=2, labelled=False)
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "tasks.multiple_choice",
            f"--data_dir={data}",
            f"--init_checkpoint={tiny_checkpoint}",
            f"--output_dir={output}",
            "--do_train",
            "--do_eval",
            "--do_predict",
            "--max_seq_length=12",
            "--train_batch_size=16",
            "--learning_rate=3e-3",
            "--num_train_epochs=4",
            "--seed=1",
        ],
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    results = json.loads((output / "eval_results.json").read_text())
    assert results["examples"] == 64
    # Chance is 0.25 (± 0.054 over 64 examples).
    assert results["accuracy"] > 0.7, results
    dev = (output / "predictions_dev.tsv").read_text().splitlines()
    labels = read_swag(str(data / "val.csv")).labels
    correct = sum(int(line.split("\t")[1]) == label for line, label in zip(dev[1:], labels))
    assert len(dev) == 65 and correct / 64 == pytest.approx(results["accuracy"])
    test = (output / "predictions_test.tsv").read_text().splitlines()
    assert len(test) == 9 and all(line.split("\t")[1] in "0123" for line in test[1:])


def test_dev_and_test_files_asked_for_are_checked_before_training(tiny_checkpoint, tmp_path):
    _swag_file(tmp_path / "train.csv", 8, seed=0)
    three_endings = (
        HEADER.replace("ending3,", "") + "v,0,s,a car .,it was,g,red .,a car .,blue .,1\n"
    )
    (tmp_path / "val.csv").write_text(three_endings)
    arguments = [
        f"--data_dir={tmp_path}",
        f"--init_checkpoint={tiny_checkpoint}",
        f"--output_dir={tmp_path / 'output'}",
        "--do_train",
        "--max_seq_length=16",
        "--train_batch_size=4",
    ]
    completed = program("tasks.multiple_choice")(*arguments, "--do_eval")
    assert completed.returncode != 0, completed.stderr[-2000:]
    assert "has 3 endings per example" in completed.stderr
    assert not (tmp_path / "output" / "history.jsonl").exists()  # no training ran
    (tmp_path / "test.csv").write_text(HEADER + "v,0,s,a car .,it was,g,red .,a car .,x,y,5\n")
    completed = program("tasks.multiple_choice")(*arguments, "--do_predict")
    assert completed.returncode != 0 and "test.csv:2: label '5'" in completed.stderr
    assert not (tmp_path / "output" / "history.jsonl").exists()


def test_scoring_a_head_of_random_weights_is_refused_by_the_program(tiny_checkpoint, tmp_path):
    _swag_file(tmp_path / "val.csv", 4, seed=1)
    arguments = [
        f"--data_dir={tmp_path}",
        f"--init_checkpoint={tiny_checkpoint}",
        f"--output_dir={tmp_path / 'output'}",
        "--max_seq_length=16",
        "--do_eval",
    ]
    completed = program("tasks.multiple_choice")(*arguments)
    assert completed.returncode == 1, completed.stderr[-2000:]
    assert "has no multiple-choice (classifier, 1 output) head that fits" in completed.stderr
    assert not (tmp_path / "output" / "eval_results.json").exists()


def test_a_directory_without_swag_files_is_named_with_the_names_looked_for(
    tiny_checkpoint, tmp_path
):
    for data_dir, what in [(tmp_path, "holds none of"), (tmp_path / "absent", "is no directory")]:
        with pytest.raises(ValueError, match=f"{data_dir} {what} .*train.csv, val.csv, dev.csv"):
            MultipleChoiceRun(str(data_dir), tiny_checkpoint, str(tmp_path / "output"), 16)


def test_a_test_file_labelled_minus_one_is_predicted(tiny_checkpoint, tmp_path):
    _swag_file(tmp_path / "train.csv", 4, seed=0)
    _swag_file(tmp_path / "test.csv", 3, seed=1)
    rows = (tmp_path / "test.csv").read_text().splitlines()
    unlabelled = [rows[0]] + [row.rsplit(",", 1)[0] + ",-1" for row in rows[1:]]
    (tmp_path / "test.csv").write_text("\n".join(unlabelled) + "\n")
    run = MultipleChoiceRun(
        str(tmp_path), tiny_checkpoint, str(tmp_path / "output"), 16, check_splits=("test",)
    )
    run.predict("test", batch_size=2)
    assert len((tmp_path / "output" / "predictions_test.tsv").read_text().splitlines()) == 4


def test_a_directory_holding_only_a_test_file_is_predicted(tiny_checkpoint, tmp_path):
    _swag_file(tmp_path / "test.csv", 3, seed=1, labelled=False)
    run = MultipleChoiceRun(str(tmp_path), tiny_checkpoint, str(tmp_path / "output"), 16)
    assert run.num_choices == 4
    run.predict("test", batch_size=2)
    assert len((tmp_path / "output" / "predictions_test.tsv").read_text().splitlines()) == 4


def test_program_flags_are_checked():
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "tasks.multiple_choice",
            "--data_dir=x",
            "--init_checkpoint=y",
            "--output_dir=z",
            "--do_eval",
            "--max_seq_length=2",
        ],
        capture_output=True,
        text=True,
    )
    assert completed.returncode != 0 and "--max_seq_length must be at least 3" in completed.stderr


def test_hugging_face_multiple_choice_head_scores_as_transformers(tmp_path):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    config = transformers.BertConfig(
        vocab_size=len(VOCABULARY),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        hidden_act="gelu",
    )
    torch.manual_seed(0)
    model = transformers.BertForMultipleChoice(config).eval()
    checkpoint = tmp_path / "checkpoint"
    model.save_pretrained(checkpoint)
    (checkpoint / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n")
    data = tmp_path / "data"
    data.mkdir()
    _swag_file(data / "val.csv", 6, seed=3)

    run = MultipleChoiceRun(str(data), str(checkpoint), str(tmp_path / "output"), max_seq_length=16)
    features = run._features(read_swag(str(data / "val.csv")))
    ours = keras.ops.convert_to_numpy(run.model(features, training=False))
    with torch.no_grad():
        theirs = model(
            input_ids=torch.tensor(features["token_ids"], dtype=torch.long),
            token_type_ids=torch.tensor(features["segment_ids"], dtype=torch.long),
            attention_mask=torch.tensor(features["padding_mask"], dtype=torch.long),
        ).logits.numpy()
    assert ours.shape == theirs.shape == (6, 4)
    np.testing.assert_allclose(ours, theirs, atol=1e-4)
    # Written back (and exported by a run), it is a multiple-choice model for transformers.
    write_checkpoint(read_checkpoint(str(checkpoint)), tmp_path / "written")
    config = json.loads((tmp_path / "written" / "config.json").read_text())
    assert config["architectures"] == ["BertForMultipleChoice"]
    run.export(run.model, "classifier", "choice_score", task_config={"task": "multiple_choice"})
    config = json.loads((tmp_path / "output" / "export" / "config.json").read_text())
    assert config["architectures"] == ["BertForMultipleChoice"]
