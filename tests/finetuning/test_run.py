"""A fine-tuning run exports its model with label names; the export loads as a task model."""

import json

import numpy as np
import pytest

from bert_keras.checkpoints import read_checkpoint
from bert_keras.checkpoints import write_checkpoint
from bert_keras.finetuning.classification import ClassificationRun
from bert_keras.finetuning.tagging import TaggingRun
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_classifier import BertClassifier
from bert_keras.models.bert_token_classifier import BertTokenClassifier

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "paris", "is", "fine"]


@pytest.fixture
def checkpoint(tmp_path):
    vocabulary = tmp_path / "vocab.txt"
    vocabulary.write_text("\n".join(WORDS) + "\n")
    directory = str(tmp_path / "checkpoint")
    BertBackbone(len(WORDS), 1, 2, 8, 16, max_sequence_length=16).save_to_preset(
        directory, vocabulary_file=vocabulary
    )
    return directory


def test_classification_export_loads_with_its_label_names(checkpoint, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.tsv").write_text(
        "text\tlabel\ngood\tpositive\nbad\tnegative\ngood good\tpositive\n"
    )
    run = ClassificationRun("csv", str(data), checkpoint, str(tmp_path / "out"), max_seq_length=8)
    run.train(batch_size=2, learning_rate=1e-3, num_epochs=1, verbose=0)

    export = str(tmp_path / "out" / "export")
    assert read_checkpoint(export).label_names == list(run.label_names)
    assert read_checkpoint(export).task_config == {"text_pair": False, "max_seq_length": 8}
    config = json.loads((tmp_path / "out" / "export" / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert config["id2label"] == {str(i): name for i, name in enumerate(run.label_names)}
    restored = BertClassifier.from_preset(export, num_classes=2, sequence_length=8)
    texts = ["good", "bad fine"]
    features = {name: value.numpy() for name, value in run.preprocessor(texts).items()}
    np.testing.assert_allclose(
        restored.predict(texts, verbose=0), run.model.predict(features, verbose=0), atol=1e-5
    )


def test_tagging_export_names_its_tags_and_a_new_run_reads_them(checkpoint, tmp_path):
    data = tmp_path / "conll"
    data.mkdir()
    (data / "train.txt").write_text("paris B-LOC\nis O\nfine O\n\ngood O\nparis B-LOC\n")
    run = TaggingRun(str(data), checkpoint, str(tmp_path / "out"), max_seq_length=8)
    run.train(batch_size=2, learning_rate=1e-3, num_epochs=1, verbose=0)
    export = str(tmp_path / "out" / "export")
    assert read_checkpoint(export).label_names == run.label_names == ["O", "B-LOC"]
    tagger = BertTokenClassifier.from_preset(export, num_classes=2)
    np.testing.assert_array_equal(
        np.asarray(tagger.get_layer("logits").kernel),
        np.asarray(run.model.get_layer("logits").kernel),
    )
    # Data tagged only "O": the names (and the head) come from the export's id2label.
    only_o = tmp_path / "only_o"
    only_o.mkdir()
    (only_o / "train.txt").write_text("is O\nfine O\n")
    again = TaggingRun(str(only_o), export, str(tmp_path / "again"), max_seq_length=8)
    assert again.label_names == ["O", "B-LOC"]


def test_label_names_must_match_the_head(checkpoint, tmp_path):
    loaded = read_checkpoint(checkpoint)
    loaded.head_weights["classifier"] = {
        "kernel": np.zeros((8, 2), "float32"),
        "bias": np.zeros(2, "float32"),
    }
    loaded.label_names = ["a", "b", "c"]
    with pytest.raises(ValueError, match=r"names 3 labels .* has 2 outputs"):
        write_checkpoint(loaded, str(tmp_path / "bad"))


def test_a_pair_classification_export_records_its_pairs(checkpoint, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.tsv").write_text(
        "text\ttext_pair\tlabel\ngood\tbad\tno\ngood\tgood\tyes\nbad\tbad\tyes\n"
    )
    run = ClassificationRun("csv", str(data), checkpoint, str(tmp_path / "out"), max_seq_length=8)
    run.train(batch_size=2, learning_rate=1e-3, num_epochs=1, verbose=0)
    assert read_checkpoint(str(tmp_path / "out" / "export")).task_config == {
        "text_pair": True,
        "max_seq_length": 8,
    }
