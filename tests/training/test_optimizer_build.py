"""The optimizer is built before `fit` traces a step: one trace on TensorFlow, the same training."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras.data.length_batching import batch_by_length
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_classifier import BertClassifier
from bert_keras.training.optimizer_build import build_optimizer
from bert_keras.training.optimizer_build import compile_as_saved
from tests.test_case import TRAINING_BACKBONE

SEQUENCE_LENGTH = 8


def _two_width_batches():
    """Four examples in two batches of widths 4 and 8: a dataset of unknown width."""
    mask = tf.sequence_mask([3, 4, 7, 8], SEQUENCE_LENGTH, dtype=tf.int32)
    features = {"token_ids": mask * 9, "segment_ids": mask * 0, "padding_mask": mask}
    dataset = tf.data.Dataset.from_tensor_slices((features, [0, 1, 1, 0]))
    return batch_by_length(dataset, batch_size=2, pad_to_multiple_of=4)


def _classifier():
    keras.utils.set_random_seed(0)
    model = BertClassifier(BertBackbone(**TRAINING_BACKBONE), num_classes=2)
    model.compile(learning_rate=1e-2)
    return model


def _counting_train_step(model):
    calls = []

    def train_step(data):
        calls.append(None)
        return type(model).train_step(model, data)

    model.train_step = train_step
    return calls


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="tf.function's tracing")
def test_tensorflow_traces_the_training_step_once_for_every_width():
    model = _classifier()
    traces = _counting_train_step(model)
    model.fit(_two_width_batches(), epochs=2, verbose=0)
    assert len(traces) == 1  # twice when the first trace built the optimizer


def test_fit_trains_as_keras_fit_with_its_own_build():
    ours, keras_own = _classifier(), _classifier()
    ours.fit(_two_width_batches(), epochs=2, verbose=0)
    keras.Model.fit(keras_own, _two_width_batches(), epochs=2, verbose=0)
    assert len(ours.optimizer.variables) == len(keras_own.optimizer.variables)
    for mine, theirs in zip(ours.weights, keras_own.weights):
        np.testing.assert_allclose(np.array(mine), np.array(theirs), rtol=1e-6, atol=1e-7)


def test_build_optimizer_builds_once_and_skips_uncompiled_models():
    model = _classifier()
    build_optimizer(model)
    variables = list(model.optimizer.variables)
    assert len(variables) > len(model.trainable_variables)  # a slot or more per weight
    build_optimizer(model)
    assert model.optimizer.variables == variables
    uncompiled = BertClassifier(BertBackbone(**TRAINING_BACKBONE), num_classes=2)
    weights = len(uncompiled.weights)
    build_optimizer(uncompiled)
    assert len(uncompiled.weights) == weights and getattr(uncompiled, "optimizer", None) is None


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="tf.distribute")
def test_under_a_tensorflow_strategy_the_slots_are_the_strategy_s_variables():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        model = _classifier()
    build_optimizer(model)  # outside the scope, as `fit` calls it
    slots = [variable.value for variable in model.optimizer.variables]
    assert all(isinstance(slot, tf.distribute.DistributedValues) for slot in slots)
    before = [np.array(weight) for weight in model.trainable_weights]
    model.fit(_two_width_batches(), verbose=0)
    assert not np.array_equal(before[0], np.array(model.trainable_weights[0]))


def test_a_jit_compile_saved_as_true_is_torch_s_default_on_torch():
    # As a file saved on jax holds it: jax resolves Keras' "auto" to True.
    saved_on_jax = {**_classifier().get_compile_config(), "jit_compile": True}
    restored = BertClassifier(BertBackbone(**TRAINING_BACKBONE), num_classes=2)
    compile_as_saved(restored, saved_on_jax)
    # On torch True is torch.compile, which retraces every batch shape; Keras' torch default is off.
    assert restored.jit_compile is (keras.backend.backend() != "torch")
