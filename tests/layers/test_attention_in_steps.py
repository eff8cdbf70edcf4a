import jax
import numpy as np
import pytest

from bert_keras.layers.attention_in_steps import attention_in_steps

# The function is JAX's whatever Keras' backend: one suite runs it.
pytestmark = pytest.mark.one_backend("jax")

HEAD_BYTES = 16 * 16 * 4  # one head's float32 scores at 16 queries and keys


def _inputs(batch, queries, keys, heads, seed=0):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(batch, queries, heads, 8)).astype("float32")
    key, value = (rng.normal(size=(batch, keys, heads, 8)).astype("float32") for _ in range(2))
    return query, key, value


def _padding_mask(batch, keys):
    lengths = np.arange(batch) % keys + 1  # one key and up
    return (np.arange(keys) < lengths[:, None])[:, None, None, :]  # [batch, 1, 1, keys]


@pytest.mark.parametrize(
    "batch, heads, step_scores_bytes",
    [
        (5, 3, 2 * 3 * HEAD_BYTES),  # two whole examples a step, one left over
        (2, 5, 2 * HEAD_BYTES),  # two heads of one example a step, one left over
        (3, 4, 1),  # one head a step
    ],
)
def test_equals_jax_attention_in_whole_examples_or_heads(batch, heads, step_scores_bytes):
    query, key, value = _inputs(batch, 16, 16, heads)
    mask = _padding_mask(batch, 16)
    context = attention_in_steps(query, key, value, mask, step_scores_bytes)
    expected = jax.nn.dot_product_attention(query, key, value, mask=mask)
    np.testing.assert_allclose(context, expected, atol=1e-6)


@pytest.mark.parametrize("mask_kind", ["none", "per_query", "rows_fully_masked"])
def test_takes_every_mask_jax_takes(mask_kind):
    query, key, value = _inputs(3, 4, 16, 2)
    rng = np.random.default_rng(1)
    mask = {
        "none": None,
        "per_query": rng.random((3, 1, 4, 16)) < 0.7,
        "rows_fully_masked": np.zeros((3, 1, 4, 16), bool),
    }[mask_kind]
    context = attention_in_steps(query, key, value, mask, step_scores_bytes=1)
    expected = jax.nn.dot_product_attention(query, key, value, mask=mask)
    np.testing.assert_allclose(context, expected, atol=1e-6)


def test_gradients_equal_jax_attentions():
    query, key, value = _inputs(3, 16, 16, 2)
    mask = _padding_mask(3, 16)
    weights = np.random.default_rng(2).normal(size=query.shape).astype("float32")

    def gradients(attention):
        def loss(query, key, value):
            return (attention(query, key, value) * weights).sum()

        return jax.grad(loss, argnums=(0, 1, 2))(query, key, value)

    stepped = gradients(lambda *qkv: attention_in_steps(*qkv, mask, step_scores_bytes=1))
    fused = gradients(lambda *qkv: jax.nn.dot_product_attention(*qkv, mask=mask))
    for actual, expected in zip(stepped, fused):
        np.testing.assert_allclose(actual, expected, atol=1e-5)
