"""Top-k recommendation metrics: the target's rank, then HR@k, NDCG@k and MRR.

Two protocols rank each user's held-out target item:

- full ranking: against every item of the catalogue, the user's history
  excluded (recommendations never repeat it, so a target already in the
  history is never ranked: a miss at every cut-off, however few the items);
- popularity-sampled: against `num_negatives` (100 in BERT4Rec's paper)
  distinct items drawn in proportion to their frequency, none of them in the
  user's history or the target.

Ties are ranked against the target (a model that scores every item the same
ranks every target last, not first), so no metric rewards a constant model.
"""

import numpy as np

DEFAULT_CUTOFFS = (1, 5, 10)


def target_ranks(scores, targets, excluded=None):
    """The 1-based rank of each row's target among that row's columns, as floats.

    Args:
        scores: float array `[rows, candidates]`.
        targets: int array `[rows]`, the target's column in each row.
        excluded: optional list of int arrays, per row the columns that are
            not candidates; a target among them is never ranked: its rank is
            infinite, a miss at every cut-off. A NaN score (a diverged
            model's) counts as excluded too.

    Example:
    >>> scores = np.array([[0.1, 0.9, 0.5], [0.2, 0.2, 0.2]])
    >>> target_ranks(scores, np.array([2, 0])).tolist()
    [2.0, 3.0]
    >>> target_ranks(scores, np.array([2, 0]), excluded=[np.array([1]), np.array([])]).tolist()
    [1.0, 3.0]
    >>> target_ranks(scores, np.array([1, 0]), excluded=[np.array([1]), np.array([])]).tolist()
    [inf, 3.0]
    >>> target_ranks(np.array([[np.nan, 0.2, np.nan]]), np.array([0])).tolist()
    [inf]
    """
    scores = np.array(scores, dtype="float64", copy=True)
    scores[np.isnan(scores)] = -np.inf
    if excluded is not None:
        for row, columns in enumerate(excluded):
            scores[row, np.asarray(columns, dtype="int64")] = -np.inf
    target_scores = scores[np.arange(len(scores)), targets]
    # The target's own score counts: ranks start at 1.
    ranks = (scores >= target_scores[:, None]).sum(axis=1).astype("float64")
    ranks[target_scores == -np.inf] = np.inf
    return ranks


def ranking_metrics(ranks, cutoffs=DEFAULT_CUTOFFS):
    """HR@k and NDCG@k for each cut-off (NDCG@1 equals HR@1, so it is left
    out), and MRR over the whole ranking; an infinite rank scores 0 in each.

    Example:
    >>> metrics = ranking_metrics(np.array([1, 3, 20]), cutoffs=(1, 5))
    >>> {name: round(value, 4) for name, value in metrics.items()}
    {'hr@1': 0.3333, 'hr@5': 0.6667, 'ndcg@5': 0.5, 'mrr': 0.4611}
    >>> ranking_metrics(np.array([np.inf]), cutoffs=(5,))
    {'hr@5': 0.0, 'ndcg@5': 0.0, 'mrr': 0.0}
    """
    ranks = np.asarray(ranks, dtype="float64")
    metrics = {}
    for cutoff in cutoffs:
        hits = ranks <= cutoff
        metrics[f"hr@{cutoff}"] = float(hits.mean())
        if cutoff > 1:
            metrics[f"ndcg@{cutoff}"] = float(np.where(hits, 1 / np.log2(ranks + 1), 0).mean())
    metrics["mrr"] = float((1 / ranks).mean())
    return metrics


def popularity_negatives(histories, targets, item_counts, num_negatives=100, seed=0):
    """Per user, `num_negatives` distinct items drawn by popularity.

    Args:
        histories: per user, an int array of item ids the user has seen.
        targets: int array `[users]`, the held-out items.
        item_counts: float array `[num_ids]`, how often each id occurs;
            ids that must never be drawn (padding, [MASK]) count 0.
        num_negatives: negatives per user.
        seed: seed of the draw.

    Returns:
        int array `[users, num_negatives]` of item ids.

    Raises:
        ValueError: a user has seen so much of the catalogue that fewer than
            `num_negatives` items are left to draw (the user is named).

    Example:
    >>> counts = np.array([0, 5, 4, 3, 2, 1], "float64")
    >>> negatives = popularity_negatives([np.array([1, 2])], np.array([3]), counts, 2)
    >>> sorted(negatives[0].tolist())
    [4, 5]
    """
    probabilities = np.asarray(item_counts, dtype="float64")
    probabilities = probabilities / probabilities.sum()
    drawable = set(np.flatnonzero(probabilities).tolist())
    rng = np.random.default_rng(seed)
    negatives = np.zeros((len(targets), num_negatives), dtype="int64")
    for row, (history, target) in enumerate(zip(histories, targets)):
        seen = set(np.asarray(history).tolist()) | {int(target)}
        if len(drawable - seen) < num_negatives:
            raise ValueError(
                f"User {row} has seen all but {len(drawable - seen)} of the {len(drawable)} "
                f"items; {num_negatives} negatives cannot be sampled."
            )
        drawn = []
        while len(drawn) < num_negatives:
            for item in rng.choice(len(probabilities), num_negatives + 1, p=probabilities):
                if item not in seen:
                    seen.add(item)
                    drawn.append(item)
        negatives[row] = drawn[:num_negatives]
    return negatives


def next_item_ranks(scores, histories, targets, negatives):
    """The target's rank in both protocols, for a batch of users.

    Args:
        scores: float array `[users, num_ids]`, a score per item id, where
            id 0 is padding (never a candidate) and ids 1.. are the items.
        histories: per user, the item ids seen before the target.
        targets: int array `[users]`, the held-out item ids.
        negatives: int array `[users, num_negatives]` from
            `popularity_negatives`.

    Returns:
        `(full_ranks, sampled_ranks)`, float arrays `[users]`: the rank among
        every item not in the history (infinite for a target in it), and
        among the target + negatives.

    Example:
    >>> scores = np.array([[0.0, 0.9, 0.8, 0.7, 0.1]])
    >>> next_item_ranks(scores, [np.array([1])], np.array([3]), np.array([[4, 2]]))
    (array([2.]), array([2.]))
    """
    targets = np.asarray(targets, dtype="int64")
    item_scores = np.asarray(scores)[:, 1:]
    full = target_ranks(
        item_scores, targets - 1, [np.asarray(h, dtype="int64") - 1 for h in histories]
    )
    candidates = np.concatenate([targets[:, None], negatives], axis=1)
    sampled = target_ranks(np.take_along_axis(np.asarray(scores), candidates, axis=1), 0 * targets)
    return full, sampled
