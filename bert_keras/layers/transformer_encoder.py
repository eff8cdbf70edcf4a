"""One Transformer encoder block: self-attention, then a feed-forward net."""

import keras
from keras import ops

from bert_keras.layers.activations import get_activation
from bert_keras.layers.dense import Dense
from bert_keras.layers.dropout import Dropout
from bert_keras.layers.initializers import bert_kernel_initializer
from bert_keras.layers.initializers import clone_initializer
from bert_keras.layers.input_shapes import check_mask_shape
from bert_keras.layers.input_shapes import check_positive_number
from bert_keras.layers.input_shapes import check_rank
from bert_keras.layers.input_shapes import check_size
from bert_keras.layers.multi_head_self_attention import MultiHeadSelfAttention
from bert_keras.layers.sequence_positions import gather_positions


@keras.saving.register_keras_serializable(package="bert_keras")
class TransformerEncoder(keras.layers.Layer):
    """A Transformer encoder block, post-LN as in BERT or pre-LN.

    Post-LN (`normalize_first=False`, BERT): `x = LN(x + attention(x))`, then
    `x = LN(x + feed_forward(x))`. Pre-LN: `x = x + attention(LN(x))`, then
    `x = x + feed_forward(LN(x))`. The sublayers mirror
    `bert/encoder/layer_N/*` of the original checkpoint.

    Args:
        num_heads: number of attention heads.
        intermediate_dim: width of the feed-forward hidden layer (BERT: 4H).
        activation: feed-forward activation name, see
            `bert_keras.layers.activations`; the original BERT computes
            "gelu_approximate", Hugging Face's "gelu" is the exact "gelu".
        dropout: dropout rate on the attention and feed-forward outputs.
        attention_dropout: dropout rate on the attention probabilities;
            defaults to `dropout`.
        layer_norm_epsilon: layer norm epsilon; BERT uses 1e-12.
        normalize_first: pre-LN instead of post-LN.
        kernel_initializer: initializer of every kernel.
        bias_initializer: initializer of every bias.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: float tensor `[batch, seq, hidden]`.
        padding_mask: optional int/bool tensor `[batch, seq]`, 1 for real
            tokens, 0 for padding.
        attention_mask: optional int/bool tensor `[batch, seq, seq]`, 1 where
            query `i` may attend to key `j`. Combined with `padding_mask`.
        output_positions: optional int tensor `[batch, n]`: compute the
            output at these positions only and return `[batch, n, hidden]`,
            the full output's rows there. Attention still reads every
            position; the queries, attention output and feed-forward net run
            on `n` rows instead of `seq` (BERT pretraining reads the last
            block at [CLS] and the masked positions only).
        training: whether dropout is active.

    Example:
    >>> import numpy as np
    >>> block = TransformerEncoder(num_heads=2, intermediate_dim=16)
    >>> x = np.ones((2, 4, 8), "float32")
    >>> tuple(block(x, padding_mask=np.array([[1, 1, 1, 0], [1, 1, 0, 0]])).shape)
    (2, 4, 8)
    """

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        activation="gelu_approximate",
        dropout=0.1,
        attention_dropout=None,
        layer_norm_epsilon=1e-12,
        normalize_first=False,
        kernel_initializer=None,
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_size(self.name, "num_heads", num_heads)
        check_size(self.name, "intermediate_dim", intermediate_dim)
        check_positive_number(self.name, "layer_norm_epsilon", layer_norm_epsilon)
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.activation = activation
        self.activation_fn = get_activation(activation)
        self.dropout = dropout
        self.attention_dropout = dropout if attention_dropout is None else attention_dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.normalize_first = normalize_first
        self.kernel_initializer = keras.initializers.get(
            clone_initializer(kernel_initializer or bert_kernel_initializer())
        )
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, inputs_shape):
        check_rank(self.name, "inputs", inputs_shape)
        hidden_dim = inputs_shape[-1]
        self.self_attention = MultiHeadSelfAttention(
            self.num_heads,
            dropout=self.attention_dropout,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name="self_attention",
        )
        self.self_attention.build(inputs_shape)
        self.attention_layer_norm = self._layer_norm("attention_layer_norm")
        self.attention_layer_norm.build(inputs_shape)
        self.intermediate_dense = self._dense(
            self.intermediate_dim, "intermediate_dense", self.activation_fn
        )
        self.intermediate_dense.build(inputs_shape)
        self.output_dense = self._dense(hidden_dim, "output_dense")
        self.output_dense.build(tuple(inputs_shape[:-1]) + (self.intermediate_dim,))
        self.output_layer_norm = self._layer_norm("output_layer_norm")
        self.output_layer_norm.build(inputs_shape)
        self.dropout_layer = Dropout(self.dropout, dtype=self.dtype_policy, name="dropout")

    def _layer_norm(self, name):
        return keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name=name
        )

    def _dense(self, units, name, activation=None):
        return Dense(
            units,
            activation=activation,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name=name,
        )

    def call(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        output_positions=None,
        training=None,
    ):
        check_mask_shape(self.name, "padding_mask", padding_mask, inputs.shape, "[batch, sequence]")
        check_mask_shape(
            self.name, "attention_mask", attention_mask, inputs.shape, "[batch, sequence, sequence]"
        )
        attention_mask = merge_attention_masks(padding_mask, attention_mask)
        residual = inputs
        if output_positions is not None:
            residual = gather_positions(inputs, output_positions)  # [batch, n, hidden]
            attention_mask = _query_rows(attention_mask, output_positions)
        if self.normalize_first:
            normalized = self.attention_layer_norm(inputs)
            x = residual + self._attend(normalized, attention_mask, output_positions, training)
            return x + self._feed_forward(self.output_layer_norm(x), training)
        attended = self._attend(inputs, attention_mask, output_positions, training)
        x = self.attention_layer_norm(residual + attended)
        return self.output_layer_norm(x + self._feed_forward(x, training))

    def _attend(self, x, attention_mask, query_positions, training):
        attended = self.self_attention(
            x,
            attention_mask=attention_mask,
            query_positions=query_positions,
            training=training,
        )
        return self.dropout_layer(attended, training=training)

    def _feed_forward(self, x, training):
        hidden = self.intermediate_dense(x)  # [batch, seq, intermediate_dim]
        return self.dropout_layer(self.output_dense(hidden), training=training)

    def compute_output_shape(self, inputs_shape, output_positions_shape=None):
        if output_positions_shape is None:
            return inputs_shape
        return tuple(output_positions_shape) + (inputs_shape[-1],)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "activation": self.activation,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "normalize_first": self.normalize_first,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config


def merge_attention_masks(padding_mask, attention_mask):
    """Combines a `[batch, seq]` padding mask and a `[batch, seq, seq]` mask.

    Returns a bool mask `[batch, 1, seq or 1, seq]` (the head axis broadcast),
    or None when both are None.

    Example:
    >>> import numpy as np
    >>> tuple(merge_attention_masks(np.array([[1, 0]]), None).shape)
    (1, 1, 1, 2)
    """
    merged = None
    if padding_mask is not None:
        merged = ops.cast(padding_mask, "bool")[:, None, None, :]
    if attention_mask is not None:
        full = ops.cast(attention_mask, "bool")[:, None, :, :]
        merged = full if merged is None else ops.logical_and(merged, full)
    return merged


def _query_rows(attention_mask, positions):
    """The rows of a `[batch, 1, seq or 1, seq]` mask for the queries kept."""
    if attention_mask is None or attention_mask.shape[2] == 1:
        return attention_mask
    return gather_positions(attention_mask[:, 0], positions)[:, None]  # [batch, 1, n, seq]
