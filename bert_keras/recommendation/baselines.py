"""Non-neural next-item recommenders to compare BERT4Rec with.

Both return scores in the layout of `Bert4Rec.next_item_scores`: one row per
history, one column per id, column 0 ([PAD]) never a candidate.
"""

import numpy as np


def most_popular_scores(train_sequences, num_items, histories):
    """Every history gets the items' training frequencies.

    Example:
    >>> most_popular_scores([np.array([1, 2, 2])], 3, [np.array([1])]).tolist()
    [[-inf, 1.0, 2.0, 0.0]]
    """
    counts = np.bincount(np.concatenate(train_sequences), minlength=num_items + 1)
    scores = np.tile(counts.astype("float64"), (len(histories), 1))
    scores[:, 0] = -np.inf
    return scores


def item_knn_scores(train_sequences, num_items, histories):
    """Item-to-item collaborative filtering: items bought with the history's items.

    The similarity of two items is the cosine of their user sets in
    training (how often they share a user, normalised by popularity); a
    history's score of an item sums its similarity to the history's items.
    Order-free, as "customers who bought this also bought". A dense
    `[num_items + 1, num_items + 1]` table: for catalogues up to about 10^4.

    Example:
    >>> train = [np.array([1, 2]), np.array([1, 2]), np.array([3, 4])]
    >>> int(np.argmax(item_knn_scores(train, 4, [np.array([1])])[0][2:])) + 2
    2
    """
    users_items = np.zeros((len(train_sequences), num_items + 1), dtype="float64")
    for row, sequence in enumerate(train_sequences):
        users_items[row, sequence] = 1.0
    shared = users_items.T @ users_items  # [items, items]: users in common
    norms = np.sqrt(np.maximum(np.diag(shared), 1.0))
    similarity = shared / norms[:, None] / norms[None, :]
    np.fill_diagonal(similarity, 0.0)
    scores = np.stack([similarity[np.asarray(history)].sum(axis=0) for history in histories])
    scores[:, 0] = -np.inf
    return scores


def item_transition_scores(train_sequences, num_items, histories, window=3, recent=3):
    """Items that followed the history's last items in training, by count.

    A sequential baseline (an n-gram over items): `following[i, j]` counts
    how often item `j` came within `window` items after item `i` in a
    training sequence; a history's score of `j` sums `following[i, j]` over
    its last `recent` items, the latest weighted most (1, 1/2, 1/3, ...).
    Popularity breaks ties. A dense `[num_items + 1, num_items + 1]` table:
    for catalogues up to about 10^4.

    Example:
    >>> train = [np.array([1, 2, 3]), np.array([1, 2, 3])]
    >>> scores = item_transition_scores(train, 3, [np.array([1])], window=1)
    >>> int(np.argmax(scores[0]))
    2
    """
    following = np.zeros((num_items + 1, num_items + 1), dtype="float64")
    for sequence in train_sequences:
        for offset in range(1, window + 1):
            np.add.at(following, (sequence[:-offset], sequence[offset:]), 1.0)
    popularity = most_popular_scores(train_sequences, num_items, histories)
    scores = 1e-6 * popularity / max(1.0, popularity[:, 1:].max())
    for row, history in enumerate(histories):
        for age, item in enumerate(np.asarray(history)[::-1][:recent]):
            scores[row] += following[item] / (age + 1)
    return scores
