import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
from absl import flags
from keras import ops
from safetensors.numpy import load_file

from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_classifier import BertClassifier
from tests.checkpoints import save_tiny
from tests.checkpoints.test_original import _tiny_variables
from tests.checkpoints.test_original import _write_tiny
from tools import convert_checkpoint

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_in_process(*arguments):
    """Parses `arguments` as the program's flags and runs main; returns its exit message."""
    flags.FLAGS.unparse_flags()
    argv = flags.FLAGS(["convert_checkpoint", *arguments])
    try:
        convert_checkpoint.main(argv)
    except SystemExit as exit:
        return str(exit.code)
    finally:
        flags.FLAGS.unparse_flags()
    return None


@pytest.mark.large
def test_original_to_ours_from_the_command_line(tmp_path):
    _write_tiny(str(tmp_path / "uncased_tiny"), _tiny_variables())
    (tmp_path / "uncased_tiny" / "vocab.txt").write_text("[PAD]\nhello\n")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tools.convert_checkpoint",
            f"--source={tmp_path / 'uncased_tiny'}",
            f"--output_dir={tmp_path / 'out'}",
        ],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert result.returncode == 0, result.stderr
    assert "from the original checkpoint" in result.stdout
    assert sorted(os.listdir(tmp_path / "out")) == [
        "bert_keras.json",
        "config.json",
        "model.safetensors",
        "tokenizer_config.json",
        "vocab.txt",
    ]
    tensors = load_file(tmp_path / "out" / "model.safetensors")
    np.testing.assert_array_equal(
        tensors["encoder.layer.0.attention.self.key.weight"],
        _tiny_variables()["bert/encoder/layer_0/attention/self/key/kernel"].T,
    )
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["hidden_act"] == "gelu_new" and config["layer_norm_eps"] == 1e-12
    assert (
        json.loads((tmp_path / "out" / "tokenizer_config.json").read_text())["do_lower_case"]
        is True
    )
    assert BertBackbone.from_preset(tmp_path / "out").activation == "gelu_approximate"


def test_huggingface_with_heads_to_ours(tmp_path):
    save_tiny("BertForPreTraining", tmp_path / "source")
    assert (
        run_in_process(f"--source={tmp_path / 'source'}", f"--output_dir={tmp_path / 'out'}")
        is None
    )
    source, converted = (load_file(tmp_path / d / "model.safetensors") for d in ("source", "out"))
    assert set(converted) == set(source)
    for name, value in converted.items():
        np.testing.assert_array_equal(value, source[name], err_msg=name)


def test_dropped_heads_leave_the_backbone_alone(tmp_path):
    save_tiny("BertForPreTraining", tmp_path / "source")
    message = run_in_process(
        f"--source={tmp_path / 'source'}",
        f"--output_dir={tmp_path / 'out'}",
        "--drop_heads=masked_lm,next_sentence",
    )
    assert message is None
    source, converted = (load_file(tmp_path / d / "model.safetensors") for d in ("source", "out"))
    # BertModel's names lack BertForPreTraining's "bert." prefix.
    backbone = {
        name[len("bert.") :]: value for name, value in source.items() if name[:5] == "bert."
    }
    assert set(source) - {"bert." + name for name in backbone} == {
        name for name in source if name.startswith("cls.")
    }
    assert set(converted) == set(backbone)
    for name, value in converted.items():
        np.testing.assert_array_equal(value, backbone[name], err_msg=name)
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["architectures"] == ["BertModel"]


def test_a_dropped_classifier_takes_its_label_names_along(tmp_path):
    labels = {
        "id2label": {0: "negative", 1: "positive"},
        "label2id": {"negative": 0, "positive": 1},
    }
    save_tiny("BertForSequenceClassification", tmp_path / "source", **labels)
    message = run_in_process(
        f"--source={tmp_path / 'source'}",
        f"--output_dir={tmp_path / 'out'}",
        "--drop_heads=classifier",
    )
    assert message is None
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["architectures"] == ["BertModel"]
    assert "positive" not in json.dumps(config)


def test_a_head_that_does_not_exist_is_refused_naming_the_flag():
    with pytest.raises(flags.IllegalFlagValueError, match="drop_heads.*the heads are masked_lm"):
        run_in_process("--source=a", "--output_dir=b", "--drop_heads=masked_lm,pooler")


def test_ours_to_the_original_format_gives_the_same_outputs(tmp_path):
    backbone = BertBackbone(
        vocabulary_size=20,
        num_layers=2,
        num_heads=2,
        hidden_dim=4,
        intermediate_dim=8,
        max_sequence_length=16,
        dropout=0.0,
    )
    backbone.save_to_preset(tmp_path / "ours")
    assert (
        run_in_process(
            f"--source={tmp_path / 'ours'}",
            f"--output_dir={tmp_path / 'uncased_tiny'}",
            "--output_format=original",
        )
        is None
    )
    assert sorted(os.listdir(tmp_path / "uncased_tiny")) == [
        "bert_config.json",
        "bert_keras.json",  # the tokenizer settings alone
        "bert_model.ckpt.data-00000-of-00001",
        "bert_model.ckpt.index",
    ]
    restored = BertBackbone.from_preset(tmp_path / "uncased_tiny")
    inputs = {
        "token_ids": np.array([[2, 5, 7, 3, 0]]),
        "segment_ids": np.array([[0, 0, 0, 1, 0]]),
        "padding_mask": np.array([[1, 1, 1, 1, 0]]),
    }
    for name, value in backbone(inputs).items():
        np.testing.assert_array_equal(
            ops.convert_to_numpy(restored(inputs)[name]), ops.convert_to_numpy(value), err_msg=name
        )


def test_missing_source_is_named(tmp_path):
    message = run_in_process(f"--source={tmp_path / 'absent'}", f"--output_dir={tmp_path / 'out'}")
    assert f"Checkpoint path {tmp_path / 'absent'} does not exist" in message
    assert not os.path.exists(tmp_path / "out")


def test_unrecognised_source_lists_what_was_looked_for(tmp_path):
    (tmp_path / "source").mkdir()
    message = run_in_process(f"--source={tmp_path / 'source'}", f"--output_dir={tmp_path / 'out'}")
    assert f"No checkpoint recognised in {tmp_path / 'source'}. Looked for:" in message
    assert "bert_config.json" in message and "model.safetensors" in message


def test_non_empty_output_is_refused_unless_overwrite(tmp_path):
    save_tiny("BertModel", tmp_path / "source")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    arguments = (f"--source={tmp_path / 'source'}", f"--output_dir={tmp_path / 'out'}")
    message = run_in_process(*arguments)
    assert message == (
        f"convert_checkpoint: --output_dir: {tmp_path / 'out'} exists and is not empty; "
        "choose another, or pass --overwrite to replace it."
    )
    assert os.listdir(tmp_path / "out") == ["keep.txt"]
    assert run_in_process(*arguments, "--overwrite") is None
    assert "keep.txt" not in os.listdir(tmp_path / "out")
    # A directory that holds the source is not replaced: that would delete it.
    holding = (f"--source={tmp_path / 'source'}", f"--output_dir={tmp_path}", "--overwrite")
    assert "which --overwrite would delete" in run_in_process(*holding)
    assert "config.json" in os.listdir(tmp_path / "source")
    in_place = (f"--source={tmp_path / 'out'}", f"--output_dir={tmp_path / 'out'}", "--overwrite")
    assert run_in_process(*in_place) is None


def test_wrong_format_flag_is_refused(tmp_path):
    save_tiny("BertModel", tmp_path / "source")
    message = run_in_process(
        f"--source={tmp_path / 'source'}", f"--output_dir={tmp_path / 'out'}", "--format=original"
    )
    assert "holds a 'huggingface' checkpoint, not 'original'" in message


def test_pickled_source_gets_the_conversion_hint(tmp_path):
    (tmp_path / "source").mkdir()
    (tmp_path / "source" / "config.json").write_text("{}")
    (tmp_path / "source" / "pytorch_model.bin").write_bytes(b"never unpickled")
    message = run_in_process(f"--source={tmp_path / 'source'}", f"--output_dir={tmp_path / 'out'}")
    assert "pytorch_model.bin, a pickle" in message and "save_pretrained" in message


def test_required_flags(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "tools.convert_checkpoint", f"--output_dir={tmp_path}/x"],
        capture_output=True,
        text=True,
    )
    assert completed.returncode != 0
    assert "--source must have a value other than None" in completed.stderr


def test_an_output_dir_that_cannot_be_made_is_named_with_the_flag(tmp_path):
    save_tiny("BertModel", tmp_path / "source")
    (tmp_path / "a_file").write_text("mine")
    source = f"--source={tmp_path / 'source'}"
    message = run_in_process(source, f"--output_dir={tmp_path / 'a_file' / 'out'}")
    assert message == (
        f"convert_checkpoint: --output_dir: {tmp_path / 'a_file'} is a file, so "
        f"{tmp_path / 'a_file' / 'out'} cannot be made."
    )
    message = run_in_process(source, f"--output_dir={tmp_path / 'a_file'}")
    assert message == (
        f"convert_checkpoint: --output_dir: {tmp_path / 'a_file'} is a file; name a directory "
        "to write."
    )
    assert (tmp_path / "a_file").read_text() == "mine"


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_an_output_dir_where_nothing_can_be_written_is_named_with_the_flag(tmp_path):
    save_tiny("BertModel", tmp_path / "source")
    message = run_in_process(f"--source={tmp_path / 'source'}", "--output_dir=/proc/out")
    assert message == (
        "convert_checkpoint: --output_dir: /proc/out cannot be written: No such file or "
        "directory, making a staging directory in /proc."
    )


@pytest.mark.parametrize(
    "build",
    [
        lambda: BertBackbone(9, 1, 2, 8, 16),
        lambda: BertClassifier(BertBackbone(9, 1, 2, 8, 16), num_classes=2),
    ],
    ids=["backbone", "task_model"],
)
def test_a_quantized_keras_source_is_refused_as_save_to_preset_refuses_it(build, tmp_path):
    model = build()
    model.quantize("int8")
    model.save(tmp_path / "model.keras")
    with pytest.raises(ValueError) as refusal:
        model.save_to_preset(tmp_path / "preset")
    message = run_in_process(
        f"--source={tmp_path / 'model.keras'}", f"--output_dir={tmp_path / 'out'}"
    )
    assert message == (
        f"convert_checkpoint: Cannot convert {tmp_path / 'model.keras'}: {refusal.value}"
    )
    assert "a checkpoint holds float weights" in message
    assert not os.path.exists(tmp_path / "out")


def test_a_source_without_a_vocabulary_or_with_an_empty_one_is_warned_of(tmp_path, caplog):
    save_tiny("BertModel", tmp_path / "source")
    arguments = (f"--source={tmp_path / 'source'}", f"--output_dir={tmp_path / 'out'}")
    with caplog.at_level("WARNING"):
        assert run_in_process(*arguments) is None
    assert f"{tmp_path / 'source'} has no vocabulary (vocab.txt or tokenizer.json)" in caplog.text
    caplog.clear()
    (tmp_path / "source" / "vocab.txt").write_text("")
    with caplog.at_level("WARNING"):
        assert run_in_process(*arguments, "--overwrite") is None
    assert f"{tmp_path / 'source' / 'vocab.txt'} holds no tokens" in caplog.text


@pytest.mark.one_backend  # reading a .keras file's class is alike on every backend
def test_a_keras_file_of_another_model_is_named(tmp_path):
    inputs = keras.Input((4,))
    keras.Model(inputs, keras.layers.Dense(2)(inputs)).save(tmp_path / "other.keras")
    message = run_in_process(
        f"--source={tmp_path / 'other.keras'}", f"--output_dir={tmp_path / 'out'}"
    )
    assert message == (
        f"convert_checkpoint: {tmp_path / 'other.keras'} holds a Functional, neither a "
        "BertBackbone nor a bert_keras task model (BertClassifier, ...)."
    )
    assert not os.path.exists(tmp_path / "out")
