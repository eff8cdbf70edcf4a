"""Attention a few heads at a time, so that XLA on a CPU keeps each step's scores in cache.

XLA's CPU attention (JAX's `dot_product_attention`) writes the scores of the
whole batch, `[batch, heads, queries, keys]` floats, then reads them back for
the mask, the softmax and the weighted sum: at 384 tokens and batch 32 that
is 226 MB per pass, from memory. Computed in steps of a few of one example's
heads, the same scores stay in the caches, and attention runs faster (torch's
CPU attention works in blocks for the same reason). Training keeps the fused
op: through `lax.map` the backward pass keeps every step's probabilities
anyway and gains nothing.
"""

import keras
import numpy as np

STEP_SCORES_BYTES = 4 * 1024 * 1024  # a step's scores: a few MiB stay in a CPU's caches
# Steps compile longer; below this the fused op is about as fast.
STEPS_FROM_SCORES_BYTES = 16 * 1024 * 1024


def attention_steps_pay(query, key):
    """Whether `attention_in_steps` should compute this attention: JAX on a CPU, large scores.

    The batch's float32 scores must pass `STEPS_FROM_SCORES_BYTES`.

    Args:
        query: `[batch, queries, heads, head_dim]`.
        key: `[batch, keys, heads, head_dim]`.

    Example:
    >>> import numpy as np
    >>> small = np.zeros((2, 8, 2, 4), "float32")
    >>> attention_steps_pay(small, small)
    False
    """
    if keras.backend.backend() != "jax":
        return False
    import jax

    batch, queries, heads = query.shape[:3]
    keys = key.shape[1]
    if jax.default_backend() != "cpu" or None in (batch, queries, heads, keys):
        return False
    return batch * heads * queries * keys * 4 > STEPS_FROM_SCORES_BYTES


def attention_in_steps(query, key, value, mask=None, step_scores_bytes=None):
    """Scaled dot-product attention, computed a few examples or heads at a time with `lax.map`.

    The maths is `jax.nn.dot_product_attention`'s (float32 scores and
    softmax, masked scores set as it sets them), in steps whose scores
    take at most `step_scores_bytes`: several whole examples, or a few heads
    of one.

    Args:
        query: `[batch, queries, heads, head_dim]`.
        key: `[batch, keys, heads, head_dim]`.
        value: `[batch, keys, heads, head_dim]`.
        mask: optional bool tensor broadcastable to `[batch, 1, queries, keys]`;
            true where a query may attend to a key.
        step_scores_bytes: the float32 scores one step may hold; by
            default `STEP_SCORES_BYTES`.

    Returns:
        The context, `[batch, queries, heads, head_dim]`.

    Example:
    >>> import jax
    >>> import numpy as np
    >>> inputs = np.random.default_rng(0).normal(size=(3, 16, 4, 8)).astype("float32")
    >>> mask = np.arange(16) < np.array([[16], [9], [3]])  # [batch, keys]
    >>> mask = mask[:, None, None, :]
    >>> context = attention_in_steps(inputs, inputs, inputs, mask, step_scores_bytes=1024)
    >>> fused = jax.nn.dot_product_attention(inputs, inputs, inputs, mask=mask)
    >>> bool(np.allclose(context, fused, atol=1e-6))
    True
    """
    import jax
    import jax.numpy as jnp

    step_scores_bytes = step_scores_bytes or STEP_SCORES_BYTES
    batch, queries, heads, head_dim = query.shape
    keys = key.shape[1]
    mask = jnp.broadcast_to(True if mask is None else mask, (batch, 1, queries, keys))
    head_bytes = queries * keys * 4
    examples_per_step = max(1, step_scores_bytes // (heads * head_bytes))
    heads_per_step = max(1, min(heads, step_scores_bytes // head_bytes))
    scale = 1.0 / float(np.sqrt(head_dim))

    def one_example(inputs):
        query, key, value, mask = inputs  # [seq, heads, head_dim] ×3, [1, queries, keys]
        query, key, value = (jnp.moveaxis(part, 1, 0) for part in (query, key, value))
        if heads_per_step >= heads:
            context = _heads_attention(query, key, value, mask, scale)
        else:
            context = jax.lax.map(
                lambda head: _heads_attention(*(part[None] for part in head), mask, scale)[0],
                (query, key, value),
                batch_size=heads_per_step,
            )
        return jnp.moveaxis(context, 0, 1)  # [queries, heads, head_dim]

    return jax.lax.map(one_example, (query, key, value, mask), batch_size=examples_per_step)


def _heads_attention(query, key, value, mask, scale):
    """Attention of heads `[heads, seq, head_dim]` under `mask` `[1, queries, keys]`."""
    import jax
    import jax.numpy as jnp

    scores = jnp.einsum("nqh,nkh->nqk", query, key, preferred_element_type=jnp.float32)
    scores = jnp.where(mask, scores * scale, -0.7 * jnp.finfo(jnp.float32).max)
    probabilities = jax.nn.softmax(scores, axis=-1).astype(value.dtype)
    return jnp.einsum("nqk,nkh->nqh", probabilities, value)
