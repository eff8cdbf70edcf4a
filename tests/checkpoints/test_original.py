"""The original google-research format, written here from MiniLM's weights."""

import json
import os
import re
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers
from safetensors.numpy import load_file

from bert_keras.checkpoints import read_checkpoint
from bert_keras.models.bert_backbone import BertBackbone
from tests.checkpoints import MINILM_DIRECTORY
from tests.checkpoints import assert_close
from tests.checkpoints import max_difference
from tests.checkpoints import minilm_inputs
from tests.checkpoints import torch_outputs

HIDDEN, VOCABULARY = 384, 30522


def original_name(hf_name):
    """An HF BertModel tensor name -> (original variable name, transpose?)."""
    name = "bert/" + re.sub(r"layer\.(\d+)\.", r"layer_\1/", hf_name)
    name = name.replace(".", "/")
    for hf_suffix, suffix in (
        ("LayerNorm/weight", "LayerNorm/gamma"),
        ("LayerNorm/bias", "LayerNorm/beta"),
        ("_embeddings/weight", "_embeddings"),
    ):
        if name.endswith(hf_suffix):
            return name[: -len(hf_suffix)] + suffix, False
    if name.endswith("/weight"):
        return name[: -len("/weight")] + "/kernel", True
    return name, False


def heads(seed=0):
    random = np.random.default_rng(seed)

    def normal(*shape):
        return random.normal(size=shape).astype("float32")

    return {
        "cls/predictions/transform/dense/kernel": normal(HIDDEN, HIDDEN),
        "cls/predictions/transform/dense/bias": normal(HIDDEN),
        "cls/predictions/transform/LayerNorm/gamma": normal(HIDDEN),
        "cls/predictions/transform/LayerNorm/beta": normal(HIDDEN),
        "cls/predictions/output_bias": normal(VOCABULARY),
        "cls/seq_relationship/output_weights": normal(2, HIDDEN),
        "cls/seq_relationship/output_bias": normal(2),
    }


def write_original(directory, variables):
    os.makedirs(directory, exist_ok=True)
    names = sorted(variables)
    tf.raw_ops.SaveV2(
        prefix=os.path.join(directory, "bert_model.ckpt"),
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[variables[name] for name in names],
    )


def minilm_variables():
    variables = {}
    for hf_name, value in load_file(os.path.join(MINILM_DIRECTORY, "model.safetensors")).items():
        if hf_name == "embeddings.position_ids":
            continue
        name, transpose = original_name(hf_name)
        variables[name] = np.ascontiguousarray(value.T if transpose else value)
    variables.update(heads())
    # Training state the loader skips.
    for name in list(variables)[:3]:
        variables[name + "/adam_m"] = np.zeros_like(variables[name])
        variables[name + "/adam_v"] = np.zeros_like(variables[name])
    variables["global_step"] = np.array(1000, "int64")
    return variables


@pytest.fixture(scope="module")
def original_directory(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("checkpoints") / "uncased_L-6_H-384_A-12")
    write_original(directory, minilm_variables())
    hf_config = json.load(open(os.path.join(MINILM_DIRECTORY, "config.json")))
    keys = (
        "vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "hidden_act",
        "hidden_dropout_prob",
        "attention_probs_dropout_prob",
        "max_position_embeddings",
        "type_vocab_size",
        "initializer_range",
    )
    with open(os.path.join(directory, "bert_config.json"), "w") as file:
        json.dump({key: hf_config[key] for key in keys}, file)
    shutil.copyfile(
        os.path.join(MINILM_DIRECTORY, "vocab.txt"), os.path.join(directory, "vocab.txt")
    )
    return directory


@pytest.fixture(scope="module")
def tanh_reference():
    # The original code computes the tanh form for "gelu": compare with that.
    inputs = minilm_inputs()
    model = transformers.BertModel.from_pretrained(
        MINILM_DIRECTORY, dtype=torch.float32, hidden_act="gelu_new"
    )
    return inputs, torch_outputs(model, inputs)


def test_loads_and_matches_transformers(original_directory, tanh_reference):
    backbone = BertBackbone.from_preset(original_directory)
    assert backbone.activation == "gelu_approximate" and backbone.layer_norm_epsilon == 1e-12
    inputs, expected = tanh_reference
    differences = max_difference(backbone, inputs, expected)
    print("original format, max |difference| vs transformers (gelu_new):", differences)
    assert_close(differences)


def test_heads_vocabulary_and_casing(original_directory):
    checkpoint = read_checkpoint(original_directory)
    assert checkpoint.format == "original"
    expected = heads()
    masked_lm, next_sentence = (
        checkpoint.head_weights["masked_lm"],
        checkpoint.head_weights["next_sentence"],
    )
    np.testing.assert_array_equal(
        masked_lm["transform_dense/kernel"], expected["cls/predictions/transform/dense/kernel"]
    )
    np.testing.assert_array_equal(
        masked_lm["transform_layer_norm/beta"], expected["cls/predictions/transform/LayerNorm/beta"]
    )
    np.testing.assert_array_equal(masked_lm["output_bias"], expected["cls/predictions/output_bias"])
    np.testing.assert_array_equal(
        next_sentence["kernel"], expected["cls/seq_relationship/output_weights"].T
    )
    np.testing.assert_array_equal(
        next_sentence["bias"], expected["cls/seq_relationship/output_bias"]
    )
    assert checkpoint.vocabulary_file == os.path.join(original_directory, "vocab.txt")
    assert checkpoint.tokenizer_settings["lowercase"] is True
    assert checkpoint.tokenizer_settings["max_input_chars_per_word"] == 200


def _tiny_variables():
    random = np.random.default_rng(1)
    variables = {
        "bert/embeddings/word_embeddings": random.normal(size=(20, 4)),
        "bert/embeddings/token_type_embeddings": random.normal(size=(2, 4)),
        "bert/embeddings/position_embeddings": random.normal(size=(8, 4)),
        "bert/embeddings/LayerNorm/gamma": np.ones(4),
        "bert/embeddings/LayerNorm/beta": np.zeros(4),
        "bert/pooler/dense/kernel": random.normal(size=(4, 4)),
        "bert/pooler/dense/bias": np.zeros(4),
    }
    layer = "bert/encoder/layer_0/"
    for name, shape in (
        ("attention/self/query", (4, 4)),
        ("attention/self/key", (4, 4)),
        ("attention/self/value", (4, 4)),
        ("attention/output/dense", (4, 4)),
        ("intermediate/dense", (4, 8)),
        ("output/dense", (8, 4)),
    ):
        variables[layer + name + "/kernel"] = random.normal(size=shape)
        variables[layer + name + "/bias"] = random.normal(size=shape[-1:])
    for name in ("attention/output/LayerNorm", "output/LayerNorm"):
        variables[layer + name + "/gamma"], variables[layer + name + "/beta"] = (
            np.ones(4),
            np.zeros(4),
        )
    return {name: value.astype("float32") for name, value in variables.items()}


def _write_tiny(directory, variables, **config):
    write_original(directory, variables)
    config = {
        "vocab_size": 20,
        "hidden_size": 4,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 8,
        "max_position_embeddings": 8,
        "type_vocab_size": 2,
        "hidden_act": "gelu",
        **config,
    }
    with open(os.path.join(directory, "bert_config.json"), "w") as file:
        json.dump(config, file)


def test_tiny_query_key_value_are_concatenated(tmp_path):
    variables = _tiny_variables()
    _write_tiny(str(tmp_path), variables)
    backbone = BertBackbone.from_preset(tmp_path)
    kernel = backbone.get_layer("transformer_layer_0").self_attention.weights[0]
    assert kernel.path == "transformer_layer_0/self_attention/query_key_value/kernel"
    layer = "bert/encoder/layer_0/attention/self/"
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(kernel),
        np.concatenate([variables[layer + n + "/kernel"] for n in ("query", "key", "value")], -1),
    )
    assert backbone.num_segments == 2 and backbone.max_sequence_length == 8


def test_missing_and_unexpected_variables_are_named(tmp_path):
    variables = _tiny_variables()
    del variables["bert/encoder/layer_0/output/dense/bias"]
    variables["bert/encoder/layer_0/output/dense/extra"] = np.zeros(3, "float32")
    _write_tiny(str(tmp_path), variables)
    with pytest.raises(ValueError) as error:
        read_checkpoint(tmp_path)
    assert "missing 1 tensors: ['bert/encoder/layer_0/output/dense/bias']" in str(error.value)
    assert "1 unexpected tensors: ['bert/encoder/layer_0/output/dense/extra [3]']" in str(
        error.value
    )


def test_wrong_shape_is_named(tmp_path):
    variables = _tiny_variables()
    variables["bert/encoder/layer_0/output/dense/kernel"] = np.zeros((9, 4), "float32")
    _write_tiny(str(tmp_path), variables)
    with pytest.raises(
        ValueError,
        match=r"output_dense/kernel \(from \['bert/encoder/layer_0/"
        r"output/dense/kernel'\]\): expected \[8, 4\], found \[9, 4\]",
    ):
        BertBackbone.from_preset(tmp_path)


def test_a_size_the_weights_contradict_names_its_config_key(tmp_path):
    _write_tiny(str(tmp_path), _tiny_variables(), intermediate_size=12)
    with pytest.raises(ValueError) as error:
        BertBackbone.from_preset(tmp_path)
    assert str(error.value) == (
        f"{tmp_path / 'bert_config.json'}: intermediate_size is 12, but the weights say 8 "
        "(in bert/encoder/layer_0/intermediate/dense/kernel)."
    )


def test_unknown_activation_is_refused(tmp_path):
    _write_tiny(str(tmp_path), _tiny_variables(), hidden_act="gelu_new")
    with pytest.raises(ValueError, match="Unsupported hidden_act 'gelu_new'.*modeling.py defines"):
        BertBackbone.from_preset(tmp_path)


def test_classifier_and_squad_heads(tmp_path):
    variables = _tiny_variables()
    variables["output_weights"] = np.ones((3, 4), "float32")
    variables["output_bias"] = np.zeros(3, "float32")
    variables["cls/squad/output_weights"] = np.ones((2, 4), "float32")
    variables["cls/squad/output_bias"] = np.zeros(2, "float32")
    _write_tiny(str(tmp_path), variables)
    head_weights = read_checkpoint(tmp_path).head_weights
    assert head_weights["classifier"]["kernel"].shape == (4, 3)
    assert head_weights["question_answering"]["kernel"].shape == (4, 2)


def test_pretraining_checkpoint_converts_to_transformers(tmp_path):
    from bert_keras.checkpoints import write_checkpoint

    variables = _tiny_variables()
    random = np.random.default_rng(2)
    head_variables = {
        "cls/predictions/transform/dense/kernel": random.normal(size=(4, 4)),
        "cls/predictions/transform/dense/bias": random.normal(size=4),
        "cls/predictions/transform/LayerNorm/gamma": random.normal(size=4),
        "cls/predictions/transform/LayerNorm/beta": random.normal(size=4),
        "cls/predictions/output_bias": random.normal(size=20),
        "cls/seq_relationship/output_weights": random.normal(size=(2, 4)),
        "cls/seq_relationship/output_bias": random.normal(size=2),
    }
    variables.update({name: value.astype("float32") for name, value in head_variables.items()})
    _write_tiny(str(tmp_path / "original"), variables)
    write_checkpoint(read_checkpoint(tmp_path / "original"), tmp_path / "converted")
    model, info = transformers.BertForPreTraining.from_pretrained(
        tmp_path / "converted", output_loading_info=True
    )
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert model.config.hidden_act == "gelu_new"
    state = {name: value.numpy() for name, value in model.state_dict().items()}
    np.testing.assert_array_equal(
        state["cls.seq_relationship.weight"], variables["cls/seq_relationship/output_weights"]
    )
    np.testing.assert_array_equal(
        state["cls.predictions.transform.dense.weight"],
        variables["cls/predictions/transform/dense/kernel"].T,
    )
    np.testing.assert_array_equal(
        state["cls.predictions.bias"], variables["cls/predictions/output_bias"]
    )
    np.testing.assert_array_equal(
        state["cls.predictions.decoder.weight"], variables["bert/embeddings/word_embeddings"]
    )
    np.testing.assert_array_equal(
        state["bert.encoder.layer.0.attention.self.value.weight"],
        variables["bert/encoder/layer_0/attention/self/value/kernel"].T,
    )


def test_pretraining_checkpoint_round_trips_through_the_original_format(tmp_path):
    from bert_keras.checkpoints import write_checkpoint

    variables = _tiny_variables()
    random = np.random.default_rng(3)
    variables.update(
        {
            "cls/predictions/transform/dense/kernel": random.normal(size=(4, 4)).astype("float32"),
            "cls/predictions/transform/dense/bias": random.normal(size=4).astype("float32"),
            "cls/predictions/transform/LayerNorm/gamma": random.normal(size=4).astype("float32"),
            "cls/predictions/transform/LayerNorm/beta": random.normal(size=4).astype("float32"),
            "cls/predictions/output_bias": random.normal(size=20).astype("float32"),
            "cls/seq_relationship/output_weights": random.normal(size=(2, 4)).astype("float32"),
            "cls/seq_relationship/output_bias": random.normal(size=2).astype("float32"),
        }
    )
    _write_tiny(str(tmp_path / "source"), variables)
    (tmp_path / "source" / "vocab.txt").write_text("[PAD]\nhello\n")
    write_checkpoint(read_checkpoint(tmp_path / "source"), tmp_path / "ours")
    write_checkpoint(read_checkpoint(tmp_path / "ours"), tmp_path / "back", format="original")
    written = tf.train.load_checkpoint(str(tmp_path / "back" / "bert_model.ckpt"))
    assert set(written.get_variable_to_shape_map()) == set(variables)
    for name, value in variables.items():
        np.testing.assert_array_equal(written.get_tensor(name), value, err_msg=name)
    # Half-precision weights (a float16 Hugging Face checkpoint) are written as the release's.
    halved = read_checkpoint(tmp_path / "ours")
    halved.backbone_weights = {k: v.astype("float16") for k, v in halved.backbone_weights.items()}
    write_checkpoint(halved, tmp_path / "halved", format="original")
    written = tf.train.load_checkpoint(str(tmp_path / "halved" / "bert_model.ckpt"))
    assert set(written.get_variable_to_dtype_map().values()) == {tf.float32}
    source_config = json.loads((tmp_path / "source" / "bert_config.json").read_text())
    written_config = json.loads((tmp_path / "back" / "bert_config.json").read_text())
    assert {key: written_config[key] for key in source_config} == source_config
    assert (tmp_path / "back" / "vocab.txt").read_text() == "[PAD]\nhello\n"


def test_the_original_format_refuses_what_modeling_py_cannot_compute(tmp_path):
    from bert_keras.checkpoints import write_checkpoint

    erf = BertBackbone(
        vocabulary_size=20,
        num_layers=1,
        num_heads=2,
        hidden_dim=4,
        intermediate_dim=8,
        activation="gelu",
    )
    erf.save_to_preset(tmp_path / "erf")
    with pytest.raises(ValueError, match="cannot compute activation 'gelu'"):
        write_checkpoint(read_checkpoint(tmp_path / "erf"), tmp_path / "out", format="original")
    assert not os.path.exists(tmp_path / "out")
    epsilon = BertBackbone(
        vocabulary_size=20,
        num_layers=1,
        num_heads=2,
        hidden_dim=4,
        intermediate_dim=8,
        layer_norm_epsilon=1e-5,
    )
    epsilon.save_to_preset(tmp_path / "epsilon")
    with pytest.raises(ValueError, match="hard-codes layer_norm_epsilon 1e-12"):
        write_checkpoint(read_checkpoint(tmp_path / "epsilon"), tmp_path / "out", format="original")
    assert not os.path.exists(tmp_path / "out")


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda data, index: data.unlink(), "data-00000-of-00001; No such file or directory"),
        (lambda data, index: os.truncate(data, 300), "Read less bytes than requested"),
        (lambda data, index: os.truncate(index, 100), "not an sstable"),
    ],
    ids=["data file missing", "data file cut", "index cut"],
)
def test_a_checkpoint_with_a_missing_or_cut_file_is_named(tmp_path, damage, reason):
    _write_tiny(str(tmp_path), _tiny_variables())
    prefix = tmp_path / "bert_model.ckpt"
    damage(tmp_path / "bert_model.ckpt.data-00000-of-00001", tmp_path / "bert_model.ckpt.index")
    with pytest.raises(ValueError) as error:
        BertBackbone.from_preset(tmp_path)
    message = str(error.value)
    assert re.match(f"Cannot read (variable .* of )?the TF checkpoint {prefix}: ", message)
    assert (
        reason in message and "Its files: " in message and "fetch the checkpoint again" in message
    )
    assert "bert_model.ckpt.index (" in message
