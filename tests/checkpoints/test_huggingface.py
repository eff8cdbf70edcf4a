import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
import transformers
from safetensors.numpy import load_file
from safetensors.numpy import save_file

from bert_keras.checkpoints import huggingface
from bert_keras.checkpoints import read_checkpoint
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_token_classifier import BertTokenClassifier
from tests.checkpoints import MINILM_DIRECTORY
from tests.checkpoints import TOLERANCE
from tests.checkpoints import assert_close
from tests.checkpoints import max_difference
from tests.checkpoints import minilm_reference  # noqa: F401 (fixture)
from tests.checkpoints import save_tiny
from tests.checkpoints import tiny_config
from tests.checkpoints import tiny_inputs
from tests.checkpoints import torch_outputs

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def minilm():
    return BertBackbone.from_preset(MINILM_DIRECTORY)


def test_minilm_matches_transformers(minilm, minilm_reference):  # noqa: F811
    inputs, expected = minilm_reference
    assert minilm.activation == "gelu" and minilm.num_layers == 6
    assert inputs["padding_mask"].min() == 0 and inputs["segment_ids"].max() == 1
    differences = max_difference(minilm, inputs, expected)
    print("MiniLM max |difference| vs transformers:", differences)
    assert_close(differences)


def test_round_trip_is_bit_identical(minilm, tmp_path):
    minilm.save_to_preset(tmp_path / "saved")
    source = load_file(os.path.join(MINILM_DIRECTORY, "model.safetensors"))
    saved = load_file(tmp_path / "saved" / "model.safetensors")
    assert set(saved) == set(source) - {"embeddings.position_ids"}
    for name, value in saved.items():
        assert value.dtype == source[name].dtype and np.array_equal(value, source[name]), name
    source_config, saved_config = (
        json.loads(open(os.path.join(path, "config.json")).read())
        for path in (MINILM_DIRECTORY, tmp_path / "saved")
    )
    for key in [row[0] for row in huggingface.CONFIG_TABLE] + [
        "hidden_act",
        "attention_probs_dropout_prob",
        "architectures",
        "model_type",
        "position_embedding_type",
    ]:
        assert saved_config[key] == source_config[key], key


def test_saved_directory_loads_in_transformers_with_the_same_outputs(tmp_path):
    backbone = BertBackbone(
        vocabulary_size=40,
        num_layers=2,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=16,
        activation="gelu_approximate",
        attention_dropout=0.2,
    )
    backbone.save_to_preset(tmp_path / "saved")
    model = transformers.BertModel.from_pretrained(tmp_path / "saved")
    assert model.config.hidden_act == "gelu_new"
    assert model.config.attention_probs_dropout_prob == 0.2
    differences = max_difference(backbone, tiny_inputs(), torch_outputs(model, tiny_inputs()))
    assert_close(differences)


def _state(model):
    return {name: value.numpy() for name, value in model.state_dict().items()}


def test_pretraining_heads_and_backbone(tmp_path):
    model = save_tiny("BertForPreTraining", tmp_path)
    state = _state(model)
    checkpoint = read_checkpoint(tmp_path)
    assert sorted(checkpoint.head_weights) == ["masked_lm", "next_sentence"]
    masked_lm, next_sentence = (
        checkpoint.head_weights["masked_lm"],
        checkpoint.head_weights["next_sentence"],
    )
    np.testing.assert_array_equal(
        masked_lm["transform_dense/kernel"], state["cls.predictions.transform.dense.weight"].T
    )
    np.testing.assert_array_equal(
        masked_lm["transform_layer_norm/gamma"], state["cls.predictions.transform.LayerNorm.weight"]
    )
    np.testing.assert_array_equal(masked_lm["output_bias"], state["cls.predictions.bias"])
    assert next_sentence["kernel"].shape == (8, 2) and next_sentence["bias"].shape == (2,)
    np.testing.assert_array_equal(next_sentence["kernel"], state["cls.seq_relationship.weight"].T)
    backbone = BertBackbone.from_preset(tmp_path)
    differences = max_difference(backbone, tiny_inputs(), torch_outputs(model.bert, tiny_inputs()))
    assert_close(differences)


@pytest.mark.parametrize(
    "model_class, head, has_pooler",
    [
        ("BertForSequenceClassification", "classifier", True),
        ("BertForTokenClassification", "token_classifier", False),
        ("BertForQuestionAnswering", "question_answering", False),
        ("BertForMaskedLM", "masked_lm", False),
    ],
)
def test_headed_variants(tmp_path, model_class, head, has_pooler):
    num_labels = 2 if head == "question_answering" else 3
    model = save_tiny(model_class, tmp_path, num_labels=num_labels)
    state = _state(model)
    checkpoint = read_checkpoint(tmp_path)
    assert list(checkpoint.head_weights) == [head]
    weights = checkpoint.head_weights[head]
    if head != "masked_lm":
        prefix = "qa_outputs" if head == "question_answering" else "classifier"
        assert weights["kernel"].shape == (8, num_labels) and weights["bias"].shape == (num_labels,)
        np.testing.assert_array_equal(weights["kernel"], state[f"{prefix}.weight"].T)
        np.testing.assert_array_equal(weights["bias"], state[f"{prefix}.bias"])
    assert ("pooler_dense/kernel" in checkpoint.backbone_weights) == has_pooler
    backbone = BertBackbone.from_preset(tmp_path)
    expected = torch_outputs(model.bert, tiny_inputs())
    differences = max_difference(backbone, tiny_inputs(), expected)
    assert differences["sequence_output"] <= TOLERANCE, differences


def test_a_checkpoint_without_its_pooler_loads_and_writes_both_ways(tmp_path):
    from bert_keras.checkpoints import write_checkpoint

    torch.manual_seed(0)
    config = tiny_config(hidden_act="gelu_new")  # the original format's GELU
    model = transformers.BertModel(config, add_pooling_layer=False).eval()
    model.save_pretrained(tmp_path / "hf")
    checkpoint = read_checkpoint(tmp_path / "hf")
    assert "pooler_dense/kernel" not in checkpoint.backbone_weights
    backbone = BertBackbone.from_preset(tmp_path / "hf")
    differences = max_difference(backbone, tiny_inputs(), torch_outputs(model, tiny_inputs()))
    assert differences["sequence_output"] <= TOLERANCE, differences
    for output_format in ("original", "bert_keras"):
        write_checkpoint(checkpoint, tmp_path / output_format, format=output_format)
        written = read_checkpoint(tmp_path / output_format).backbone_weights
        assert sorted(written) == sorted(checkpoint.backbone_weights)
        for path, value in checkpoint.backbone_weights.items():
            np.testing.assert_array_equal(written[path], value, err_msg=path)


def test_headed_checkpoint_round_trips_through_our_format(tmp_path):
    from bert_keras.checkpoints import write_checkpoint

    save_tiny("BertForPreTraining", tmp_path / "source")
    write_checkpoint(read_checkpoint(tmp_path / "source"), tmp_path / "saved")
    assert json.loads((tmp_path / "saved" / "config.json").read_text())["architectures"] == [
        "BertForPreTraining"
    ]
    source, saved = (load_file(tmp_path / d / "model.safetensors") for d in ("source", "saved"))
    assert set(saved) == set(source)
    for name in saved:
        np.testing.assert_array_equal(saved[name], source[name], err_msg=name)


def test_sharded_checkpoint(tmp_path):
    model = save_tiny("BertModel", tmp_path / "single")
    model.save_pretrained(tmp_path / "sharded", max_shard_size="2KB")
    assert os.path.exists(tmp_path / "sharded" / "model.safetensors.index.json")
    assert not os.path.exists(tmp_path / "sharded" / "model.safetensors")
    expected = torch_outputs(model, tiny_inputs())
    backbone = BertBackbone.from_preset(tmp_path / "sharded")
    assert_close(max_difference(backbone, tiny_inputs(), expected))
    # Beside a model.safetensors, as transformers, the single file is read, not shards.
    save_tiny("BertModel", tmp_path / "other", seed=1).save_pretrained(
        tmp_path / "other", max_shard_size="2KB"
    )
    for name in os.listdir(tmp_path / "other"):
        if name.startswith("model") and name != "model.safetensors":
            shutil.copy(tmp_path / "other" / name, tmp_path / "single")
    backbone = BertBackbone.from_preset(tmp_path / "single")
    assert_close(max_difference(backbone, tiny_inputs(), expected))


def test_a_sharded_index_without_a_weight_map_is_named(tmp_path):
    save_tiny("BertModel", tmp_path / "single").save_pretrained(
        tmp_path / "sharded", max_shard_size="2KB"
    )
    index = tmp_path / "sharded" / "model.safetensors.index.json"
    for text in ("{}", "[]", '{"weight_map": ["model-00001-of-00002.safetensors"]}'):
        index.write_text(text)
        with pytest.raises(ValueError, match=f"{index} has no weight_map"):
            read_checkpoint(tmp_path / "sharded")


def test_bfloat16_weights_load_as_float32(tmp_path):
    model = save_tiny("BertModel", tmp_path / "float32")
    model.to(torch.bfloat16).save_pretrained(tmp_path / "bfloat16")
    checkpoint = read_checkpoint(tmp_path / "bfloat16")
    expected = model.embeddings.word_embeddings.weight.float().detach().numpy()
    np.testing.assert_array_equal(
        checkpoint.backbone_weights["embeddings/token_embedding/embeddings"], expected
    )


# === Strictness ===


def _edit_tensors(directory, edit):
    path = os.path.join(directory, "model.safetensors")
    tensors = load_file(path)
    edit(tensors)
    save_file(tensors, path)


def test_missing_tensor_is_named(tmp_path):
    save_tiny("BertModel", tmp_path)
    _edit_tensors(tmp_path, lambda t: t.pop("encoder.layer.1.intermediate.dense.weight"))
    with pytest.raises(
        ValueError, match=r"missing 1 tensors: \['encoder.layer.1.intermediate.dense.weight'\]"
    ):
        BertBackbone.from_preset(tmp_path)


def test_unexpected_tensor_is_named_with_its_shape(tmp_path):
    save_tiny("BertModel", tmp_path)
    _edit_tensors(
        tmp_path,
        lambda t: t.update({"encoder.layer.2.output.dense.weight": np.zeros((8, 16), "float32")}),
    )
    with pytest.raises(
        ValueError,
        match=r"1 unexpected tensors: \['encoder.layer.2.output.dense.weight \[8, 16\]'\]",
    ):
        read_checkpoint(tmp_path)


def test_wrong_shape_is_named_with_both_shapes(tmp_path):
    save_tiny("BertModel", tmp_path)
    _edit_tensors(
        tmp_path, lambda t: t.update({"pooler.dense.weight": np.zeros((8, 7), "float32")})
    )
    with pytest.raises(
        ValueError,
        match=r"pooler_dense/kernel \(from \['pooler.dense.weight'\]\): expected \[8, 8\], found \[7, 8\]",
    ):
        BertBackbone.from_preset(tmp_path)


def test_a_weight_of_integers_is_named_with_its_dtype(tmp_path):
    """Cast, it would be all zeros, and promote the query, key and value it is fused with."""
    save_tiny("BertModel", tmp_path)
    name = "encoder.layer.0.attention.self.query.weight"
    _edit_tensors(tmp_path, lambda t: t.update({name: t[name].astype("int32")}))
    with pytest.raises(ValueError, match=rf"{name} holds int32 values, but a weight is floating"):
        read_checkpoint(tmp_path)


def test_wrong_head_shape_is_named(tmp_path):
    save_tiny("BertForPreTraining", tmp_path)
    _edit_tensors(tmp_path, lambda t: t.update({"cls.predictions.bias": np.zeros(39, "float32")}))
    with pytest.raises(
        ValueError,
        match=r"masked_lm/output_bias \(from \['cls.predictions.bias'\]\): expected \[40\]",
    ):
        read_checkpoint(tmp_path)


def test_untied_decoder_is_refused(tmp_path):
    save_tiny("BertForMaskedLM", tmp_path)
    _edit_tensors(
        tmp_path,
        lambda t: t.update({"cls.predictions.decoder.weight": np.ones((40, 8), "float32")}),
    )
    with pytest.raises(
        ValueError,
        match="cls.predictions.decoder.weight differs from bert.embeddings.word_embeddings.weight",
    ):
        read_checkpoint(tmp_path)


def test_pickled_weights_are_refused_with_the_conversion(tmp_path):
    save_tiny("BertModel", tmp_path)
    os.remove(tmp_path / "model.safetensors")
    (tmp_path / "pytorch_model.bin").write_bytes(b"not unpickled")
    with pytest.raises(ValueError, match="pytorch_model.bin, a pickle") as error:
        BertBackbone.from_preset(tmp_path)
    assert "safe_serialization=True" in str(error.value) and "weights_only=True" in str(error.value)


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"hidden_act": "gelu_fast"}, "Unsupported hidden_act 'gelu_fast'"),
        ({"position_embedding_type": "relative_key"}, "position_embedding_type is 'relative_key'"),
        ({"is_decoder": True}, "is_decoder is true"),
        ({"model_type": "roberta"}, "model_type is 'roberta'"),
    ],
)
def test_unsupported_settings_are_refused(tmp_path, setting, message):
    save_tiny("BertModel", tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, **setting}))
    with pytest.raises(ValueError, match=message):
        BertBackbone.from_preset(tmp_path)


@pytest.mark.parametrize(
    "hidden_act, expected",
    [
        ("gelu", "gelu"),
        ("gelu_new", "gelu_approximate"),
        ("gelu_pytorch_tanh", "gelu_approximate"),
        ("relu", "relu"),
    ],
)
def test_activation_names(tmp_path, hidden_act, expected):
    save_tiny("BertModel", tmp_path, hidden_act=hidden_act)
    assert read_checkpoint(tmp_path).backbone_config["activation"] == expected


def test_saved_vocabulary_loads_in_transformers_tokenizer(tmp_path):
    backbone = BertBackbone(
        vocabulary_size=30522, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16
    )
    backbone.save_to_preset(
        tmp_path / "saved", vocabulary_file=os.path.join(MINILM_DIRECTORY, "vocab.txt")
    )
    ours = transformers.AutoTokenizer.from_pretrained(tmp_path / "saved")
    reference = transformers.AutoTokenizer.from_pretrained(MINILM_DIRECTORY)
    text = "Hello World, checkpoints [MASK] unaffable!"
    assert ours(text)["input_ids"] == reference(text)["input_ids"]


def test_unused_heads_are_logged_at_debug_level(tmp_path, caplog):
    import logging

    save_tiny("BertForMaskedLM", tmp_path)
    # absl's logger too: a test run earlier may have set its level.
    with caplog.at_level(logging.DEBUG), caplog.at_level(logging.DEBUG, logger="absl"):
        BertBackbone.from_preset(tmp_path)
    assert "Not loaded by the backbone: masked_lm head" in caplog.text
    assert "has no pooler; pooler_dense keeps its initial weights" in caplog.text


def test_a_missing_pooler_is_warned_of_only_where_the_model_reads_it(tmp_path, caplog):
    import logging

    save_tiny("BertForTokenClassification", tmp_path, num_labels=3)
    with caplog.at_level(logging.INFO, logger="absl"):
        BertTokenClassifier.from_preset(tmp_path)
        BertBackbone.from_preset(tmp_path)
    levels = [record.levelname for record in caplog.records if "no pooler" in record.message]
    assert levels == ["INFO", "WARNING"]


def test_legacy_layer_norm_names(tmp_path):
    model = save_tiny("BertForPreTraining", tmp_path)

    def rename(tensors):
        for name in [n for n in tensors if "LayerNorm" in n]:
            legacy = name.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
                "LayerNorm.bias", "LayerNorm.beta"
            )
            tensors[legacy] = tensors.pop(name)

    _edit_tensors(tmp_path, rename)
    assert "bert.embeddings.LayerNorm.gamma" in load_file(tmp_path / "model.safetensors")
    checkpoint = read_checkpoint(tmp_path)
    np.testing.assert_array_equal(
        checkpoint.head_weights["masked_lm"]["transform_layer_norm/beta"],
        _state(model)["cls.predictions.transform.LayerNorm.bias"],
    )
    backbone = BertBackbone.from_preset(tmp_path)
    assert_close(max_difference(backbone, tiny_inputs(), torch_outputs(model.bert, tiny_inputs())))


@pytest.mark.one_backend  # safetensors writes alike under every backend
def test_weights_that_do_not_fit_on_the_disk_are_an_os_error_naming_the_file(tmp_path):
    script = (
        "import resource, sys, numpy as np\n"
        "from bert_keras.checkpoints import huggingface\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # a nearly full disk\n"
        "try:\n"
        f"    huggingface.write_tensors({str(tmp_path)!r}, {{'w': np.zeros(4096, 'float32')}})\n"
        "except OSError as error:\n"
        "    sys.exit(str(error))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=REPOSITORY
    )
    assert completed.returncode == 1, completed.stderr[-2000:]
    assert completed.stderr.startswith(f"{tmp_path / huggingface.WEIGHTS_FILE} cannot be written")


def test_a_tokenizer_json_of_another_vocabulary_is_left_out_with_a_warning(tmp_path, caplog):
    """A word put in an [unused] slot of vocab.txt, as the original's README suggests."""
    from bert_keras.checkpoints import write_checkpoint

    source = tmp_path / "source"
    source.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(MINILM_DIRECTORY, name), source / name)
    tokens = pathlib.Path(MINILM_DIRECTORY, "vocab.txt").read_text(encoding="utf-8").splitlines()
    (source / "vocab.txt").write_text("\n".join([tokens[0], "keras", *tokens[2:]]) + "\n")

    write_checkpoint(read_checkpoint(source), tmp_path / "edited")
    write_checkpoint(read_checkpoint(MINILM_DIRECTORY), tmp_path / "unedited")

    assert "id 1 is 'keras' and '[unused0]'" in caplog.text
    assert not (tmp_path / "edited" / "tokenizer.json").exists()
    assert (tmp_path / "unedited" / "tokenizer.json").exists()
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "edited")
    assert tokenizer("keras", add_special_tokens=False)["input_ids"] == [1]
