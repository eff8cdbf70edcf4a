"""Multi-head self-attention with a fused query/key/value projection."""

import os
import random
import re

import keras
from keras import ops

from bert_keras.layers.attention_in_steps import attention_in_steps
from bert_keras.layers.attention_in_steps import attention_steps_pay
from bert_keras.layers.dense import Dense
from bert_keras.layers.dropout import Dropout
from bert_keras.layers.initializers import bert_kernel_initializer
from bert_keras.layers.initializers import clone_initializer
from bert_keras.layers.input_shapes import check_floating
from bert_keras.layers.input_shapes import check_mask_shape
from bert_keras.layers.input_shapes import check_rank
from bert_keras.layers.input_shapes import check_size
from bert_keras.layers.sequence_positions import gather_positions

MASK_LAYOUT = "[batch, 1, queries, sequence]"


@keras.saving.register_keras_serializable(package="bert_keras")
class MultiHeadSelfAttention(keras.layers.Layer):
    """Scaled dot-product self-attention over `num_heads` heads.

    Query, key and value come from one `[hidden, 3 * hidden]` projection (one
    matmul instead of three; the kernel is the original's query, key and value
    kernels concatenated on the output axis). Attention runs through
    `keras.ops.dot_product_attention` (the backend's fused kernel) except in
    two cases. In inference with JAX on a CPU, long sequences attend a few
    heads at a time (`attention_in_steps`), several times faster. And when
    attention dropout is active in training, which that op cannot do, the
    fused kernels on a GPU apply the dropout themselves (torch's, and cuDNN's
    on JAX in 16-bit precision); elsewhere the scores are computed
    explicitly, softmax in float32, and the layer's `Dropout` draws the mask
    (on torch's CPU the fused kernel is the same unfused maths, with a
    costlier mask). Float16 under JAX on a CPU, which XLA's fused attention
    refuses, takes the explicit path too.

    cuDNN's dropout on JAX needs XLA to run cuDNN outside its CUDA graphs
    (`XLA_FLAGS=--xla_gpu_enable_command_buffer=-CUDNN`): jaxlib 0.11.2
    aborts when it records that kernel into one, so without the flag
    attention dropout takes the explicit path. Its masks come from a seed
    drawn when the layer first takes that path (from Python's `random`, which
    `keras.utils.set_random_seed` seeds) and a counter that each run of the
    compiled step advances, so they differ between steps but restart when a
    new process compiles the step.

    Args:
        num_heads: number of attention heads; must divide the hidden size.
        dropout: dropout rate on the attention probabilities (training only).
        kernel_initializer: initializer of both projections' kernels.
        bias_initializer: initializer of both projections' biases.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: float tensor `[batch, seq, hidden]`.
        attention_mask: optional bool or int tensor `[batch, 1, queries,
            seq]`, each axis possibly 1 (broadcast); true (non-zero) where a
            query may attend to a key.
        query_positions: optional int tensor `[batch, queries]`: attend from
            these positions only (keys and values still span every position)
            and return `[batch, queries, hidden]`, the full output's rows at
            those positions, without projecting the other queries.
        training: whether attention dropout is active.

    Example:
    >>> import numpy as np
    >>> layer = MultiHeadSelfAttention(num_heads=2)
    >>> tuple(layer(np.ones((1, 3, 8), "float32")).shape)
    (1, 3, 8)
    """

    def __init__(
        self,
        num_heads,
        dropout=0.0,
        kernel_initializer=None,
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_size(self.name, "num_heads", num_heads)
        self.num_heads = num_heads
        self.dropout = dropout
        self.kernel_initializer = keras.initializers.get(
            clone_initializer(kernel_initializer or bert_kernel_initializer())
        )
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, inputs_shape):
        check_rank(self.name, "inputs", inputs_shape)
        hidden_dim = inputs_shape[-1]
        if hidden_dim % self.num_heads:
            raise ValueError(
                f"The hidden size ({hidden_dim}) is not a multiple of the number "
                f"of attention heads ({self.num_heads})."
            )
        self.head_dim = hidden_dim // self.num_heads
        self.query_key_value = self._dense(3 * hidden_dim, "query_key_value")
        self.query_key_value.build(inputs_shape)
        self.attention_output = self._dense(hidden_dim, "attention_output")
        self.attention_output.build(inputs_shape)
        self.dropout_layer = Dropout(
            self.dropout, dtype=self.dtype_policy, name="attention_dropout"
        )
        self.cudnn_dropout_seed = None  # drawn on first use: other paths draw nothing

    def _dense(self, units, name):
        return Dense(
            units,
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
            name=name,
        )

    def call(self, inputs, attention_mask=None, query_positions=None, training=None):
        check_floating(self.name, "inputs", inputs)
        queries = None if query_positions is None else query_positions.shape[-1]
        check_mask_shape(
            self.name, "attention_mask", attention_mask, inputs.shape, MASK_LAYOUT, queries
        )
        if query_positions is None:
            query_key_value = self.query_key_value(inputs)  # [batch, seq, 3 * hidden]
            query, key, value = ops.split(query_key_value, 3, axis=-1)
        else:
            query, key, value = self._project_at(inputs, query_positions)
        # Each [batch, queries or seq, heads, head_dim].
        query, key, value = (self._split_heads(part) for part in (query, key, value))
        fused = None  # the backend's choice
        if attention_mask is not None:
            attention_mask = ops.cast(attention_mask, "bool")
            if keras.backend.backend() == "jax":
                attention_mask, fused = _cudnn_attention_mask(attention_mask, query, key)
        if not training and attention_steps_pay(query, key):
            context = attention_in_steps(query, key, value, attention_mask)
        elif not (training and self.dropout > 0) and not _fused_attention_refused(query):
            context = ops.dot_product_attention(
                query, key, value, mask=attention_mask, flash_attention=fused
            )
        elif keras.backend.backend() == "torch" and query.device.type != "cpu":
            context = _torch_fused_attention_with_dropout(
                query, key, value, attention_mask, self.dropout
            )
        elif fused is not False and _cudnn_attention_drops(query):
            if self.cudnn_dropout_seed is None:
                self.cudnn_dropout_seed = random.randint(1, 2**31 - 1)
            context = _cudnn_attention_with_dropout(
                query, key, value, attention_mask, self.dropout, self.cudnn_dropout_seed
            )
        else:
            context = self._attention_with_dropout(query, key, value, attention_mask, training)
        context = ops.reshape(
            context, tuple(ops.shape(context)[:2]) + (self.num_heads * self.head_dim,)
        )  # [batch, queries, hidden]
        return self.attention_output(context)

    def _project_at(self, inputs, query_positions):
        """Queries at `query_positions` only; keys and values everywhere."""
        if self.query_key_value.quantization_mode is not None:
            # A quantized kernel cannot be sliced as floats: project every
            # position through the layer, then keep the queries asked for.
            query, key, value = ops.split(self.query_key_value(inputs), 3, axis=-1)
            return gather_positions(query, query_positions), key, value
        hidden_dim = self.num_heads * self.head_dim
        kernel, bias = self.query_key_value.kernel, self.query_key_value.bias
        queries = gather_positions(inputs, query_positions)  # [batch, queries, hidden]
        query = ops.matmul(queries, kernel[:, :hidden_dim]) + bias[:hidden_dim]
        key_value = ops.matmul(inputs, kernel[:, hidden_dim:]) + bias[hidden_dim:]
        return (query, *ops.split(key_value, 2, axis=-1))

    def _split_heads(self, projection):
        # [batch, length, hidden] -> [batch, length, heads, head_dim]
        return ops.reshape(
            projection, tuple(ops.shape(projection)[:2]) + (self.num_heads, self.head_dim)
        )

    def _attention_with_dropout(self, query, key, value, attention_mask, training):
        scale = 1.0 / float(self.head_dim) ** 0.5
        scores = ops.einsum("bqnh,bknh->bnqk", query, key)  # [batch, heads, q, k]
        scores = ops.cast(scores, "float32") * scale
        if attention_mask is not None:
            scores = ops.where(attention_mask, scores, -1e9)
        probabilities = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)
        probabilities = self.dropout_layer(probabilities, training=training)
        return ops.einsum("bnqk,bknh->bqnh", probabilities, value)

    def compute_output_shape(self, inputs_shape, query_positions_shape=None):
        if query_positions_shape is None:
            return inputs_shape
        return tuple(query_positions_shape) + (inputs_shape[-1],)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "dropout": self.dropout,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config


def _cudnn_attention_mask(attention_mask, query, key):
    """The mask in the shape JAX's cuDNN attention kernel takes, and whether it may.

    That kernel takes a mask only of the scores' full `[batch, 1, queries,
    keys]` shape, and with a mask only even lengths (when differentiated):
    given a `[batch, 1, 1, keys]` padding mask, or the last block's odd count
    of query positions, it refuses, and Keras logs the refusal on every trace
    before it falls back to unfused XLA attention. Returns the mask broadcast
    to that shape and None (Keras' choice: cuDNN where present), or the mask
    unchanged and False (unfused) where cuDNN would refuse.
    """
    queries, keys = query.shape[1], key.shape[1]
    if not (isinstance(queries, int) and isinstance(keys, int)) or queries % 2 or keys % 2:
        return attention_mask, False
    batch = ops.shape(query)[0]
    return ops.broadcast_to(attention_mask, (batch, 1, queries, keys)), None


def _fused_attention_refused(query):
    """Whether the backend's fused attention cannot take `query`: float16 in XLA on a CPU.

    JAX's `dot_product_attention` asks for float32 accumulation, which XLA's
    CPU `dot_general` refuses for float16 inputs once compiled.
    """
    if keras.backend.backend() != "jax" or query.dtype != "float16":
        return False
    import jax

    return jax.default_backend() == "cpu"


def _cudnn_attention_drops(query):
    """Whether JAX's cuDNN attention can apply attention dropout to `query`'s heads.

    JAX's public attention takes no dropout; its cuDNN kernel, reached
    through a private module, does, in 16-bit precision on an Ampere or newer
    GPU, for head sizes that are multiples of 8 up to 128, where XLA runs
    cuDNN outside its CUDA graphs.
    """
    if keras.backend.backend() != "jax":
        return False
    if not cudnn_outside_cuda_graphs(os.environ.get("XLA_FLAGS", "")):
        return False
    import jax

    head_dim = query.shape[-1]
    if jax.default_backend() != "gpu" or str(query.dtype) not in ("bfloat16", "float16"):
        return False
    if not isinstance(head_dim, int) or head_dim % 8 or head_dim > 128:
        return False
    try:
        from jax._src.cudnn import fused_attention_stablehlo as cudnn_attention

        cudnn_attention.check_cudnn_version()
        return cudnn_attention.check_compute_capability("8.0")
    except (ImportError, AttributeError, RuntimeError):
        return False


def cudnn_outside_cuda_graphs(xla_flags):
    """Whether `xla_flags` keep XLA from recording cuDNN kernels into CUDA graphs.

    `--xla_gpu_enable_command_buffer` either lists the kinds of work XLA
    records (`FUSION,CUBLAS`; empty: none) or changes its defaults, which
    hold cuDNN (`-CUDNN`, `+CUDNN`); the last flag given counts.

    Example:
    >>> cudnn_outside_cuda_graphs("--xla_gpu_enable_command_buffer=-CUDNN")
    True
    >>> cudnn_outside_cuda_graphs("--xla_gpu_enable_command_buffer=FUSION,CUDNN")
    False
    >>> cudnn_outside_cuda_graphs("")
    False
    """
    settings = re.findall(r"--xla_gpu_enable_command_buffer=(\S*)", xla_flags)
    if not settings:
        return False
    kinds = [kind.strip().upper() for kind in settings[-1].split(",") if kind.strip()]
    if not kinds or not all(kind[0] in "+-" for kind in kinds):
        return "CUDNN" not in kinds
    removed = False
    for kind in kinds:
        if kind[1:] == "CUDNN":
            removed = kind[0] == "-"
    return removed


def _cudnn_attention_with_dropout(query, key, value, attention_mask, rate, seed):
    """Attention with dropout in JAX's cuDNN kernel; inputs `[batch, seq, heads, head_dim]`."""
    from jax._src.cudnn.fused_attention_stablehlo import dot_product_attention

    return dot_product_attention(
        query,
        key,
        value,
        mask=attention_mask,
        scale=1.0 / float(query.shape[-1]) ** 0.5,
        seed=seed,
        dropout_rate=rate,
        qkv_layout="BTNH",
    )


def _torch_fused_attention_with_dropout(query, key, value, attention_mask, rate):
    """torch's fused GPU kernels apply attention dropout themselves; Keras' op can't.

    Inputs `[batch, seq, heads, head_dim]`; the mask is bool, broadcastable
    to `[batch, heads, seq, seq]`.
    """
    import torch

    query, key, value = (tensor.transpose(1, 2) for tensor in (query, key, value))
    context = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=rate
    )  # [batch, heads, seq, head_dim]
    return context.transpose(1, 2)
