"""Sampled softmax with log-Q correction, for output vocabularies too large to score whole.

A full softmax over `V` items computes `[batch, predictions, V]` logits each
step (Transformers4Rec#427: memory grows with the catalogue). The sampled
softmax (Jean et al. 2015) scores each prediction's target against `K`
negatives shared by the batch, drawn from a proposal `Q`, and subtracts
`log(K * Q(item))` from every logit so that the estimate is unbiased in the
limit; a negative equal to a row's target (an accidental hit) is left out.
The proposal here is log-uniform (Zipfian) over ids numbered by descending
frequency, as BERT4Rec's item ids are, so popular items are drawn more.
"""

import math

import keras
from keras import ops

_EXCLUDED_LOGIT = -1e9
_WEIGHT_EPSILON = 1e-5


def log_uniform_candidates(num_items, num_samples, seed):
    """`num_samples` item ids in 1..`num_items`, drawn with replacement.

    Id `k + 1` is drawn with probability
    `(log(k + 2) - log(k + 1)) / log(num_items + 1)`.

    Args:
        num_items: the number of items.
        num_samples: ids to draw.
        seed: a `keras.random.SeedGenerator` or an int.

    Example:
    >>> ids = keras.ops.convert_to_numpy(log_uniform_candidates(1000, 5000, seed=0))
    >>> bool(ids.min() >= 1 and ids.max() <= 1000), bool((ids == 1).mean() > 0.05)
    (True, True)
    """
    uniform = keras.random.uniform((num_samples,), seed=seed)
    ranks = ops.floor(ops.exp(uniform * math.log(num_items + 1))) - 1.0
    return ops.cast(ops.clip(ranks, 0, num_items - 1), "int32") + 1


def log_uniform_log_probability(item_ids, num_items):
    """`log Q(id)` of `log_uniform_candidates`, float32, for ids in 1..`num_items`.

    Example:
    >>> import numpy as np
    >>> p = np.exp(keras.ops.convert_to_numpy(
    ...     log_uniform_log_probability(np.arange(1, 101), 100)))
    >>> round(float(p.sum()), 5)
    1.0
    """
    ranks = ops.cast(item_ids, "float32") - 1.0
    share = (ops.log(ranks + 2.0) - ops.log(ranks + 1.0)) / math.log(num_items + 1)
    return ops.log(share)


def sampled_softmax_loss(labels, hidden, embeddings, bias, negatives, num_items):
    """The cross-entropy of each target against shared negatives, log-Q corrected.

    Args:
        labels: int `[batch, n]` target ids; 0 marks a padded prediction,
            which counts nothing.
        hidden: float `[batch, n, dim]`, the vectors the output layer scores.
        embeddings: float `[vocabulary, dim]`, the output embedding matrix.
        bias: float `[vocabulary]`, the output bias.
        negatives: int `[num_samples]` ids from `log_uniform_candidates`.
        num_items: the number of items (ids 1..`num_items`).

    Returns:
        A float32 scalar: the mean over real predictions.

    Example:
    >>> import numpy as np
    >>> hidden = np.ones((1, 1, 2), "float32")
    >>> embeddings = np.array([[0, 0], [1, 1], [0, 0], [-1, -1]], "float32")
    >>> loss = sampled_softmax_loss(np.array([[1]]), hidden, embeddings, np.zeros(4, "float32"),
    ...                             np.array([2, 3]), num_items=3)
    >>> bool(0.0 < float(loss) < 0.5)
    True
    """
    labels = ops.cast(labels, "int32")
    hidden = ops.cast(hidden, "float32")
    embeddings = ops.cast(embeddings, "float32")
    num_samples = ops.shape(negatives)[0]
    log_expected = ops.log(ops.cast(num_samples, "float32"))
    real = ops.not_equal(labels, 0)
    targets = ops.where(real, labels, ops.ones_like(labels))  # any item for padded ones
    target_logits = (
        ops.sum(hidden * ops.take(embeddings, targets, axis=0), axis=-1)
        + ops.take(bias, targets)
        - log_expected
        - log_uniform_log_probability(targets, num_items)
    )  # [batch, n]
    negative_logits = (
        ops.einsum("bnd,kd->bnk", hidden, ops.take(embeddings, negatives, axis=0))
        + ops.take(bias, negatives)
        - log_expected
        - log_uniform_log_probability(negatives, num_items)
    )  # [batch, n, num_samples]
    hits = ops.equal(targets[:, :, None], ops.cast(negatives, "int32")[None, None, :])
    negative_logits = ops.where(hits, _EXCLUDED_LOGIT, negative_logits)
    logits = ops.concatenate([target_logits[:, :, None], negative_logits], axis=-1)
    per_prediction = ops.logsumexp(logits, axis=-1) - target_logits
    weights = ops.cast(real, "float32")
    return ops.sum(per_prediction * weights) / (ops.sum(weights) + _WEIGHT_EPSILON)
