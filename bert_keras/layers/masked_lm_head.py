"""BERT's masked language model head, tied to the word embeddings."""

import keras
from keras import ops

from bert_keras.layers.activations import get_activation
from bert_keras.layers.dense import Dense
from bert_keras.layers.initializers import bert_kernel_initializer
from bert_keras.layers.initializers import clone_initializer
from bert_keras.layers.input_shapes import check_rank
from bert_keras.layers.input_shapes import check_size
from bert_keras.layers.sequence_positions import gather_positions


@keras.saving.register_keras_serializable(package="bert_keras")
class MaskedLMHead(keras.layers.Layer):
    """Predicts the tokens at masked positions.

    Gathers the masked positions first (so the vocabulary projection runs on
    `num_predictions` vectors, not on every position), then dense +
    activation + layer norm (`cls/predictions/transform/*` of the original),
    then logits through the transposed word-embedding matrix plus an output
    bias (`cls/predictions/output_bias`). Logits are float32 under any dtype
    policy so the softmax over the vocabulary stays accurate.

    Args:
        vocabulary_size: size of the output vocabulary. May be omitted when
            `token_embedding` is given.
        token_embedding: optional `keras.layers.Embedding` whose matrix is
            used (tied) as the output projection. Without it the layer owns an
            untied `[hidden, vocabulary_size]` kernel. Not part of the config:
            the model that owns both layers ties them again on load. Once
            quantized (`quantize("int8")`), its table is read dequantized.
        activation: activation name of the transform; the original BERT uses
            "gelu_approximate".
        layer_norm_epsilon: layer norm epsilon; BERT uses 1e-12.
        kernel_initializer: initializer of the transform's kernel.
        bias_initializer: initializer of the transform's and output biases.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: float tensor `[batch, seq, hidden]`, the encoder output.
        masked_positions: int tensor `[batch, num_predictions]`, positions
            into `seq` to predict; None when `inputs` holds only the vectors
            to predict from (`seq` = `num_predictions`).

    Returns:
        float32 logits `[batch, num_predictions, vocabulary_size]`.

    Example:
    >>> import numpy as np
    >>> embedding = keras.layers.Embedding(50, 8)
    >>> embedding.build((None,))
    >>> head = MaskedLMHead(token_embedding=embedding)
    >>> tuple(head(np.ones((2, 6, 8), "float32"), np.array([[1, 4], [0, 5]])).shape)
    (2, 2, 50)
    """

    def __init__(
        self,
        vocabulary_size=None,
        token_embedding=None,
        activation="gelu_approximate",
        layer_norm_epsilon=1e-12,
        kernel_initializer=None,
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if token_embedding is not None:
            if vocabulary_size not in (None, token_embedding.input_dim):
                raise ValueError(
                    f"vocabulary_size is {vocabulary_size} but the tied "
                    f"token_embedding has {token_embedding.input_dim} rows."
                )
            vocabulary_size = token_embedding.input_dim
        if vocabulary_size is None:
            raise ValueError("Pass vocabulary_size or token_embedding.")
        check_size(self.name, "vocabulary_size", vocabulary_size)
        self.vocabulary_size = vocabulary_size
        # Not tracked: the embedding's owner saves and trains its variable.
        object.__setattr__(self, "token_embedding", token_embedding)
        self.activation = activation
        self.activation_fn = get_activation(activation)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(
            clone_initializer(kernel_initializer or bert_kernel_initializer())
        )
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, inputs_shape, masked_positions_shape=None):
        check_rank(self.name, "inputs", inputs_shape)
        check_rank(self.name, "masked_positions", masked_positions_shape, "[batch, predictions]")
        hidden_dim = inputs_shape[-1]
        gathered_shape = (inputs_shape[0], None, hidden_dim)
        self.transform_dense = Dense(
            hidden_dim,
            activation=self.activation_fn,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name="transform_dense",
        )
        self.transform_dense.build(gathered_shape)
        self.transform_layer_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon,
            dtype=self.dtype_policy,
            name="transform_layer_norm",
        )
        self.transform_layer_norm.build(gathered_shape)
        if self.token_embedding is None:
            self.output_kernel = self.add_weight(
                name="output_kernel",
                shape=(hidden_dim, self.vocabulary_size),
                initializer=clone_initializer(self.kernel_initializer),
            )
        self.output_bias = self.add_weight(
            name="output_bias",
            shape=(self.vocabulary_size,),
            initializer=clone_initializer(self.bias_initializer),
            autocast=False,  # added to float32 logits at full precision
        )

    def call(self, inputs, masked_positions=None):
        transformed = self.transform(inputs, masked_positions)
        logits = ops.matmul(
            transformed, ops.cast(self._output_kernel(), self.compute_dtype)
        )  # [batch, num_predictions, vocabulary_size]
        return ops.cast(logits, "float32") + self.output_bias

    def transform(self, inputs, masked_positions=None):
        """The vectors the output layer scores: gathered, dense, activation, layer norm.

        `[batch, num_predictions, hidden]`, in the compute dtype; the logits
        are their products with the output kernel plus the output bias (a
        sampled softmax scores only some of the vocabulary from them).

        Example:
        >>> import numpy as np
        >>> head = MaskedLMHead(vocabulary_size=50)
        >>> tuple(head(np.ones((2, 6, 8), "float32"), np.array([[1], [0]])).shape)
        (2, 1, 50)
        >>> tuple(head.transform(np.ones((2, 6, 8), "float32"), np.array([[1], [0]])).shape)
        (2, 1, 8)
        """
        gathered = inputs
        if masked_positions is not None:
            # [batch, num_predictions, hidden]
            gathered = gather_positions(inputs, masked_positions)
        return self.transform_layer_norm(self.transform_dense(gathered))

    @property
    def output_embeddings(self):
        """The output kernel as `[vocabulary_size, hidden]` (the tied embedding matrix)."""
        if self.token_embedding is None:
            return ops.transpose(self.output_kernel)
        return self._tied_embeddings()

    def _output_kernel(self):
        if self.token_embedding is None:
            return self.output_kernel
        return ops.transpose(self._tied_embeddings())

    def _tied_embeddings(self):
        """The word-embedding matrix `[vocabulary_size, hidden]`, dequantized where quantized."""
        embedding = self.token_embedding
        if embedding.quantization_mode is None:
            return embedding.embeddings
        # A quantized layer's `embeddings` are integers without their scales:
        # its own lookup of every row gives the table that its outputs use.
        return embedding(ops.arange(embedding.input_dim, dtype="int32"))

    def compute_output_shape(self, inputs_shape, masked_positions_shape=None):
        if masked_positions_shape is None:
            return tuple(inputs_shape[:-1]) + (self.vocabulary_size,)
        return tuple(masked_positions_shape) + (self.vocabulary_size,)

    def compute_output_spec(self, inputs, masked_positions=None):
        positions_shape = None if masked_positions is None else masked_positions.shape
        return keras.KerasTensor(
            self.compute_output_shape(inputs.shape, positions_shape), dtype="float32"
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "activation": self.activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
