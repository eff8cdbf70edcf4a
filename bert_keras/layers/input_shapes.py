"""What a layer's inputs must look like, checked where their shapes are known: a misuse named, not a backend's error."""

import numbers

import keras

SEQUENCE = "[batch, sequence, hidden]"


def check_rank(layer, argument, shape, layout=SEQUENCE):
    """Refuses a `shape` of another rank than `layout`'s, naming the layer, the argument and the shape.

    Example:
    >>> check_rank("encoder", "inputs", (2, 5, 8))
    >>> check_rank("encoder", "inputs", (2, 8))
    Traceback (most recent call last):
    ...
    ValueError: encoder takes inputs of the shape [batch, sequence, hidden]; got the shape (2, 8).
    """
    if shape is not None and len(shape) != layout.count(",") + 1:
        raise ValueError(
            f"{layer} takes {argument} of the shape {layout}; got the shape {_shown(shape)}."
        )


def check_size(layer, argument, value):
    """Refuses a size that is not a whole number of at least 1, naming the layer and the argument.

    Example:
    >>> check_size("attention", "num_heads", 2)
    >>> check_size("attention", "num_heads", 0)
    Traceback (most recent call last):
    ...
    ValueError: attention's num_heads is 0 but must be a whole number, at least 1.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(
            f"{layer}'s {argument} is {value!r} but must be a whole number, at least 1."
        )


def check_positive_number(layer, argument, value):
    """Refuses a value that is not a finite number above 0 (an epsilon), naming the layer and the argument.

    Example:
    >>> check_positive_number("encoder", "layer_norm_epsilon", 1e-12)
    >>> check_positive_number("encoder", "layer_norm_epsilon", -1.0)
    Traceback (most recent call last):
    ...
    ValueError: encoder's layer_norm_epsilon is -1.0 but must be a positive number.
    """
    is_number = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not (is_number and 0 < value < float("inf")):
        raise ValueError(f"{layer}'s {argument} is {value!r} but must be a positive number.")


def check_mask_shape(layer, argument, mask, inputs_shape, layout, queries=None):
    """Refuses a mask of another rank than `layout`'s, or for another batch or length than the inputs'.

    Its first axis must be the inputs' batch and its last their sequence,
    each or 1 (broadcast); the axis before the last, where there is one, must
    be the `queries` (by default the sequence) or 1. Only sizes known where it
    is called are checked.

    Example:
    >>> import numpy as np
    >>> check_mask_shape("encoder", "padding_mask", np.ones((2, 5)), (2, 5, 8), "[batch, sequence]")
    >>> check_mask_shape("encoder", "padding_mask", np.ones((2, 4)), (2, 5, 8), "[batch, sequence]")
    Traceback (most recent call last):
    ...
    ValueError: encoder's padding_mask of the shape (2, 4) masks 4 positions, but its inputs have 5.
    >>> check_mask_shape("encoder", "padding_mask", np.ones((3, 5)), (2, 5, 8), "[batch, sequence]")
    Traceback (most recent call last):
    ...
    ValueError: encoder's padding_mask of the shape (3, 5) is for a batch of 3, but its inputs hold 2.
    """
    shape = getattr(mask, "shape", None)
    if shape is None:
        return
    check_rank(layer, argument, shape, layout)
    batch, sequence_length = inputs_shape[0], inputs_shape[1]
    if _differs(shape[0], batch):
        raise ValueError(
            f"{layer}'s {argument} of the shape {_shown(shape)} is for a batch of {shape[0]}, "
            f"but its inputs hold {batch}."
        )
    if _differs(shape[-1], sequence_length):
        raise ValueError(
            f"{layer}'s {argument} of the shape {_shown(shape)} masks {shape[-1]} positions, "
            f"but its inputs have {sequence_length}."
        )
    queries = sequence_length if queries is None else queries
    if len(shape) > 2 and _differs(shape[-2], queries):
        raise ValueError(
            f"{layer}'s {argument} of the shape {_shown(shape)} is for {shape[-2]} queries, "
            f"but it is asked for {queries}."
        )


def _differs(size, expected):
    """Whether a known axis `size` is neither `expected` (when known) nor 1."""
    return None not in (size, expected) and size not in (expected, 1)


def check_floating(layer, argument, tensor):
    """Refuses a tensor of integers or booleans where the layer computes on floats.

    Example:
    >>> import numpy as np
    >>> check_floating("attention", "inputs", np.ones((2, 3), "float32"))
    >>> check_floating("attention", "inputs", np.ones((2, 3), "int32"))
    Traceback (most recent call last):
    ...
    ValueError: attention takes floating-point inputs; got int32 (token ids go to an embedding first).
    """
    dtype = keras.backend.standardize_dtype(tensor.dtype)
    if not dtype.startswith(("float", "bfloat")):
        raise ValueError(
            f"{layer} takes floating-point {argument}; got {dtype} (token ids go to an embedding "
            "first)."
        )


def _shown(shape):
    return tuple(None if size is None else int(size) for size in shape)
