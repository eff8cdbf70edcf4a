"""BERT's input embeddings: token + segment + position, then layer norm."""

import keras
from keras import ops

from bert_keras.layers.dropout import Dropout
from bert_keras.layers.initializers import bert_kernel_initializer
from bert_keras.layers.initializers import clone_initializer
from bert_keras.layers.position_embedding import PositionEmbedding


@keras.saving.register_keras_serializable(package="bert_keras")
class BertEmbeddings(keras.layers.Layer):
    """Sums token, segment and learned position embeddings, normalises, drops.

    Matches `bert/embeddings/*` of the original checkpoint: word, token-type
    and position tables, one layer norm, dropout.

    Args:
        vocabulary_size: number of token ids.
        hidden_dim: embedding width.
        max_sequence_length: number of learned positions.
        num_segments: number of segment (token type) ids; BERT uses 2. With
            0 the layer has no segment table and takes no `segment_ids`
            (models of one sequence, such as BERT4Rec).
        dropout: dropout rate after the layer norm.
        layer_norm_epsilon: layer norm epsilon; BERT uses 1e-12.
        initializer: initializer of the three tables.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        token_ids: int tensor `[batch, seq]`.
        segment_ids: int tensor `[batch, seq]`; None when `num_segments`
            is 0.
        training: whether dropout is active.

    Example:
    >>> import numpy as np
    >>> layer = BertEmbeddings(vocabulary_size=10, hidden_dim=8,
    ...                        max_sequence_length=6)
    >>> ids = np.array([[1, 2, 3]])
    >>> tuple(layer(ids, np.zeros_like(ids)).shape)
    (1, 3, 8)
    """

    def __init__(
        self,
        vocabulary_size,
        hidden_dim,
        max_sequence_length=512,
        num_segments=2,
        dropout=0.1,
        layer_norm_epsilon=1e-12,
        initializer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocabulary_size = vocabulary_size
        self.hidden_dim = hidden_dim
        self.max_sequence_length = max_sequence_length
        self.num_segments = num_segments
        self.dropout = dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer = keras.initializers.get(
            clone_initializer(initializer or bert_kernel_initializer())
        )
        self.token_embedding = keras.layers.Embedding(
            vocabulary_size,
            hidden_dim,
            embeddings_initializer=clone_initializer(self.initializer),
            dtype=self.dtype_policy,
            name="token_embedding",
        )
        self.segment_embedding = None
        if num_segments:
            self.segment_embedding = keras.layers.Embedding(
                num_segments,
                hidden_dim,
                embeddings_initializer=clone_initializer(self.initializer),
                dtype=self.dtype_policy,
                name="segment_embedding",
            )
        self.position_embedding = PositionEmbedding(
            max_sequence_length,
            initializer=clone_initializer(self.initializer),
            dtype=self.dtype_policy,
            name="position_embedding",
        )
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm"
        )
        self.dropout_layer = Dropout(dropout, dtype=self.dtype_policy, name="dropout")

    def build(self, token_ids_shape, segment_ids_shape=None):
        self.token_embedding.build(token_ids_shape)
        if self.segment_embedding is not None:
            self.segment_embedding.build(token_ids_shape)
        embedded_shape = tuple(token_ids_shape) + (self.hidden_dim,)
        self.position_embedding.build(embedded_shape)
        self.layer_norm.build(embedded_shape)

    def call(self, token_ids, segment_ids=None, training=None):
        embedded = self._computed(self.token_embedding(token_ids))  # [batch, seq, hidden]
        if self.segment_embedding is not None:
            if segment_ids is None:
                raise ValueError(
                    f"{self.name} has {self.num_segments} segments (num_segments) but got no "
                    "segment_ids: give them, or build it with num_segments=0."
                )
            embedded = embedded + self._computed(self.segment_embedding(segment_ids))
        embedded = embedded + self._computed(self.position_embedding(embedded))
        embedded = self.layer_norm(embedded)
        return self.dropout_layer(embedded, training=training)

    def _computed(self, embedded):
        """`embedded` in the compute dtype: a quantized embedding on TensorFlow gives float32."""
        return ops.cast(embedded, self.compute_dtype)

    def compute_output_shape(self, token_ids_shape, segment_ids_shape=None):
        return tuple(token_ids_shape) + (self.hidden_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "hidden_dim": self.hidden_dim,
                "max_sequence_length": self.max_sequence_length,
                "num_segments": self.num_segments,
                "dropout": self.dropout,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config
