"""Picking the vectors at given positions out of a sequence."""

from keras import ops


def gather_positions(sequence, positions):
    """The rows of `sequence` at `positions`, per batch element.

    Args:
        sequence: tensor `[batch, seq, ...]`.
        positions: int tensor `[batch, n]`, indices into `seq`.

    Returns:
        tensor `[batch, n, ...]`.

    Example:
    >>> import numpy as np
    >>> sequence = np.arange(12, dtype="float32").reshape(2, 3, 2)
    >>> np.asarray(gather_positions(sequence, np.array([[2], [0]]))).tolist()
    [[[4.0, 5.0]], [[6.0, 7.0]]]
    """
    positions = ops.cast(positions, "int32")
    trailing_axes = len(sequence.shape) - 2
    index = ops.reshape(positions, tuple(ops.shape(positions)) + (1,) * trailing_axes)
    return ops.take_along_axis(sequence, index, axis=1)
