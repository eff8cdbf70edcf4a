"""What a layer's inputs must look like, checked where their shapes are known: a misuse named, not a backend's error."""

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


def check_mask_length(layer, argument, mask, sequence_length):
    """Refuses a mask whose last axis neither spans the `sequence_length` positions nor broadcasts (1).

    Only sizes known where it is called are checked.

    Example:
    >>> import numpy as np
    >>> check_mask_length("encoder", "padding_mask", np.ones((2, 5)), 5)
    >>> check_mask_length("encoder", "padding_mask", np.ones((2, 4)), 5)
    Traceback (most recent call last):
    ...
    ValueError: encoder's padding_mask of the shape (2, 4) masks 4 positions, but its inputs have 5.
    """
    shape = getattr(mask, "shape", None)
    if shape is None or not len(shape) or shape[-1] is None or sequence_length is None:
        return
    if shape[-1] not in (sequence_length, 1):
        raise ValueError(
            f"{layer}'s {argument} of the shape {_shown(shape)} masks {shape[-1]} positions, "
            f"but its inputs have {sequence_length}."
        )


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
