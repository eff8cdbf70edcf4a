"""Dropout with cheaper random draws on JAX and on torch's CPU."""

import functools
import math

import keras
import numpy as np


@keras.saving.register_keras_serializable(package="bert_keras")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout` with cheaper masks on JAX and on torch's CPU.

    Keras' JAX dropout materialises one 32-bit threefry word per element, and
    on a CPU JAX runs threefry as a loop over the whole array that reads and
    writes it several times, a large part of a small BERT's training step.
    Here on a CPU each element's draw is Threefry-2x32-20 of (seed, element
    index), written as element-wise ops that XLA fuses with the select that
    applies it: no random array is ever stored, so the mask costs a fraction
    of Keras'. The draw is compared with `round(rate * 2**32)` and kept values
    are divided by the matching keep probability, so the expected output is
    the input. On a GPU, where those 20 rounds per element bound the fused
    kernels, one Threefry evaluation gives four 16-bit draws, stored (two
    bytes an element) and compared with `round(rate * 2**16)`.

    On torch's CPU, where drawing the mask is a large part of a training
    step, each element's draw is 16 bits: one 64-bit draw of the generator
    masks four elements, compared with `round(rate * 2**16)` (so the rate
    dropped is a multiple of 2**-16), kept values divided by the matching
    keep probability; the mask kept for the gradient is one byte an element
    where Keras keeps a float mask. On torch's GPU, under `torch.compile`, TensorFlow, a
    `noise_shape` and `rate=1`, Keras' dropout runs unchanged.

    Args:
        rate: fraction of the inputs to drop, in [0, 1].
        noise_shape: optional shape of the mask, broadcast over the inputs.
        seed: optional integer seed of the layer's random stream.
        **kwargs: standard `keras.layers.Layer` arguments.

    Call arguments:
        inputs: float tensor of any shape.
        training: whether to drop; at inference the inputs pass unchanged.

    Example:
    >>> import numpy as np
    >>> layer = Dropout(0.5, seed=1)
    >>> outputs = np.asarray(layer(np.ones((4, 1000), "float32"), training=True))
    >>> sorted(set(outputs.ravel().round(3).tolist()))
    [0.0, 2.0]
    >>> bool(abs((outputs == 0).mean() - 0.5) < 0.05)
    True
    """

    def call(self, inputs, training=False):
        if not training or not 0 < self.rate < 1 or self.noise_shape is not None:
            return super().call(inputs, training=training)
        if keras.backend.backend() == "jax":
            return _jax_dropout(inputs, self.rate, self.seed_generator.next())
        if keras.backend.backend() == "torch" and _eager_on_torch_cpu(inputs):
            return _torch_16_bit_dropout(inputs, self.rate, self.seed_generator.next())
        return super().call(inputs, training=training)


def _eager_on_torch_cpu(inputs):
    import torch

    return inputs.device.type == "cpu" and not torch.compiler.is_compiling()


def _jax_dropout(inputs, rate, seed):
    import jax

    bits = 16 if jax.default_backend() == "gpu" else 32
    keep = _jitted_keep_mask()(seed, tuple(inputs.shape), rate, bits)
    return _keep_where(keep, _drop_threshold(rate, bits)[1], inputs)


@functools.cache
def _jitted_keep_mask():
    """`_jax_keep_mask` under `jax.jit`: in a traced training step its ops
    are traced once per shape and rate, not once per layer; XLA inlines it."""
    import jax

    return jax.jit(_jax_keep_mask, static_argnames=("shape", "rate", "bits"))


def _jax_keep_mask(seed, shape, rate, bits):
    """Which elements of an array of `shape` dropout keeps: their `bits`-bit draw reaches the rate."""
    if bits == 16:
        return _jax_16_bit_keep_mask(seed, shape, rate)
    return _jax_32_bit_keep_mask(seed, shape, rate)


def _jax_32_bit_keep_mask(seed, shape, rate):
    """The elements whose 32-bit draw reaches `rate * 2**32`."""
    import jax
    import jax.numpy as jnp

    size = math.prod(shape)
    if size >= 2**32:
        raise ValueError(f"Dropout counts elements in 32 bits but inputs has shape {shape}")
    counters = jax.lax.iota(jnp.uint32, size).reshape(shape)
    seed = jnp.asarray(seed, jnp.uint32)
    draws, _ = threefry_2x32(seed[0], seed[1], counters, jnp.zeros_like(counters))
    return draws >= np.uint32(_drop_threshold(rate, bits=32)[0])


def _jax_16_bit_keep_mask(seed, shape, rate):
    """The elements whose 16-bit draw reaches `rate * 2**16`."""
    import jax
    import jax.numpy as jnp

    size = math.prod(shape)
    counters = jax.lax.iota(jnp.uint32, -(-size // 4))  # one counter per four draws
    if counters.shape[0] >= 2**32:
        raise ValueError(f"Dropout counts elements in 34 bits but inputs has shape {shape}")
    seed = jnp.asarray(seed, jnp.uint32)
    words = jnp.stack(threefry_2x32(seed[0], seed[1], counters, jnp.zeros_like(counters)), -1)
    # Stored: fused into the select, each draw would rerun its counter's Threefry.
    draws = jax.lax.optimization_barrier(jax.lax.bitcast_convert_type(words, jnp.uint16))
    draws = draws.reshape(-1)[:size].reshape(shape)
    return draws >= np.uint16(_drop_threshold(rate, bits=16)[0])


def _drop_threshold(rate, bits):
    """The `bits`-bit draw from which an element is kept, and the keep probability it gives."""
    drop_threshold = min(round(rate * 2**bits), 2**bits - 1)
    return drop_threshold, 1.0 - drop_threshold / 2**bits


def _keep_where(keep, keep_probability, inputs):
    """JAX: `inputs / keep_probability` where `keep`, else 0."""
    import jax
    import jax.numpy as jnp

    return jax.lax.select(
        keep, inputs / jnp.asarray(keep_probability, inputs.dtype), jnp.zeros_like(inputs)
    )


def _torch_16_bit_dropout(inputs, rate, seed):
    """Keeps the elements whose 16-bit draw reaches `rate * 2**16`."""
    import torch

    # torch's CPU generator keeps 32 bits of a seed: mix the two words into them.
    generator = torch.Generator().manual_seed((int(seed[0]) * 0x9E3779B1 + int(seed[1])) % 2**32)
    words = torch.empty((inputs.numel() + 3) // 4, dtype=torch.int64)
    words.random_(-(2**63), None, generator=generator)  # all 64 bits uniform
    draws = words.view(torch.int16)[: inputs.numel()]
    drop_threshold, keep_probability = _drop_threshold(rate, bits=16)
    keep = draws.view(inputs.shape) >= drop_threshold - 2**15  # int16 draws start at -2**15
    return torch.where(keep, inputs / keep_probability, 0.0)


_THREEFRY_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def threefry_2x32(key_0, key_1, count_0, count_1):
    """Threefry-2x32 with 20 rounds (Salmon et al. 2011), as element-wise ops.

    The same function as `jax.extend.random.threefry_2x32`, whose CPU lowering
    is a loop that XLA cannot fuse with the ops that consume its output.

    Args:
        key_0, key_1: uint32 scalars, the key.
        count_0, count_1: uint32 arrays of one shape, the counter.

    Returns:
        The two uint32 output words, each of the counters' shape.

    Example:
    >>> import numpy as np
    >>> words = threefry_2x32(np.uint32(0), np.uint32(0), np.zeros(2, "uint32"),
    ...                       np.zeros(2, "uint32"))
    >>> [hex(int(word[0])) for word in words]  # the published test vector
    ['0x6b200159', '0x99ba4efe']
    """
    keys = (key_0, key_1, key_0 ^ key_1 ^ np.uint32(0x1BD11BDA))
    words = [count_0 + keys[0], count_1 + keys[1]]
    for block in range(5):
        for rotation in _THREEFRY_ROTATIONS[block % 2]:
            words[0] = words[0] + words[1]
            words[1] = _rotate_left(words[1], rotation) ^ words[0]
        words[0] = words[0] + keys[(block + 1) % 3]
        words[1] = words[1] + keys[(block + 2) % 3] + np.uint32(block + 1)
    return tuple(words)


def _rotate_left(word, bits):
    return (word << np.uint32(bits)) | (word >> np.uint32(32 - bits))
