"""Weight initialisation as BERT does it."""

import keras
import numpy as np

BERT_INITIALIZER_STDDEV = 0.02
_TRUNCATION = 2.0  # in stddevs


@keras.saving.register_keras_serializable(package="bert_keras")
class TruncatedNormal(keras.initializers.TruncatedNormal):
    """`keras.initializers.TruncatedNormal` whose JAX draws compile nothing.

    JAX compiles its truncated normal, and the scaling after it, once for
    every new weight shape: a BERT's first build spends seconds compiling
    programs that each run once. On JAX, float32 weights of an integer-seeded
    initializer (the default: Keras seeds one from `keras.utils.set_random_seed`)
    are drawn on the host with numpy's generator seeded alike: the same
    distribution, a normal resampled outside two stddevs, reproducible
    across calls and runs. Other backends, dtypes and `SeedGenerator`
    seeds draw as Keras does.

    Args:
        mean: mean of the values.
        stddev: standard deviation of the normal before truncation.
        seed: an integer, a `keras.random.SeedGenerator` or None.

    Example:
    >>> import numpy as np
    >>> values = np.asarray(TruncatedNormal(stddev=0.02, seed=1)((200, 50)))
    >>> bool(np.abs(values).max() <= 0.04), bool(abs(values.std() - 0.0176) < 0.001)
    (True, True)
    >>> bool((np.asarray(TruncatedNormal(stddev=0.02, seed=1)((200, 50))) == values).all())
    True
    """

    def __call__(self, shape, dtype=None):
        dtype = keras.backend.standardize_dtype(dtype or keras.config.floatx())
        if keras.backend.backend() != "jax" or dtype != "float32" or not isinstance(self.seed, int):
            return super().__call__(shape, dtype=dtype)
        generator = np.random.default_rng(self.seed)
        values = generator.standard_normal(shape, dtype=np.float32).reshape(-1)
        outside = np.flatnonzero(np.abs(values) >= _TRUNCATION)
        while outside.size:  # each pass redraws, and checks, only the values still outside
            values[outside] = generator.standard_normal(outside.size, dtype=np.float32)
            outside = outside[np.abs(values[outside]) >= _TRUNCATION]
        return values.reshape(shape) * np.float32(self.stddev) + np.float32(self.mean)


def bert_kernel_initializer(stddev=BERT_INITIALIZER_STDDEV):
    """The original BERT's initializer: a normal truncated at two stddevs.

    Example:
    >>> bert_kernel_initializer().stddev
    0.02
    """
    return TruncatedNormal(stddev=stddev)


def clone_initializer(initializer):
    """Returns a fresh initializer with the same config as `initializer`.

    Sublayers get their own instance, so no two variables share one object's
    state.

    Args:
        initializer: anything `keras.initializers.get` accepts.

    Example:
    >>> clone_initializer("zeros").__class__.__name__
    'Zeros'
    """
    initializer = keras.initializers.get(initializer)
    return initializer.__class__.from_config(initializer.get_config())
