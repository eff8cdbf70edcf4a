"""Plain numpy BERT math, written from the paper and the original modeling.py.

The layers under test are checked against these functions.
"""

import math

import numpy as np


def gelu_exact(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def layer_norm(x, gamma, beta, epsilon):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + epsilon) * gamma + beta


def softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def self_attention(x, qkv_kernel, qkv_bias, out_kernel, out_bias, num_heads, mask=None):
    """x [b, s, h]; mask [b, s, s] of 0/1 or None; the original adds -10000."""
    batch, seq, hidden = x.shape
    head_dim = hidden // num_heads
    qkv = x @ qkv_kernel + qkv_bias
    q, k, v = np.split(qkv, 3, axis=-1)

    def heads(t):  # [b, n, s, d]
        return t.reshape(batch, seq, num_heads, head_dim).transpose(0, 2, 1, 3)

    scores = heads(q) @ heads(k).transpose(0, 1, 3, 2) / math.sqrt(head_dim)
    if mask is not None:
        scores = scores + (1.0 - mask[:, None, :, :]) * -10000.0
    context = softmax(scores) @ heads(v)  # [b, n, s, d]
    context = context.transpose(0, 2, 1, 3).reshape(batch, seq, hidden)
    return context @ out_kernel + out_bias


def padding_to_attention_mask(padding_mask):
    """[b, s] → [b, s, s]: every query sees the real keys."""
    padding_mask = np.asarray(padding_mask, "float64")
    return np.broadcast_to(padding_mask[:, None, :], padding_mask.shape + padding_mask.shape[-1:])
