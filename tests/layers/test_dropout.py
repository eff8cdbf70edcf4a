import keras
import numpy as np
import pytest
from keras import ops

from bert_keras.layers.dropout import Dropout
from bert_keras.layers.dropout import threefry_2x32
from tests.test_case import TestCase


def _dropped(rate, shape, seed=3, dtype="float32"):
    layer = Dropout(rate, seed=seed, dtype=dtype)
    inputs = np.full(shape, 2.0, "float32")
    return ops.convert_to_numpy(ops.cast(layer(inputs, training=True), "float32"))


class TestDropout(TestCase):
    def test_shared_checks(self):
        self.run_layer_test(
            Dropout,
            {"rate": 0.1},
            {"inputs": np.random.rand(2, 5, 8).astype("float32")},
            expected_output_shape=(2, 5, 8),
            expected_num_trainable_weights=0,
        )

    @pytest.mark.parametrize("rate", [0.1, 0.5])
    def test_drops_the_rate_and_keeps_the_expectation(self, rate):
        outputs = _dropped(rate, (250, 401))  # an odd element count
        dropped = outputs == 0
        # 100,250 draws: 5 standard deviations of the dropped fraction.
        tolerance = 5 * np.sqrt(rate * (1 - rate) / outputs.size)
        assert abs(dropped.mean() - rate) < tolerance
        np.testing.assert_allclose(outputs[~dropped], 2.0 / (1 - rate), rtol=1e-4)
        assert abs(outputs.mean() - 2.0) < 2.0 * tolerance / (1 - rate)

    def test_masks_differ_between_calls_and_positions(self):
        layer = Dropout(0.5, seed=0)
        inputs = np.ones((64, 64), "float32")
        first = ops.convert_to_numpy(layer(inputs, training=True)) == 0
        second = ops.convert_to_numpy(layer(inputs, training=True)) == 0
        assert 0.4 < (first != second).mean() < 0.6
        # Neighbouring elements (consecutive counters on JAX) are independent.
        assert 0.4 < (first[:, 0::2] != first[:, 1::2]).mean() < 0.6

    def test_a_seed_gives_the_same_masks_in_a_new_layer(self):
        first, second = Dropout(0.5, seed=7), Dropout(0.5, seed=7)
        inputs = np.ones((16, 64), "float32")
        masks = [
            [ops.convert_to_numpy(layer(inputs, training=True)) == 0 for _ in range(2)]
            for layer in (first, second)
        ]
        np.testing.assert_array_equal(masks[0][0], masks[1][0])
        np.testing.assert_array_equal(masks[0][1], masks[1][1])
        assert (masks[0][0] != masks[0][1]).any()
        other = ops.convert_to_numpy(Dropout(0.5, seed=8)(inputs, training=True)) == 0
        assert (other != masks[0][0]).any()

    def test_inference_and_zero_rate_pass_inputs_through(self):
        inputs = np.random.rand(3, 7).astype("float32")
        np.testing.assert_array_equal(ops.convert_to_numpy(Dropout(0.3)(inputs)), inputs)
        np.testing.assert_array_equal(
            ops.convert_to_numpy(Dropout(0.0)(inputs, training=True)), inputs
        )

    def test_keeps_a_low_precision_dtype(self):
        layer = Dropout(0.1, dtype="mixed_bfloat16")
        outputs = layer(np.ones((4, 6), "float32"), training=True)
        assert keras.backend.standardize_dtype(outputs.dtype) == "bfloat16"

    def test_a_noise_shape_drops_whole_rows(self):
        layer = Dropout(0.5, noise_shape=(32, 1), seed=2)
        outputs = ops.convert_to_numpy(layer(np.ones((32, 8), "float32"), training=True))
        rows_dropped = (outputs == 0).all(axis=1)
        assert ((outputs == 0).any(axis=1) == rows_dropped).all()
        assert 0 < rows_dropped.sum() < 32


def test_threefry_is_jax_threefry_2x32():
    import jax.extend.random

    rng = np.random.default_rng(0)
    key = rng.integers(0, 2**32, 2, dtype=np.uint64).astype(np.uint32)
    counts = rng.integers(0, 2**32, (2, 1000), dtype=np.uint64).astype(np.uint32)
    expected = np.asarray(jax.extend.random.threefry_2x32(key, counts.reshape(-1))).reshape(2, 1000)
    np.testing.assert_array_equal(
        np.stack(threefry_2x32(key[0], key[1], counts[0], counts[1])), expected
    )


@pytest.mark.one_backend("torch")
def test_torch_compile_traces_dropout_in_one_graph():
    import torch

    layer = Dropout(0.1)
    explanation = torch._dynamo.explain(lambda x: layer(x, training=True))(torch.ones(4, 8))
    assert explanation.graph_break_count == 0, explanation.break_reasons


@pytest.mark.one_backend("jax")
@pytest.mark.parametrize("rate", [0.1, 0.5])
def test_jax_draws_16_bits_an_element_on_a_gpu(monkeypatch, rate):
    import jax

    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    cpu_outputs = _dropped(rate, (250, 401))
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    outputs = _dropped(rate, (250, 401))
    dropped = outputs == 0
    tolerance = 5 * np.sqrt(rate * (1 - rate) / outputs.size)
    assert abs(dropped.mean() - rate) < tolerance
    np.testing.assert_allclose(outputs[~dropped], 2.0 / (1 - rate), rtol=1e-4)
    pairs = dropped.reshape(-1)[: dropped.size // 2 * 2].reshape(-1, 2)  # neighbours
    assert abs((pairs[:, 0] != pairs[:, 1]).mean() / (2 * rate * (1 - rate)) - 1) < 0.1
    assert (dropped != (cpu_outputs == 0)).any()  # not the CPU's 32-bit draws
