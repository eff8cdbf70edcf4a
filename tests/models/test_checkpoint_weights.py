"""The one path between a Checkpoint and a model: strict backbone, named heads, round trips."""

import keras
import numpy as np
import pytest
from keras import ops

from bert_keras.checkpoints import read_checkpoint
from bert_keras.checkpoints import write_checkpoint
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_classifier import BertClassifier
from bert_keras.models.bert_pretrainer import BertPretrainer
from bert_keras.models.checkpoint_weights import apply_checkpoint
from bert_keras.models.checkpoint_weights import model_checkpoint

CONFIG = dict(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
PRETRAINING_HEADS = {"masked_lm": "masked_lm_head", "next_sentence": "next_sentence_head"}


def _numpy_weights(model):
    return {variable.path: ops.convert_to_numpy(variable) for variable in model.weights}


def test_a_task_model_round_trips_with_its_head_through_a_directory(tmp_path):
    classifier = BertClassifier(BertBackbone(**CONFIG), num_classes=3)
    checkpoint = model_checkpoint(
        classifier, heads={"classifier": "logits"}, label_names=list("xyz")
    )
    write_checkpoint(checkpoint, tmp_path / "export")
    restored = BertClassifier(BertBackbone(**CONFIG), num_classes=3)
    loaded = apply_checkpoint(
        restored, read_checkpoint(tmp_path / "export"), heads={"classifier": "logits"}
    )
    assert loaded == ["classifier"]
    expected, actual = _numpy_weights(classifier), _numpy_weights(restored)
    assert expected.keys() == actual.keys()
    for path, value in expected.items():
        np.testing.assert_array_equal(actual[path], value, err_msg=path)


def test_weights_move_between_models_built_in_and_out_of_a_name_scope():
    with keras.name_scope("experiment"):
        scoped = BertClassifier(BertBackbone(**CONFIG), num_classes=3)
    assert scoped.backbone.weights[0].path.startswith("experiment/")
    heads = {"classifier": "logits"}
    checkpoint = model_checkpoint(scoped, heads=heads)
    assert "pooler_dense/kernel" in checkpoint.backbone_weights
    assert set(checkpoint.head_weights["classifier"]) == {"kernel", "bias"}
    plain = BertClassifier(BertBackbone(**CONFIG), num_classes=3)
    assert apply_checkpoint(plain, checkpoint, heads=heads) == ["classifier"]
    with keras.name_scope("other"):
        rescoped = BertClassifier(BertBackbone(**CONFIG), num_classes=3)
    apply_checkpoint(rescoped, model_checkpoint(plain, heads=heads), heads=heads)
    for source, target in zip(scoped.weights, rescoped.weights):
        np.testing.assert_array_equal(
            ops.convert_to_numpy(target), ops.convert_to_numpy(source), err_msg=source.path
        )


def test_a_head_that_does_not_fit_is_named_or_skipped_when_asked(tmp_path):
    source = BertClassifier(BertBackbone(**CONFIG), num_classes=3)
    checkpoint = model_checkpoint(source, heads={"classifier": "logits"})
    target = BertClassifier(BertBackbone(**CONFIG), num_classes=2)
    fresh_backbone = _numpy_weights(target.backbone)
    with pytest.raises(
        ValueError, match=r"classifier head .* kernel: expected \[8, 2\], found \[8, 3\]"
    ):
        apply_checkpoint(target, checkpoint, heads={"classifier": "logits"})
    # Nothing was assigned, the backbone included.
    for path, value in _numpy_weights(target.backbone).items():
        np.testing.assert_array_equal(value, fresh_backbone[path], err_msg=path)
    fresh = ops.convert_to_numpy(target.get_layer("logits").kernel)
    loaded = apply_checkpoint(
        target, checkpoint, heads={"classifier": "logits"}, skip_mismatched_heads=True
    )
    assert loaded == []
    np.testing.assert_array_equal(ops.convert_to_numpy(target.get_layer("logits").kernel), fresh)
    # The backbone was loaded all the same.
    np.testing.assert_array_equal(
        _numpy_weights(target.backbone)["pooler_dense/kernel"],
        checkpoint.backbone_weights["pooler_dense/kernel"],
    )


def test_missing_and_unexpected_head_tensors_are_named():
    pretrainer = BertPretrainer(BertBackbone(**CONFIG))
    checkpoint = model_checkpoint(pretrainer, heads=PRETRAINING_HEADS)
    masked_lm = checkpoint.head_weights["masked_lm"]
    masked_lm["extra/kernel"] = masked_lm.pop("output_bias")
    with pytest.raises(ValueError, match=r"missing output_bias; unexpected extra/kernel"):
        apply_checkpoint(
            BertPretrainer(BertBackbone(**CONFIG)), checkpoint, heads=PRETRAINING_HEADS
        )


def test_a_head_the_checkpoint_lacks_keeps_its_initial_weights():
    backbone_only = model_checkpoint(BertBackbone(**CONFIG))
    pretrainer = BertPretrainer(BertBackbone(**CONFIG))
    before = _numpy_weights(pretrainer.get_layer("next_sentence_head"))
    assert apply_checkpoint(pretrainer, backbone_only, heads=PRETRAINING_HEADS) == []
    after = _numpy_weights(pretrainer.get_layer("next_sentence_head"))
    for path, value in before.items():
        np.testing.assert_array_equal(after[path], value)


def test_the_backbone_is_strict_and_names_every_misfit():
    checkpoint = model_checkpoint(BertBackbone(**CONFIG))
    checkpoint.backbone_weights["unknown/kernel"] = np.zeros(3)
    del checkpoint.backbone_weights["embeddings/token_embedding/embeddings"]
    with pytest.raises(ValueError) as error:
        apply_checkpoint(BertBackbone(**{**CONFIG, "intermediate_dim": 32}), checkpoint)
    message = str(error.value)
    assert "missing ['embeddings/token_embedding/embeddings']" in message
    assert "unexpected ['unknown/kernel']" in message
    assert "transformer_layer_0/intermediate_dense/kernel" in message
