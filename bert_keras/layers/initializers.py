"""Weight initialisation as BERT does it."""

import keras

BERT_INITIALIZER_STDDEV = 0.02


def bert_kernel_initializer(stddev=BERT_INITIALIZER_STDDEV):
    """The original BERT's initializer: a normal truncated at two stddevs.

    Example:
    >>> bert_kernel_initializer().stddev
    0.02
    """
    return keras.initializers.TruncatedNormal(stddev=stddev)


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
