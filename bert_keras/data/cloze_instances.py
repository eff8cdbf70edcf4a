"""BERT4Rec's inputs: cloze-masked training windows and next-item queries.

Training (Sun et al. 2019, §3.6): long histories are cut into windows of at
most `max_sequence_length` items that end at the history's end and step back
by `sliding_step` (the original's `prop_sliding_window * max_sequence_length`),
plus the window at the start. Each time a window is read, either a random
`mask_probability` of its items (at least one, at most `max_predictions`) are
replaced by [MASK] and predicted, or, with probability `mask_last_rate`, only
its last item is (the original writes one such "mask last" instance beside
`dupe_factor` = 10 random ones, so 1/11 of instances).

`cloze_dataset` draws new masks on each pass from a random stream that a
new process starts again; `cloze_epochs` makes each epoch's window order and
masks a function of (seed, epoch) alone, so a run resumed at epoch k reads
what the uninterrupted run read from epoch k on.

Inference appends [MASK] to a history and predicts the item there.

Sequences are right-padded with `PAD_ID` (0); padded predictions have position
0 and label `PAD_ID`, which the loss leaves out.
"""

import numpy as np
import tensorflow as tf

from bert_keras.data.interactions import PAD_ID

DEFAULT_MASK_LAST_RATE = 1 / 11


def training_windows(sequences, max_sequence_length, sliding_step):
    """The windows the original cuts from each history, in history order.

    Example:
    >>> windows = training_windows([np.arange(1, 8)], max_sequence_length=4, sliding_step=2)
    >>> [w.tolist() for w in windows]
    [[1, 2, 3, 4], [2, 3, 4, 5], [4, 5, 6, 7]]
    """
    if sliding_step < 1:
        raise ValueError(f"sliding_step must be at least 1, got {sliding_step}.")
    windows = []
    for sequence in sequences:
        if len(sequence) == 0:
            continue
        starts = list(range(len(sequence) - max_sequence_length, 0, -sliding_step))
        starts.append(0)
        windows.extend(sequence[start : start + max_sequence_length] for start in starts[::-1])
    return windows


def cloze_dataset(
    windows,
    mask_id,
    max_sequence_length,
    mask_probability,
    max_predictions,
    mask_last_rate=DEFAULT_MASK_LAST_RATE,
    seed=None,
):
    """A `tf.data.Dataset` of the windows, masked, unbatched, in order.

    Each element is `({"item_ids": [max_sequence_length],
    "masked_positions": [max_predictions]}, masked_item_ids
    [max_predictions])`, int32; each pass over it draws new masks.

    Example:
    >>> dataset = cloze_dataset([np.array([3, 4, 5, 6])], mask_id=9, max_sequence_length=6,
    ...                         mask_probability=0.5, max_predictions=3, mask_last_rate=0.0)
    >>> features, labels = next(iter(dataset))
    >>> features["item_ids"].shape.as_list(), labels.shape.as_list()
    ([6], [3])
    >>> int((features["item_ids"] == 9).numpy().sum()), int((labels > 0).numpy().sum())
    (2, 2)
    """
    ragged = _ragged_windows(windows, max_sequence_length)
    generator = tf.random.Generator.from_seed(0 if seed is None else seed)
    mask = _masker(mask_id, max_sequence_length, mask_probability, max_predictions, mask_last_rate)
    return tf.data.Dataset.from_tensor_slices(ragged).map(
        lambda window: mask(window, *tf.unstack(generator.make_seeds(2), axis=1))
    )


def cloze_epochs(
    windows,
    batch_size,
    epochs,
    mask_id,
    max_sequence_length,
    mask_probability,
    max_predictions,
    mask_last_rate=DEFAULT_MASK_LAST_RATE,
    seed=0,
):
    """Batches of masked windows for the given epochs, each epoch a function of (seed, epoch).

    Epoch `e` reads every window once, in an order drawn from `(seed, e)`,
    in `ceil(len(windows) / batch_size)` batches (the last one smaller);
    window `i` is masked as `cloze_dataset` masks, with draws from
    `(seed, e, i)`. Nothing depends on the epochs read before, so
    `epochs=range(k, n)` yields what `range(0, n)` yields from epoch `k` on:
    give it to `fit` with `initial_epoch=k` and `steps_per_epoch` the
    batches per epoch.

    Args:
        windows: integer arrays of at most `max_sequence_length` items.
        batch_size: windows per batch.
        epochs: the epoch numbers to read, in order (e.g. `range(3, 10)`).
        mask_id, max_sequence_length, mask_probability, max_predictions,
            mask_last_rate: as for `cloze_dataset`.
        seed: an integer in 0..2**63 - 1.

    Example:
    >>> windows = [np.arange(1, 6) + 10 * i for i in range(5)]
    >>> def first_items(epochs):
    ...     batches = cloze_epochs(windows, 2, epochs, mask_id=99, max_sequence_length=5,
    ...                            mask_probability=0.4, max_predictions=2, seed=7)
    ...     return [features["item_ids"][:, 0].numpy().tolist() for features, _ in batches]
    >>> everything = first_items(range(0, 2))
    >>> len(everything), first_items(range(1, 2)) == everything[3:]
    (6, True)
    """
    ragged = _ragged_windows(windows, max_sequence_length)
    mask = _masker(mask_id, max_sequence_length, mask_probability, max_predictions, mask_last_rate)
    indices = tf.range(len(windows), dtype="int64")

    def epoch_batches(epoch):
        epoch_seed = tf.stack([tf.constant(seed, "int64"), epoch])
        order = tf.random.experimental.stateless_shuffle(
            indices, tf.random.experimental.stateless_fold_in(epoch_seed, -1)
        )
        return (
            tf.data.Dataset.from_tensor_slices(order)
            .map(
                lambda index: mask(
                    ragged[index],
                    *tf.unstack(
                        tf.random.experimental.stateless_split(
                            tf.random.experimental.stateless_fold_in(epoch_seed, index), 2
                        )
                    ),
                )
            )
            .batch(batch_size)
        )

    epoch_numbers = tf.constant(list(epochs), "int64")
    return tf.data.Dataset.from_tensor_slices(epoch_numbers).flat_map(epoch_batches)


def _ragged_windows(windows, max_sequence_length):
    lengths = np.array([len(window) for window in windows], dtype="int64")
    if not len(windows) or lengths.max() > max_sequence_length:
        raise ValueError(
            f"Expected 1 or more windows of at most {max_sequence_length} items; got "
            f"{len(windows)} windows, the longest {lengths.max() if len(windows) else 0}."
        )
    return tf.RaggedTensor.from_row_lengths(
        np.concatenate(windows).astype("int32"), lengths, validate=False
    )


def _masker(mask_id, max_sequence_length, mask_probability, max_predictions, mask_last_rate):
    """(window, two stateless seeds) -> one training example, masked as the module docstring says."""

    def mask(window, choice_seed, positions_seed):
        length = tf.shape(window)[0]
        positions = tf.cond(
            tf.random.stateless_uniform([], choice_seed) < mask_last_rate,
            lambda: tf.reshape(length - 1, [1]),
            lambda: _random_positions(length, mask_probability, max_predictions, positions_seed),
        )
        labels = tf.gather(window, positions)
        masked = tf.tensor_scatter_nd_update(
            window, positions[:, None], tf.fill(tf.shape(positions), mask_id)
        )
        return (
            {
                "item_ids": _pad_to(masked, max_sequence_length),
                "masked_positions": _pad_to(positions, max_predictions),
            },
            _pad_to(labels, max_predictions),
        )

    return mask


def _random_positions(length, mask_probability, max_predictions, seed):
    """Sorted distinct positions, `round(length * mask_probability)` of them
    (halves rounded up, as Python 2's round of the original), in 1..max."""
    count = tf.cast(tf.floor(tf.cast(length, "float32") * mask_probability + 0.5), "int32")
    count = tf.clip_by_value(count, 1, tf.minimum(max_predictions, length))
    shuffled = tf.random.experimental.stateless_shuffle(tf.range(length), seed)
    return tf.sort(shuffled[:count])


def _pad_to(values, width):
    return tf.pad(values, [[0, width - tf.shape(values)[0]]], constant_values=PAD_ID)


def next_item_inputs(histories, max_sequence_length, mask_id):
    """Model inputs that ask for the item after each history.

    Keeps the last `max_sequence_length - 1` items of each history, appends
    [MASK] and right-pads; `masked_positions` points at the [MASK].

    Raises:
        ValueError: a history is empty (its index is named).

    Example:
    >>> inputs = next_item_inputs([np.array([4, 5, 6]), np.array([7])], 3, mask_id=9)
    >>> inputs["item_ids"].tolist(), inputs["masked_positions"].tolist()
    ([[5, 6, 9], [7, 9, 0]], [[2], [1]])
    """
    item_ids = np.full((len(histories), max_sequence_length), PAD_ID, dtype="int32")
    positions = np.zeros((len(histories), 1), dtype="int32")
    for row, history in enumerate(histories):
        if len(history) == 0:
            raise ValueError(f"History {row} is empty: there is nothing to recommend from.")
        kept = np.asarray(history[-(max_sequence_length - 1) :], dtype="int32")
        item_ids[row, : len(kept)] = kept
        item_ids[row, len(kept)] = mask_id
        positions[row, 0] = len(kept)
    return {"item_ids": item_ids, "masked_positions": positions}
