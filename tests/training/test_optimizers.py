import keras
import numpy as np
import pytest
from keras import ops

from bert_keras.training.fused_adamw import FusedAdamW
from bert_keras.training.optimizers import create_optimizer


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_weight_decay_skips_layer_norm_and_bias(name):
    dense = keras.layers.Dense(4)
    norm = keras.layers.LayerNormalization()
    model = keras.Sequential([keras.Input((4,)), dense, norm])
    for variable in model.weights:
        variable.assign(np.ones(variable.shape, "float32"))
    optimizer = create_optimizer(1e-1, 10, 0, optimizer=name, weight_decay=0.5)
    zero_gradients = [ops.zeros(v.shape, "float32") for v in model.trainable_variables]
    optimizer.apply_gradients(zip(zero_gradients, model.trainable_variables))
    after = {v.path: ops.convert_to_numpy(v) for v in model.trainable_variables}
    assert np.all(after[dense.kernel.path] < 1.0)  # decayed
    for variable in (dense.bias, norm.gamma, norm.beta):
        np.testing.assert_array_equal(after[variable.path], 1.0)


def test_recipe_settings():
    optimizer = create_optimizer(1e-4, 100, 10)
    assert isinstance(optimizer, FusedAdamW)
    assert optimizer.epsilon == 1e-6 and optimizer.weight_decay == 0.01
    assert optimizer.global_clipnorm == 1.0


def test_unknown_optimizer():
    with pytest.raises(ValueError, match="one of \\['adamw', 'lamb'\\], got 'sgd'"):
        create_optimizer(1e-4, 100, 10, optimizer="sgd")


def test_schedule_counts_optimizer_steps_when_accumulating():
    optimizer = create_optimizer(1e-3, 10, 4, gradient_accumulation_steps=3)
    variable = keras.Variable(np.ones(2, "float32"))
    rates = []
    for _ in range(12 * 3):
        optimizer.apply_gradients([(ops.ones(2, "float32"), variable)])
        rates.append(float(ops.convert_to_numpy(optimizer.learning_rate)))
    # After 2 optimizer steps (6 batches) warmup is half done; after 10 the rate is 0.
    assert int(optimizer.iterations) == 12
    np.testing.assert_allclose(rates[5], 1e-3 * 2 / 4, rtol=1e-6)
    np.testing.assert_allclose(rates[3 * 7 - 1], 1e-3 * (10 - 7) / 6, rtol=1e-6)
    assert rates[3 * 10 - 1] == 0.0


def _updates_of_a_constant_gradient(gradient_accumulation_steps):
    optimizer = create_optimizer(
        1e-3, 4, 2, gradient_accumulation_steps=gradient_accumulation_steps
    )
    variable = keras.Variable(np.ones(2, "float32"))
    updates = []
    for _ in range(4):
        before = ops.convert_to_numpy(variable)
        for _ in range(gradient_accumulation_steps or 1):
            optimizer.apply_gradients([(ops.full((2,), 0.1, "float32"), variable)])
        updates.append(before - ops.convert_to_numpy(variable))
    return np.array(updates)


@pytest.mark.parametrize("gradient_accumulation_steps", [2, 4])
def test_accumulated_updates_are_the_updates_of_the_whole_batch(gradient_accumulation_steps):
    # The mean of equal gradients is that gradient: each update is the whole batch's.
    expected = _updates_of_a_constant_gradient(None)
    assert expected[0].max() == 0.0 and expected[2].min() > expected[1].max()  # warmup, peak
    np.testing.assert_allclose(
        _updates_of_a_constant_gradient(gradient_accumulation_steps), expected, rtol=1e-5, atol=1e-9
    )
