"""Losses that average over a count: N replicas, each given a slice, step as one device on the batch."""

import keras
import numpy as np
import pytest

from bert_keras.models.token_cross_entropy import TokenCrossEntropy
from bert_keras.training.replica_losses import mean_over_replicas
from tests.programs import json_printed_by
from tests.training.replica_loss_run import batch

BACKEND = keras.backend.backend()


def test_on_one_device_the_token_loss_is_keras_ignoring_the_class():
    labels, logits = batch()
    weights = np.random.default_rng(1).uniform(size=labels.shape).astype("float32")
    keras_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-100)
    for sample_weight in (None, weights):
        np.testing.assert_allclose(
            float(TokenCrossEntropy()(labels, logits, sample_weight)),
            float(keras_loss(labels, logits, sample_weight)),
            rtol=1e-6,
        )
    assert float(TokenCrossEntropy()(np.full_like(labels, -100), logits)) == 0.0
    restored = TokenCrossEntropy.from_config(TokenCrossEntropy(ignore_class=-1).get_config())
    assert restored.get_config()["ignore_class"] == -1
    three = keras.ops.convert_to_tensor(3.0)
    assert float(mean_over_replicas(three, loss=three)) == 3.0  # one replica
    every_label = np.where(labels < 0, 1, labels)
    np.testing.assert_allclose(  # no class ignored: every token counts
        float(TokenCrossEntropy(ignore_class=None)(every_label, logits)),
        float(keras.losses.SparseCategoricalCrossentropy(from_logits=True)(every_label, logits)),
        rtol=1e-6,
    )


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"from_logits": False}, "takes from_logits=True only, got False"),
        ({"reduction": None}, "takes reduction='sum' only, got None"),
    ],
)
def test_the_token_loss_refuses_settings_it_would_not_follow(setting, message):
    with pytest.raises(ValueError, match=message):
        TokenCrossEntropy(**setting)


@pytest.mark.large
@pytest.mark.skipif(BACKEND == "jax", reason="jax's mesh computes the whole batch's loss as it is")
def test_a_step_on_two_replicas_is_one_devices_step_on_the_whole_batch():
    command = ["-m", "tests.training.replica_loss_run"]
    if BACKEND == "torch":
        command[:0] = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    result = json_printed_by(command, timeout=300)
    assert result["ours"] < 1e-6
    # The halves' counts differ, so Keras' mean of their means steps elsewhere.
    assert result["keras"] > 1e-2
    if BACKEND == "tensorflow":  # saved with XLA on, evaluated under replicas without it
        reloaded = result["reloaded"]
        np.testing.assert_allclose(reloaded["replicas"], reloaded["one"], rtol=1e-5)
        # Batches split unevenly: evaluated, logged while fitting, and the weights fitted.
        for model, differences in result["uneven"].items():
            # The original's 1e-5 in the masked-LM normaliser counts once per replica.
            assert max(differences) < 2e-5, (model, differences)
    if BACKEND == "torch":  # evaluating, or on one process alone: its own half's mean
        for ours, theirs in (result["evaluating"], result["alone"]):
            np.testing.assert_allclose(ours, theirs, rtol=1e-6)
