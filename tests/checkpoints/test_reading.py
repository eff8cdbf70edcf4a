"""Format detection, the readers, .keras files in safe mode, and the errors that name the problem."""

import json
import os
import re

import keras
import numpy as np
import pytest

from bert_keras.checkpoints import detect_format
from bert_keras.checkpoints import read_checkpoint
from bert_keras.checkpoints import write_checkpoint
from bert_keras.models.bert_backbone import BertBackbone
from tests.checkpoints import assert_same_weights
from tests.checkpoints import save_tiny
from tests.test_case import TINY_BACKBONE


def test_bert_keras_json_is_preferred_and_huggingface_reads_the_rest(tmp_path):
    BertBackbone(**TINY_BACKBONE, dtype="mixed_float16").save_to_preset(tmp_path / "saved")
    assert detect_format(tmp_path / "saved") == "bert_keras"
    as_huggingface = read_checkpoint(tmp_path / "saved", format="huggingface")
    assert "dtype" not in as_huggingface.backbone_config
    # Saved as every export is: float32, whatever the run computed in.
    assert read_checkpoint(tmp_path / "saved").backbone_config["dtype"] == "float32"


def test_overrides_apply_to_checkpoints(tmp_path):
    save_tiny("BertModel", tmp_path)
    backbone = BertBackbone.from_preset(str(tmp_path), dropout=0.0, dtype="mixed_bfloat16")
    assert backbone.dropout == 0.0 and backbone.dtype_policy.name == "mixed_bfloat16"


def test_keras_file_loads_in_safe_mode(tmp_path):
    backbone = BertBackbone(**TINY_BACKBONE, activation="gelu")
    backbone.save(tmp_path / "backbone.keras")
    for path in (tmp_path / "backbone.keras", tmp_path):
        restored = BertBackbone.from_preset(path)
        assert restored.get_config() == backbone.get_config()
        assert_same_weights(backbone, restored)


def test_keras_file_of_another_model_is_refused(tmp_path):
    inputs = keras.Input((4,))
    keras.Model(inputs, keras.layers.Dense(2)(inputs)).save(tmp_path / "other.keras")
    with pytest.raises(ValueError, match="holds a Functional; expected a BertBackbone"):
        BertBackbone.from_preset(tmp_path / "other.keras")


@pytest.mark.one_backend  # files only
def test_a_checkpoint_a_stopped_replacement_moved_aside_is_named_where_it_lies(tmp_path):
    save_tiny("BertModel", tmp_path / "export")
    moved_aside = tmp_path / ".export.partial-k2x9-old"  # killed between the two renames
    os.rename(tmp_path / "export", moved_aside)
    with pytest.raises(FileNotFoundError) as missing:
        read_checkpoint(tmp_path / "export")
    assert str(missing.value) == (
        f"Checkpoint path {tmp_path / 'export'} does not exist. A run replacing it stopped part "
        f"way: its previous contents are in {moved_aside}, which the next write of it puts back "
        "(or rename that directory to it)."
    )


def test_a_keras_file_that_is_not_a_zip_is_named(tmp_path):
    path = tmp_path / "backbone.keras"
    path.write_text("not a zip")
    with pytest.raises(ValueError, match=re.escape(f"{path} is not a .keras (zip) file")):
        read_checkpoint(path)


def test_a_cut_weights_file_or_broken_json_is_named(tmp_path):
    BertBackbone(**TINY_BACKBONE).save_to_preset(tmp_path / "saved")
    weights = tmp_path / "saved" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])  # as a download cut short leaves it
    with pytest.raises(ValueError, match=f"{weights} is not a readable safetensors file"):
        read_checkpoint(tmp_path / "saved")
    config = tmp_path / "saved" / "config.json"
    config.write_text(config.read_text()[:-3])
    with pytest.raises(ValueError, match=f"{config} is not valid JSON: "):
        read_checkpoint(tmp_path / "saved")


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
        read_checkpoint(tmp_path, format="original")


def test_preset_names_still_build_random_backbones():
    assert BertBackbone.from_preset("bert_tiny").num_layers == 2
    with pytest.raises(ValueError, match="Unknown preset 'bert_huge'"):
        BertBackbone.from_preset("bert_huge")


def test_huggingface_directory_is_not_our_format(tmp_path):
    save_tiny("BertModel", tmp_path)
    with pytest.raises(ValueError, match="holds a 'huggingface' checkpoint, not 'bert_keras'"):
        read_checkpoint(tmp_path, format="bert_keras")


def test_an_original_checkpoint_prefix_reads_as_its_directory(tmp_path):
    # The original scripts' --init_checkpoint=DIR/bert_model.ckpt.
    BertBackbone(**TINY_BACKBONE).save_to_preset(tmp_path / "saved")
    write_checkpoint(read_checkpoint(tmp_path / "saved"), tmp_path / "tf1", format="original")
    from_directory = read_checkpoint(tmp_path / "tf1")
    from_prefix = read_checkpoint(tmp_path / "tf1" / "bert_model.ckpt")
    assert from_prefix.format == "original" and from_prefix.directory == str(tmp_path / "tf1")
    assert from_prefix.backbone_config == from_directory.backbone_config
    for name, weight in from_directory.backbone_weights.items():
        np.testing.assert_array_equal(from_prefix.backbone_weights[name], weight)


def test_a_prefix_that_does_not_stand_for_its_directory_asks_for_the_directory(tmp_path):
    (tmp_path / "model.ckpt-7.index").write_text("")
    with pytest.raises(ValueError, match=r"without bert_config\.json beside it; give the check"):
        read_checkpoint(tmp_path / "model.ckpt-7")
    (tmp_path / "bert_config.json").write_text("{}")
    (tmp_path / "bert_model.ckpt.index").write_text("")
    with pytest.raises(ValueError, match="reads bert_model.ckpt; give the checkpoint directory"):
        read_checkpoint(tmp_path / "model.ckpt-7")
    (tmp_path / "bert_model.ckpt.index").unlink()
    (tmp_path / "model.ckpt-8.index").write_text("")
    with pytest.raises(ValueError, match="holds 2 checkpoints .* give the checkpoint directory"):
        read_checkpoint(tmp_path / "model.ckpt-7")


def test_a_vocabulary_larger_than_the_word_embeddings_is_refused(tmp_path):
    save_tiny("BertModel", tmp_path)  # 40 word embeddings
    (tmp_path / "vocab.txt").write_text("\n".join(f"token{i}" for i in range(40)) + "\n")
    assert read_checkpoint(tmp_path).backbone_config["vocabulary_size"] == 40
    (tmp_path / "vocab.txt").write_text("\n".join(f"token{i}" for i in range(42)) + "\n")
    with pytest.raises(
        ValueError,
        match=r"vocab.txt holds 42 tokens but the checkpoint has 40 word embeddings "
        r"\(vocabulary_size\): ids 40 to 41 would index past them",
    ):
        read_checkpoint(tmp_path)


@pytest.mark.parametrize(
    "edit, message",
    [
        ({"hidden_size": "8"}, "config.json: hidden_size is '8' but must be a whole number"),
        ({"num_hidden_layers": 2.0}, "config.json: num_hidden_layers is 2.0 but must be a whole"),
        ({"type_vocab_size": True}, "config.json: type_vocab_size is True but must be a whole"),
        ({"hidden_dropout_prob": 1.5}, "config.json: hidden_dropout_prob is 1.5 but must be a"),
        ({"layer_norm_eps": "1e-12"}, "config.json: layer_norm_eps is '1e-12' but must be a"),
        (
            {"attention_probs_dropout_prob": None},
            "config.json: attention_probs_dropout_prob is None but must be a number in [0, 1)",
        ),
    ],
)
def test_a_config_value_of_the_wrong_type_is_named_with_its_key(tmp_path, edit, message):
    save_tiny("BertModel", tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, **edit}))
    with pytest.raises(ValueError, match=re.escape(message)):
        read_checkpoint(tmp_path)
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="config.json holds a JSON list, not an object"):
        read_checkpoint(tmp_path, format="huggingface")


def test_a_hidden_size_the_heads_do_not_divide_names_the_config_keys(tmp_path):
    save_tiny("BertModel", tmp_path)  # hidden_size 8
    config_file = tmp_path / "config.json"
    config = json.loads(config_file.read_text())
    config_file.write_text(json.dumps({**config, "num_attention_heads": 3}))
    with pytest.raises(ValueError) as error:
        BertBackbone.from_preset(tmp_path)
    assert str(error.value) == (
        f"{config_file}: hidden_size 8 is not a multiple of num_attention_heads 3 (each "
        "attention head takes an equal part of the hidden vector)."
    )


@pytest.mark.parametrize("format", ["huggingface", "keras_hub"])
def test_a_missing_or_misspelt_size_key_is_named_in_a_short_error(tmp_path, format):
    # With heads, whose shapes would not fit the wrong hidden size either.
    model_class = "BertForPreTraining" if format == "huggingface" else "BertModel"
    save_tiny(model_class, tmp_path / "huggingface", hidden_size=12, hidden_act="gelu_new")
    directory = tmp_path / "huggingface"
    config_file = directory / "config.json"
    config = json.loads(config_file.read_text())
    config["hiden_size"] = config.pop("hidden_size")  # transformers' default, 768, is used
    del config["intermediate_size"]  # 3072
    if format == "keras_hub":
        write_checkpoint(read_checkpoint(directory), tmp_path / "keras_hub", format="keras_hub")
        directory = tmp_path / "keras_hub"
        config_file = directory / "config.json"
        config = json.loads(config_file.read_text())
        config["config"]["hidden_dim"] = 768
    config_file.write_text(json.dumps(config))
    with pytest.raises(ValueError) as error:
        BertBackbone.from_preset(directory)
    message = str(error.value)
    if format == "huggingface":
        assert message == (
            f"{config_file}: no hidden_size, so 768 (the default), but the weights say 12 "
            "(in bert.embeddings.word_embeddings.weight); 'hiden_size' may be a misspelt "
            "hidden_size. no intermediate_size, so 3072 (the default), but the weights say 16 "
            "(in bert.encoder.layer.0.intermediate.dense.weight)."
        )
    else:
        assert message.startswith(f"{config_file}: hidden_dim is 768, but the weights say 12 (")
        assert len(message) < 300


@pytest.mark.parametrize(
    "edit, said",
    [
        (
            lambda config: config.update(num_hiden_layers=config.pop("num_hidden_layers")),
            "no num_hidden_layers, so 12 (the default)",
        ),
        (lambda config: config.update(num_hidden_layers=3), "num_hidden_layers is 3"),
    ],
    ids=["misspelt", "wrong"],
)
def test_a_layer_count_the_weights_contradict_is_named_with_its_key(tmp_path, edit, said):
    save_tiny("BertModel", tmp_path)  # 2 layers
    config = json.loads((tmp_path / "config.json").read_text())
    edit(config)
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError) as error:
        read_checkpoint(tmp_path)
    expected = (
        f"{tmp_path / 'config.json'}: {said}, but the weights hold 2 layers "
        "(encoder.layer.0.attention.self.query.weight to "
        "encoder.layer.1.attention.self.query.weight)"
    )
    misspelt = "; 'num_hiden_layers' may be a misspelt num_hidden_layers"
    assert str(error.value) == expected + (misspelt if "default" in said else "") + "."


def test_a_bert_keras_json_without_config_is_named(tmp_path):
    save_tiny("BertModel", tmp_path / "source")
    own_config = tmp_path / "source" / "bert_keras.json"
    for text in ('{"tokenizer": {"lowercase": true}}', '{"config": null}', "[]"):
        own_config.write_text(text)
        with pytest.raises(ValueError, match=f'{own_config} has no "config"'):
            read_checkpoint(tmp_path / "source")
    assert read_checkpoint(tmp_path / "source", format="huggingface").format == "huggingface"
