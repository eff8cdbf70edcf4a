import keras
import numpy as np
import pytest
from keras import ops

from bert_keras.layers.dense import Dense
from tests.test_case import TestCase

INPUTS = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")


def _keras_dense_and_ours(dtype="float32", **kwargs):
    """A `keras.layers.Dense` and a `Dense` of the same non-trivial weights."""
    reference = keras.layers.Dense(6, dtype=dtype, **kwargs)
    ours = Dense(6, dtype=dtype, **kwargs)
    reference.build(INPUTS.shape)
    ours.build(INPUTS.shape)
    rng = np.random.default_rng(1)
    weights = [rng.normal(size=w.shape).astype("float32") for w in reference.get_weights()]
    reference.set_weights(weights)
    ours.set_weights(weights)
    return reference, ours


def _loss_and_gradients(layer):
    if keras.backend.backend() == "torch":
        outputs = layer(INPUTS)
        loss = ops.sum(ops.cast(outputs, "float32") ** 2)
        loss.backward()
        gradients = [v.value.grad for v in layer.trainable_variables]
    elif keras.backend.backend() == "jax":
        import jax

        def loss_of(values):
            outputs, _ = layer.stateless_call(values, [], INPUTS)
            return ops.sum(ops.cast(outputs, "float32") ** 2)

        values = [v.value for v in layer.trainable_variables]
        loss, gradients = jax.value_and_grad(loss_of)(values)
    else:
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = ops.sum(ops.cast(layer(INPUTS), "float32") ** 2)
        gradients = tape.gradient(loss, layer.trainable_variables)
    return float(loss), [ops.convert_to_numpy(g) for g in gradients]


class TestDense(TestCase):
    def test_shared_checks(self):
        self.run_layer_test(
            Dense,
            {"units": 6, "activation": "gelu"},
            {"inputs": INPUTS},
            expected_output_shape=(2, 5, 6),
            expected_num_trainable_weights=2,
        )

    @pytest.mark.parametrize("activation", [None, "gelu"])
    def test_outputs_and_gradients_equal_keras_dense(self, activation):
        reference, ours = _keras_dense_and_ours(activation=activation)
        np.testing.assert_allclose(
            ops.convert_to_numpy(ours(INPUTS)), ops.convert_to_numpy(reference(INPUTS)), atol=1e-5
        )
        reference_loss, reference_gradients = _loss_and_gradients(reference)
        loss, gradients = _loss_and_gradients(ours)
        np.testing.assert_allclose(loss, reference_loss, rtol=1e-5)
        for actual, expected in zip(gradients, reference_gradients, strict=True):
            np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-4)

    @pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
    def test_a_mixed_policy_computes_in_its_dtype_within_one_rounding(self, policy):
        reference, ours = _keras_dense_and_ours(policy)
        outputs = ours(INPUTS)
        assert keras.backend.standardize_dtype(outputs.dtype) == policy.removeprefix("mixed_")
        expected = ops.convert_to_numpy(ops.cast(reference(INPUTS), "float32"))
        # Keras rounds the product before adding the bias, torch's addmm after.
        spacing = np.abs(expected) * (2**-7 if policy == "mixed_bfloat16" else 2**-10)
        assert (
            np.abs(ops.convert_to_numpy(ops.cast(outputs, "float32")) - expected)
            <= spacing * 2 + 1e-3
        ).all()

    def test_without_bias_and_with_lora_it_is_keras_dense(self):
        reference, ours = _keras_dense_and_ours(use_bias=False)
        np.testing.assert_allclose(
            ops.convert_to_numpy(ours(INPUTS)), ops.convert_to_numpy(reference(INPUTS)), atol=1e-5
        )
        ours = Dense(6)
        ours.build(INPUTS.shape)
        before = ops.convert_to_numpy(ours(INPUTS))
        ours.enable_lora(2, b_initializer="ones")
        after = ops.convert_to_numpy(ours(INPUTS))
        expected = INPUTS @ ops.convert_to_numpy(ours.kernel) + ops.convert_to_numpy(ours.bias)
        assert np.abs(after - before).max() > 0.1
        np.testing.assert_allclose(after, expected, atol=1e-4)

    @pytest.mark.parametrize("mode", ["int8", "int4", "float8"])
    def test_quantized_it_is_keras_dense_quantized(self, mode):
        # Keras' Dense.quantize refuses subclasses unless told not to check.
        reference, ours = _keras_dense_and_ours(activation="gelu")
        expected_float = ops.convert_to_numpy(reference(INPUTS))
        reference.quantize(mode)
        ours.quantize(mode)
        assert ours.quantization_mode == mode
        assert ours.dtype_policy.name == reference.dtype_policy.name
        for actual, expected in zip(ours.get_weights(), reference.get_weights(), strict=True):
            np.testing.assert_array_equal(actual, expected)
        # Keras' quantized call on every backend, not the float one of torch.
        outputs = ops.convert_to_numpy(ours(INPUTS))
        np.testing.assert_allclose(outputs, ops.convert_to_numpy(reference(INPUTS)), atol=1e-6)
        # Outputs up to 8 here: int8 is off by 0.03, int4 by 0.5, float8 by 0.2.
        tolerance = {"int8": 0.1, "int4": 1.5, "float8": 0.5}[mode]
        assert 0 < np.abs(outputs - expected_float).max() < tolerance


@pytest.mark.one_backend("torch")
def test_torch_adds_the_bias_inside_the_matmul(monkeypatch):
    import torch

    calls = []
    linear = torch.nn.functional.linear
    monkeypatch.setattr(
        torch.nn.functional, "linear", lambda *a, **k: calls.append(a[2]) or linear(*a, **k)
    )
    _, ours = _keras_dense_and_ours()
    ours(INPUTS)
    assert len(calls) == 1 and calls[0] is not None
    np.testing.assert_array_equal(ops.convert_to_numpy(calls[0]), ops.convert_to_numpy(ours.bias))
