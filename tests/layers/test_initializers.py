import keras
import numpy as np
import pytest

from bert_keras.layers.initializers import TruncatedNormal
from bert_keras.layers.initializers import bert_kernel_initializer


def _values(initializer, shape):
    return keras.ops.convert_to_numpy(initializer(shape))


@pytest.mark.every_backend
def test_draws_a_normal_truncated_at_two_stddevs():
    values = _values(TruncatedNormal(mean=0.5, stddev=0.1, seed=3), (300, 400))
    assert values.dtype == np.float32
    assert values.min() > 0.3 and values.max() < 0.7
    # A standard normal cut at +-2 has standard deviation 0.8796; 120,000 draws.
    assert abs(values.mean() - 0.5) < 5 * 0.1 * 0.8796 / np.sqrt(values.size)
    assert abs(values.std() / 0.1 - 0.8796) < 0.01
    # About a tenth of the mass lies beyond one stddev on each side.
    assert abs((values > 0.6).mean() - 0.1359 / 0.9545) < 0.01


@pytest.mark.every_backend
def test_a_seed_gives_the_same_values_and_another_seed_others():
    first = _values(TruncatedNormal(stddev=0.02, seed=7), (64, 32))
    np.testing.assert_array_equal(first, _values(TruncatedNormal(stddev=0.02, seed=7), (64, 32)))
    assert not np.allclose(first, _values(TruncatedNormal(stddev=0.02, seed=8), (64, 32)))


@pytest.mark.every_backend
def test_keras_seeds_the_default_initializer():
    keras.utils.set_random_seed(5)
    first = _values(bert_kernel_initializer(), (16, 8))
    keras.utils.set_random_seed(5)
    np.testing.assert_array_equal(first, _values(bert_kernel_initializer(), (16, 8)))


@pytest.mark.every_backend
def test_serializes_as_itself():
    initializer = keras.initializers.deserialize(
        keras.initializers.serialize(TruncatedNormal(stddev=0.3, seed=2))
    )
    assert isinstance(initializer, TruncatedNormal)
    assert (initializer.stddev, initializer.seed) == (0.3, 2)


@pytest.mark.every_backend
@pytest.mark.skipif(keras.backend.backend() != "jax", reason="JAX compiles a program per draw")
def test_jax_draws_on_the_host():
    assert isinstance(TruncatedNormal(stddev=0.02, seed=1)((53, 37)), np.ndarray)
    # Keras' draw is a JAX program (compiled for each new shape); bfloat16 keeps it.
    assert not isinstance(keras.initializers.TruncatedNormal(seed=1)((53, 37)), np.ndarray)
    assert not isinstance(TruncatedNormal(seed=1)((53, 37), dtype="bfloat16"), np.ndarray)
