"""Activation functions, looked up by the names BERT configurations use.

Layers store the activation as a string so that `get_config()` round-trips and
a checkpoint's numerics stay visible in its config. "gelu" is the exact (erf)
form, as in Keras and Hugging Face; the original BERT release computes the tanh
approximation, which is "gelu_approximate" here (Hugging Face: "gelu_new" or
"gelu_pytorch_tanh"). The two differ by up to about 3e-3 on real activations,
so loading a checkpoint with the wrong one gives visibly wrong numbers.
"""

import keras


def gelu_exact(x):
    """GELU computed with the Gauss error function.

    Example:
    >>> import numpy as np
    >>> float(gelu_exact(np.array(1.0, "float32")))  # doctest: +ELLIPSIS
    0.841...
    """
    return keras.activations.gelu(x, approximate=False)


def gelu_approximate(x):
    """GELU computed with the tanh approximation of the original BERT code.

    Example:
    >>> import numpy as np
    >>> float(gelu_approximate(np.array(1.0, "float32")))  # doctest: +ELLIPSIS
    0.841...
    """
    return keras.activations.gelu(x, approximate=True)


ACTIVATIONS = {
    "gelu": gelu_exact,
    "gelu_approximate": gelu_approximate,
    "relu": keras.activations.relu,
    "silu": keras.activations.silu,
    "tanh": keras.activations.tanh,
    "linear": keras.activations.linear,
}


def get_activation(name):
    """Returns the activation function registered under `name`.

    Args:
        name: one of the keys of `ACTIVATIONS`: "gelu" (exact, erf),
            "gelu_approximate" (tanh form, the original BERT), "relu", "silu",
            "tanh" or "linear".

    Raises:
        ValueError: `name` is not a known activation; the message lists them.

    Example:
    >>> get_activation("gelu_approximate").__name__
    'gelu_approximate'
    """
    if not isinstance(name, str) or name not in ACTIVATIONS:
        raise ValueError(
            f"Unknown activation {name!r}. Expected one of "
            f"{sorted(ACTIVATIONS)}: 'gelu' is the exact erf form, "
            "'gelu_approximate' the tanh form of the original BERT."
        )
    return ACTIVATIONS[name]
