"""The project's own format, format detection, .keras files and safe saving."""

import json
import os

import keras
import numpy as np
import pytest
from keras import ops

from bert_keras.checkpoints import detect_format
from bert_keras.checkpoints import huggingface
from bert_keras.checkpoints import load_checkpoint
from bert_keras.models.bert_backbone import BertBackbone
from tests.checkpoints import save_tiny
from tests.checkpoints import tiny_inputs

TINY = dict(
    vocabulary_size=40,
    num_layers=2,
    num_heads=2,
    hidden_dim=8,
    intermediate_dim=16,
    max_sequence_length=16,
)


def _outputs(backbone):
    return {name: ops.convert_to_numpy(value) for name, value in backbone(tiny_inputs()).items()}


def _assert_same_weights(first, second):
    assert [w.path for w in first.weights] == [w.path for w in second.weights]
    for a, b in zip(first.weights, second.weights):
        np.testing.assert_array_equal(
            ops.convert_to_numpy(a), ops.convert_to_numpy(b), err_msg=a.path
        )


def test_own_format_keeps_settings_config_json_cannot_hold(tmp_path):
    backbone = BertBackbone(
        **TINY,
        activation="relu",
        dropout=0.2,
        attention_dropout=0.05,
        layer_norm_epsilon=1e-6,
        dtype="mixed_bfloat16",
        name="my_bert",
    )
    backbone.save_to_preset(tmp_path / "saved")
    restored = BertBackbone.from_preset(tmp_path / "saved")
    assert restored.get_config() == backbone.get_config()
    _assert_same_weights(backbone, restored)
    config = json.loads((tmp_path / "saved" / "config.json").read_text())
    assert config["hidden_act"] == "relu" and config["attention_probs_dropout_prob"] == 0.05
    assert config["layer_norm_eps"] == 1e-6 and config["architectures"] == ["BertModel"]


def test_bert_keras_json_is_preferred_and_huggingface_reads_the_rest(tmp_path):
    BertBackbone(**TINY, dtype="mixed_float16").save_to_preset(tmp_path / "saved")
    assert detect_format(tmp_path / "saved") == "bert_keras"
    as_huggingface = load_checkpoint(tmp_path / "saved", format="huggingface")
    assert "dtype" not in as_huggingface.backbone_config
    assert (
        load_checkpoint(tmp_path / "saved").backbone_config["dtype"]["config"]["name"]
        == "mixed_float16"
    )


def test_overrides_apply_to_checkpoints(tmp_path):
    save_tiny("BertModel", tmp_path)
    backbone = BertBackbone.from_preset(str(tmp_path), dropout=0.0, dtype="mixed_bfloat16")
    assert backbone.dropout == 0.0 and backbone.dtype_policy.name == "mixed_bfloat16"


def test_vocabulary_and_tokenizer_config(tmp_path):
    vocabulary = tmp_path / "vocab.txt"
    vocabulary.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n")
    BertBackbone(**TINY).save_to_preset(
        tmp_path / "saved", vocabulary_file=vocabulary, lowercase=False
    )
    assert (tmp_path / "saved" / "vocab.txt").read_text() == vocabulary.read_text()
    tokenizer_config = json.loads((tmp_path / "saved" / "tokenizer_config.json").read_text())
    assert tokenizer_config["do_lower_case"] is False and tokenizer_config["model_max_length"] == 16
    checkpoint = load_checkpoint(tmp_path / "saved")
    assert checkpoint.vocabulary_file == str(tmp_path / "saved" / "vocab.txt")


def test_existing_directory_is_refused_unless_overwrite(tmp_path):
    first, second = BertBackbone(**TINY), BertBackbone(**TINY)
    first.save_to_preset(tmp_path / "saved")
    with pytest.raises(
        FileExistsError, match=f"Output directory {tmp_path / 'saved'} exists and is not empty"
    ):
        second.save_to_preset(tmp_path / "saved")
    second.save_to_preset(tmp_path / "saved", overwrite=True)
    _assert_same_weights(second, BertBackbone.from_preset(tmp_path / "saved"))
    assert sorted(os.listdir(tmp_path)) == ["saved"]


def test_interrupted_save_leaves_nothing(tmp_path, monkeypatch):
    def fail(directory, tensors):
        open(os.path.join(directory, "model.safetensors"), "w").write("half")
        raise KeyboardInterrupt

    monkeypatch.setattr(huggingface, "write_tensors", fail)
    with pytest.raises(KeyboardInterrupt):
        BertBackbone(**TINY).save_to_preset(tmp_path / "saved")
    assert os.listdir(tmp_path) == []


def test_interrupted_overwrite_keeps_the_old_directory(tmp_path, monkeypatch):
    backbone = BertBackbone(**TINY)
    backbone.save_to_preset(tmp_path / "saved")
    monkeypatch.setattr(huggingface, "write_tensors", lambda *args: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        BertBackbone(**TINY).save_to_preset(tmp_path / "saved", overwrite=True)
    _assert_same_weights(backbone, BertBackbone.from_preset(tmp_path / "saved"))


def test_keras_file_loads_in_safe_mode(tmp_path):
    backbone = BertBackbone(**TINY, activation="gelu")
    backbone.save(tmp_path / "backbone.keras")
    for path in (tmp_path / "backbone.keras", tmp_path):
        restored = BertBackbone.from_preset(path)
        assert restored.get_config() == backbone.get_config()
        _assert_same_weights(backbone, restored)


def test_keras_file_of_another_model_is_refused(tmp_path):
    inputs = keras.Input((4,))
    keras.Model(inputs, keras.layers.Dense(2)(inputs)).save(tmp_path / "other.keras")
    with pytest.raises(ValueError, match="holds a Functional; expected a BertBackbone"):
        BertBackbone.from_preset(tmp_path / "other.keras")


def test_missing_path_is_named(tmp_path):
    with pytest.raises(
        FileNotFoundError, match=f"Checkpoint path {tmp_path / 'absent'} does not exist"
    ):
        BertBackbone.from_preset(tmp_path / "absent")


def test_unrecognised_directory_lists_what_was_looked_for(tmp_path):
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(ValueError, match=f"No checkpoint recognised in {tmp_path}") as error:
        BertBackbone.from_preset(tmp_path)
    for expected in ("config.json", "model.safetensors", "bert_config.json", ".keras", "notes.txt"):
        assert expected in str(error.value)


def test_format_must_fit_the_directory(tmp_path):
    save_tiny("BertModel", tmp_path)
    with pytest.raises(ValueError, match="holds a 'huggingface' checkpoint, not 'original'"):
        load_checkpoint(tmp_path, format="original")


def test_preset_names_still_build_random_backbones():
    assert BertBackbone.from_preset("bert_tiny").num_layers == 2
    with pytest.raises(ValueError, match="Unknown preset 'bert_huge'"):
        BertBackbone.from_preset("bert_huge")


def test_huggingface_directory_is_not_our_format(tmp_path):
    save_tiny("BertModel", tmp_path)
    with pytest.raises(ValueError, match="holds a 'huggingface' checkpoint, not 'bert_keras'"):
        load_checkpoint(tmp_path, format="bert_keras")
