"""Learned absolute position embeddings."""

import keras
from keras import ops

from bert_keras.layers.initializers import bert_kernel_initializer
from bert_keras.layers.initializers import clone_initializer
from bert_keras.layers.input_shapes import check_rank
from bert_keras.layers.input_shapes import check_size


@keras.saving.register_keras_serializable(package="bert_keras")
class PositionEmbedding(keras.layers.Layer):
    """A learned embedding per position, sliced to the input's length.

    Holds a `[sequence_length, hidden_dim]` table (`hidden_dim` is taken from
    the last axis of the input) and returns its first `seq` rows broadcast to
    the input's shape, so any input length up to `sequence_length` works.

    Args:
        sequence_length: the largest number of positions (BERT: 512).
        initializer: initializer of the table; BERT's truncated normal with
            stddev 0.02 by default.
        **kwargs: standard `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        inputs: a float tensor `[batch, seq, hidden_dim]`, usually the token
            embeddings the positions are added to.

    Raises:
        ValueError: when `seq` is larger than `sequence_length` (checked
            wherever the length is known at trace time).

    Example:
    >>> import numpy as np
    >>> layer = PositionEmbedding(sequence_length=16)
    >>> tuple(layer(np.zeros((2, 5, 8), "float32")).shape)
    (2, 5, 8)
    """

    def __init__(self, sequence_length, initializer=None, **kwargs):
        super().__init__(**kwargs)
        check_size(self.name, "sequence_length", sequence_length)
        self.sequence_length = int(sequence_length)
        self.initializer = keras.initializers.get(
            clone_initializer(initializer or bert_kernel_initializer())
        )

    def build(self, inputs_shape):
        check_rank(self.name, "inputs", inputs_shape)
        hidden_dim = inputs_shape[-1]
        self.position_embeddings = self.add_weight(
            name="embeddings",
            shape=(self.sequence_length, hidden_dim),
            initializer=self.initializer,
        )

    def call(self, inputs):
        check_sequence_length(inputs, self.sequence_length, "inputs", "sequence_length")
        shape = ops.shape(inputs)
        table = ops.convert_to_tensor(self.position_embeddings)
        positions = ops.slice(table, (0, 0), (shape[1], shape[-1]))  # [seq, hidden_dim]
        positions = ops.cast(positions, self.compute_dtype)
        return ops.broadcast_to(ops.expand_dims(positions, 0), shape)

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "sequence_length": self.sequence_length,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config


def check_sequence_length(
    tensor, max_sequence_length, tensor_name, limit_name="max_sequence_length"
):
    """Raises if axis 1 of `tensor` is statically longer than allowed.

    Lengths unknown at trace time (a TF graph with a `None` axis) pass.
    `limit_name` is the argument the error names as the limit.

    Example:
    >>> import numpy as np
    >>> check_sequence_length(np.zeros((1, 4)), 8, "token_ids")
    >>> check_sequence_length(np.zeros((1, 4)), 3, "inputs", "sequence_length")
    Traceback (most recent call last):
    ...
    ValueError: sequence_length is 3 but inputs has 4 positions (shape (1, 4)).
    """
    length = tensor.shape[1] if len(tensor.shape) > 1 else None
    if length is not None and length > max_sequence_length:
        raise ValueError(
            f"{limit_name} is {max_sequence_length} but {tensor_name} "
            f"has {length} positions (shape {tuple(tensor.shape)})."
        )
