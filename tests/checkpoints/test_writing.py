"""Checkpoints written whole: settings config.json cannot hold, tokenizer files, safe saving,
the sentence-transformers length kept by every format."""

import json
import os

import pytest

from bert_keras.checkpoints import OUTPUT_FORMATS
from bert_keras.checkpoints import huggingface
from bert_keras.checkpoints import read_checkpoint
from bert_keras.checkpoints import tokenizer_settings
from bert_keras.checkpoints import write_checkpoint
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_classifier import BertClassifier
from bert_keras.models.bert_sentence_encoder import BertSentenceEncoder
from bert_keras.models.checkpoint_conversion import convert_checkpoint
from bert_keras.models.checkpoint_weights import model_checkpoint
from tests.checkpoints import assert_same_weights
from tests.checkpoints import save_tiny
from tests.test_case import TINY_BACKBONE


def test_own_format_keeps_settings_config_json_cannot_hold(tmp_path):
    backbone = BertBackbone(
        **TINY_BACKBONE,
        activation="relu",
        dropout=0.2,
        attention_dropout=0.05,
        layer_norm_epsilon=1e-6,
        dtype="mixed_bfloat16",
        name="my_bert",
    )
    backbone.save_to_preset(tmp_path / "saved")
    restored = BertBackbone.from_preset(tmp_path / "saved")
    # All but the run's precision, which a checkpoint leaves to whoever loads it.
    assert restored.dtype_policy.name == "float32"
    assert restored.get_config() == {
        **backbone.get_config(),
        "dtype": restored.get_config()["dtype"],
    }
    assert_same_weights(backbone, restored)
    config = json.loads((tmp_path / "saved" / "config.json").read_text())
    assert config["hidden_act"] == "relu" and config["attention_probs_dropout_prob"] == 0.05
    assert config["layer_norm_eps"] == 1e-6 and config["architectures"] == ["BertModel"]


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_every_file_written_has_the_permissions_the_umask_gives(tmp_path, umask):
    previous = os.umask(umask)
    try:
        BertBackbone(**TINY_BACKBONE).save_to_preset(tmp_path / "saved")
    finally:
        os.umask(previous)
    modes = {path.name: path.stat().st_mode & 0o777 for path in (tmp_path / "saved").iterdir()}
    assert modes == dict.fromkeys(modes, 0o666 & ~umask)  # model.safetensors too: a server reads it


def test_vocabulary_and_tokenizer_config(tmp_path):
    vocabulary = tmp_path / "vocab.txt"
    vocabulary.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n")
    BertBackbone(**TINY_BACKBONE).save_to_preset(
        tmp_path / "saved", vocabulary_file=vocabulary, lowercase=False
    )
    assert (tmp_path / "saved" / "vocab.txt").read_text() == vocabulary.read_text()
    tokenizer_config = json.loads((tmp_path / "saved" / "tokenizer_config.json").read_text())
    assert tokenizer_config["do_lower_case"] is False and tokenizer_config["model_max_length"] == 16
    checkpoint = read_checkpoint(tmp_path / "saved")
    assert checkpoint.vocabulary_file == str(tmp_path / "saved" / "vocab.txt")


def test_existing_directory_is_refused_unless_overwrite(tmp_path):
    first, second = BertBackbone(**TINY_BACKBONE), BertBackbone(**TINY_BACKBONE)
    first.save_to_preset(tmp_path / "saved")
    with pytest.raises(
        FileExistsError, match=f"Output directory {tmp_path / 'saved'} exists and is not empty"
    ):
        second.save_to_preset(tmp_path / "saved")
    second.save_to_preset(tmp_path / "saved", overwrite=True)
    assert_same_weights(second, BertBackbone.from_preset(tmp_path / "saved"))
    assert sorted(os.listdir(tmp_path)) == ["saved"]


def test_interrupted_save_leaves_nothing(tmp_path, monkeypatch):
    def fail(directory, tensors):
        open(os.path.join(directory, "model.safetensors"), "w").write("half")
        raise KeyboardInterrupt

    monkeypatch.setattr(huggingface, "write_tensors", fail)
    with pytest.raises(KeyboardInterrupt):
        BertBackbone(**TINY_BACKBONE).save_to_preset(tmp_path / "saved")
    assert os.listdir(tmp_path) == []


def test_interrupted_overwrite_keeps_the_old_directory(tmp_path, monkeypatch):
    backbone = BertBackbone(**TINY_BACKBONE)
    backbone.save_to_preset(tmp_path / "saved")
    monkeypatch.setattr(huggingface, "write_tensors", lambda *args: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        BertBackbone(**TINY_BACKBONE).save_to_preset(tmp_path / "saved", overwrite=True)
    assert_same_weights(backbone, BertBackbone.from_preset(tmp_path / "saved"))


@pytest.mark.parametrize("output_format", ["original", "keras_hub"])
def test_other_formats_keep_labels_task_and_tokenizer_settings_beside(tmp_path, output_format):
    classifier = BertClassifier(
        BertBackbone(**{**TINY_BACKBONE, "activation": "gelu_approximate"}), 3
    )
    checkpoint = model_checkpoint(
        classifier,
        heads=BertClassifier.checkpoint_heads(),
        label_names=["neg", "pos", "neu"],
        task_config={"text_pair": True, "max_seq_length": 8},
        tokenizer_settings=tokenizer_settings(lowercase=False, max_input_chars_per_word=200),
    )
    write_checkpoint(checkpoint, tmp_path / "written", format=output_format)
    written = read_checkpoint(tmp_path / "written")
    assert written.format == output_format
    assert written.label_names == ["neg", "pos", "neu"]
    assert written.task_config == {"text_pair": True, "max_seq_length": 8}
    assert written.tokenizer_settings == checkpoint.tokenizer_settings


@pytest.mark.parametrize("output_format", OUTPUT_FORMATS)
def test_conversion_keeps_the_sentence_transformers_length(tmp_path, output_format):
    source = tmp_path / "sentence_transformers"
    save_tiny("BertModel", source, hidden_act="gelu_new")  # every format computes tanh GELU
    (source / "vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"])
    )
    settings = '{"max_seq_length": 12, "do_lower_case": false}'
    (source / "sentence_bert_config.json").write_text(settings)
    convert_checkpoint(source, tmp_path / "converted", output_format=output_format)
    assert (tmp_path / "converted" / "sentence_bert_config.json").read_text() == settings
    encoder = BertSentenceEncoder.from_preset(str(tmp_path / "converted"))
    assert encoder.preprocessor.sequence_length == 12  # 16 without it: the backbone's positions
