"""keras-hub BERT presets, read and written: every expected value is keras-hub's own output.

keras-hub saves the presets inside the tests (random tiny models, no downloads)
and loads the ones bert_keras writes.
"""

import ast
import os
import pathlib
import shutil
import subprocess
import sys

import h5py
import keras_hub
import numpy as np
import pytest
from keras import ops

import bert_keras.checkpoints
from bert_keras.checkpoints import read_checkpoint
from bert_keras.checkpoints import write_checkpoint
from bert_keras.checkpoints.checkpoint import POOLER_PATHS
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_classifier import BertClassifier
from bert_keras.models.bert_masked_lm import BertMaskedLM
from bert_keras.models.bert_pretrainer import BertPretrainer
from bert_keras.models.bert_task import checkpoint_tokenizer
from bert_keras.models.checkpoint_conversion import convert_checkpoint
from bert_keras.models.checkpoint_weights import model_checkpoint
from bert_keras.text.tokenizer import BertTokenizer
from tests.checkpoints import TOLERANCE
from tests.checkpoints import assert_close
from tests.checkpoints import max_difference
from tests.checkpoints import tiny_inputs

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VOCABULARY = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "the", "a", "cat", "dog", "sat", "on", "mat", "ran", "far", "away", "big", "small",
    "check", "##point", "##s", "map", "weight", "by", "name", "hello", "world",
    "shape", "matter", ".", ",", "!", "?",
]  # fmt: skip
SENTENCES = [
    "The cat sat on the mat.",
    "Hello, WORLD!",
    "Checkpoints map weights by name.",
    "a BIG dog ran far away? zebra",
]
BACKBONE = dict(
    vocabulary_size=len(VOCABULARY),
    num_layers=2,
    num_heads=2,
    hidden_dim=16,
    intermediate_dim=32,
    max_sequence_length=16,
)
NUM_CLASSES = 3


def _randomize(model, seed):
    """Random values in every variable (biases and layer norms too), so a swap shows."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(rng.normal(scale=0.3, size=variable.shape).astype("float32"))


def _numpy(outputs):
    if isinstance(outputs, dict):
        return {name: ops.convert_to_numpy(value) for name, value in outputs.items()}
    return ops.convert_to_numpy(outputs)


def _ids(tokens):
    """Token ids as nested lists, whatever container the tokenizer returns."""
    if hasattr(tokens, "to_list"):
        return tokens.to_list()
    if hasattr(tokens, "numpy"):
        return tokens.numpy().tolist()
    if isinstance(tokens, (list, tuple)):
        return [_ids(item) for item in tokens]
    return np.asarray(tokens).tolist()


def _keras_hub_tokenizer():
    return keras_hub.models.BertTokenizer(vocabulary=VOCABULARY, lowercase=True)


@pytest.fixture(scope="module")
def backbone_preset(tmp_path_factory):
    """(directory, keras-hub's backbone, keras-hub's tokenizer), saved by keras-hub."""
    directory = str(tmp_path_factory.mktemp("keras_hub") / "backbone")
    backbone = keras_hub.models.BertBackbone(**BACKBONE)
    _randomize(backbone, seed=1)
    tokenizer = _keras_hub_tokenizer()
    backbone.save_to_preset(directory)
    tokenizer.save_to_preset(directory)
    return directory, backbone, tokenizer


@pytest.fixture(scope="module")
def classifier_preset(tmp_path_factory):
    """(directory, keras-hub's BertTextClassifier), a task preset saved by keras-hub."""
    directory = str(tmp_path_factory.mktemp("keras_hub") / "classifier")
    backbone = keras_hub.models.BertBackbone(**BACKBONE)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
        tokenizer=_keras_hub_tokenizer(), sequence_length=BACKBONE["max_sequence_length"]
    )
    classifier = keras_hub.models.BertTextClassifier(
        backbone=backbone, num_classes=NUM_CLASSES, preprocessor=preprocessor
    )
    _randomize(classifier, seed=2)
    classifier.save_to_preset(directory)
    return directory, classifier


def _logits_difference(ours, theirs, inputs):
    return float(np.abs(_numpy(ours(inputs)) - _numpy(theirs(inputs))).max())


def test_backbone_preset_gives_keras_hub_outputs(backbone_preset):
    directory, theirs, _ = backbone_preset
    checkpoint = read_checkpoint(directory)
    assert checkpoint.format == "keras_hub" and checkpoint.head_weights == {}
    assert checkpoint.backbone_config["activation"] == "gelu_approximate"
    assert checkpoint.backbone_config["layer_norm_epsilon"] == 1e-12
    ours = BertBackbone.from_preset(directory)
    inputs = tiny_inputs()
    assert inputs["padding_mask"].min() == 0  # the batch has padding
    differences = max_difference(ours, inputs, _numpy(theirs(inputs)))
    print("keras-hub backbone preset, max |difference|:", differences)
    assert_close(differences)


def test_a_masked_lm_on_a_keras_hub_preset_says_its_head_is_not_read(backbone_preset):
    with pytest.raises(ValueError, match=r"of a keras-hub preset, a masked-LM head is not read"):
        BertMaskedLM.from_preset(backbone_preset[0])


def test_tokenizer_gives_keras_hub_ids(backbone_preset):
    directory, _, theirs = backbone_preset
    checkpoint = read_checkpoint(directory)
    assert checkpoint.vocabulary_file.endswith(
        os.path.join("assets", "tokenizer", "vocabulary.txt")
    )
    assert checkpoint.tokenizer_settings["lowercase"] is True
    expected = _ids(theirs(SENTENCES))
    for ours in (checkpoint_tokenizer(checkpoint), BertTokenizer.from_preset(directory)):
        assert _ids(ours(SENTENCES)) == expected
    assert [1] in [ids[-1:] for ids in expected]  # an unknown word, "zebra"


def test_classifier_preset_gives_keras_hub_logits(classifier_preset):
    directory, theirs = classifier_preset
    checkpoint = read_checkpoint(directory)
    assert sorted(checkpoint.head_weights) == ["classifier"]
    np.testing.assert_array_equal(
        checkpoint.head_weights["classifier"]["kernel"],
        _numpy(theirs.get_layer("logits").kernel),
    )
    ours = BertClassifier.from_preset(
        directory, num_classes=checkpoint.num_labels(), preprocessor=None
    )
    difference = _logits_difference(ours, theirs, tiny_inputs())
    print("keras-hub classifier preset, max |logits difference|:", difference)
    assert difference <= TOLERANCE


def test_round_trip_loads_in_keras_hub_with_the_same_outputs(classifier_preset, tmp_path):
    source, _ = classifier_preset
    written = str(tmp_path / "written")
    write_checkpoint(read_checkpoint(source), written, format="keras_hub")
    inputs = tiny_inputs()

    backbone = keras_hub.models.BertBackbone.from_preset(written)
    differences = max_difference(BertBackbone.from_preset(source), inputs, _numpy(backbone(inputs)))
    print("written keras-hub preset, backbone max |difference|:", differences)
    assert_close(differences)

    classifier = keras_hub.models.BertTextClassifier.from_preset(written)
    ours = BertClassifier.from_preset(source, num_classes=NUM_CLASSES, preprocessor=None)
    difference = _logits_difference(ours, classifier, inputs)
    print("written keras-hub preset, classifier max |logits difference|:", difference)
    assert difference <= TOLERANCE

    tokenizer = keras_hub.models.BertTokenizer.from_preset(written)
    assert _ids(tokenizer(SENTENCES)) == _ids(
        checkpoint_tokenizer(read_checkpoint(source))(SENTENCES)
    )

    # Read back, every array is the source's, bit for bit.
    again, first = read_checkpoint(written), read_checkpoint(source)
    assert again.backbone_config == first.backbone_config
    for path, value in first.backbone_weights.items():
        np.testing.assert_array_equal(again.backbone_weights[path], value, err_msg=path)
    np.testing.assert_array_equal(
        again.head_weights["classifier"]["kernel"], first.head_weights["classifier"]["kernel"]
    )


def test_our_backbone_converted_by_the_tool_loads_in_keras_hub(tmp_path):
    ours = BertBackbone(**BACKBONE, dropout=0.0)
    _randomize(ours, seed=3)
    vocabulary = tmp_path / "vocab.txt"
    vocabulary.write_text("\n".join(VOCABULARY) + "\n")
    ours.save_to_preset(str(tmp_path / "ours"), vocabulary_file=str(vocabulary))
    # In a child process: the tool's absl flags would clash with other programs' in this one.
    completed = subprocess.run(
        [sys.executable, "-m", "tools.convert_checkpoint", f"--source={tmp_path / 'ours'}"]
        + [f"--output_dir={tmp_path / 'hub'}", "--output_format=keras_hub"],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    theirs = keras_hub.models.BertBackbone.from_preset(str(tmp_path / "hub"))
    differences = max_difference(ours, tiny_inputs(), _numpy(theirs(tiny_inputs())))
    print("bert_keras -> keras-hub via the tool, max |difference|:", differences)
    assert_close(differences)
    # Our uncased tokenizer strips accents, as the original; keras-hub's is told to.
    tokenizer = keras_hub.models.BertTokenizer.from_preset(str(tmp_path / "hub"))
    assert tokenizer.lowercase and tokenizer.strip_accents


@pytest.mark.parametrize(
    "config, heads, message",
    [
        ({"activation": "gelu"}, (), "activation 'gelu' (the exact erf GELU)"),
        ({"activation": "relu"}, (), "activation 'relu'"),
        ({"layer_norm_epsilon": 1e-6}, (), "layer_norm_epsilon 1e-12; this checkpoint uses 1e-06"),
        ({"attention_dropout": 0.0}, (), "attention_dropout 0.0 and dropout 0.1"),
        ({}, ("no pooler",), "always has a pooler, and this checkpoint has none"),
    ],
)
def test_what_keras_hub_cannot_represent_is_refused(tmp_path, config, heads, message):
    backbone = BertBackbone(**{**BACKBONE, **config})
    checkpoint = model_checkpoint(backbone)
    if "no pooler" in heads:
        for path in POOLER_PATHS:
            del checkpoint.backbone_weights[path]
    with pytest.raises(ValueError) as error:
        write_checkpoint(checkpoint, tmp_path / "out", format="keras_hub")
    assert message in str(error.value)
    assert not os.path.exists(tmp_path / "out")


def test_a_release_with_pretraining_heads_is_written_without_them(tmp_path, caplog):
    backbone = BertBackbone(**BACKBONE)
    checkpoint = model_checkpoint(BertPretrainer(backbone), BertPretrainer.checkpoint_heads())
    assert sorted(checkpoint.head_weights) == ["masked_lm", "next_sentence"]
    write_checkpoint(checkpoint, tmp_path / "hub", format="keras_hub")
    assert "hold no ['masked_lm', 'next_sentence'] head" in caplog.text
    theirs = keras_hub.models.BertBackbone.from_preset(str(tmp_path / "hub"))
    assert_close(max_difference(backbone, tiny_inputs(), _numpy(theirs(tiny_inputs()))))
    # The conversion answers with what it wrote (the tool lists its heads).
    BertPretrainer(backbone).save_to_preset(tmp_path / "release")
    converted = convert_checkpoint(
        tmp_path / "release", tmp_path / "hub2", output_format="keras_hub"
    )
    assert converted.head_weights == {}
    assert read_checkpoint(tmp_path / "hub2").head_weights == {}


def _copy(directory, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(directory, copy)
    return copy


@pytest.mark.parametrize(
    "tensor",
    [
        "layers/transformer_encoder/_self_attention_layer/key_dense/vars/1",
        "layers/transformer_encoder_1/_feedforward_output_dense/vars/0",
        "layers/dense/vars/0",
    ],
)
def test_a_missing_tensor_is_named_with_its_file(classifier_preset, tmp_path, tensor):
    copy = _copy(classifier_preset[0], tmp_path)
    with h5py.File(copy / "model.weights.h5", "a") as weights:
        del weights[tensor]
    with pytest.raises(ValueError, match=f"missing 1 tensors: \\['model.weights.h5/{tensor}'\\]"):
        read_checkpoint(copy)


def test_a_partial_or_corrupt_preset_is_named(classifier_preset, tmp_path):
    copy = _copy(classifier_preset[0], tmp_path)
    with h5py.File(copy / "task.weights.h5", "a") as weights:
        del weights["layers/dense/vars/1"]
    with pytest.raises(
        ValueError, match=r"missing 1 tensors: \['task.weights.h5/layers/dense/vars/1'\]"
    ):
        read_checkpoint(copy)
    os.remove(copy / "task.weights.h5")
    with pytest.raises(ValueError, match=f"{copy / 'task.weights.h5'} is missing"):
        read_checkpoint(copy)
    (copy / "model.weights.h5").write_bytes(b"not an HDF5 file")
    with pytest.raises(ValueError, match=f"{copy / 'model.weights.h5'} is not a readable HDF5"):
        read_checkpoint(copy)
    os.remove(copy / "model.weights.h5")
    with pytest.raises(ValueError, match=f"{copy / 'model.weights.h5'} is missing"):
        BertBackbone.from_preset(str(copy))


def test_checkpoints_package_never_imports_keras_hub():
    package = pathlib.Path(bert_keras.checkpoints.__file__).parent
    imported = set()
    for source in package.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                imported.add(node.module.split(".")[0])
    assert "keras_hub" not in imported
