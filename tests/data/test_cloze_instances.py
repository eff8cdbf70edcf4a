"""BERT4Rec's training windows and masks, and its next-item queries."""

import numpy as np
import pytest

from bert_keras.data.cloze_instances import cloze_dataset
from bert_keras.data.cloze_instances import cloze_epochs
from bert_keras.data.cloze_instances import next_item_inputs
from bert_keras.data.cloze_instances import training_windows

MASK = 99


def test_windows_end_at_the_end_and_step_back_as_the_original():
    sequence = np.arange(1, 11)
    windows = training_windows([sequence, np.array([5, 6])], max_sequence_length=4, sliding_step=3)
    # Starts 6, 3, then 0 (the original's range(len - max, 0, -step) + [0]), oldest first.
    assert [w.tolist() for w in windows] == [[1, 2, 3, 4], [4, 5, 6, 7], [7, 8, 9, 10], [5, 6]]


def examples(windows, **kwargs):
    arguments = dict(mask_id=MASK, max_sequence_length=8, mask_probability=0.5, max_predictions=3)
    dataset = cloze_dataset(windows, **{**arguments, **kwargs})
    return [
        ({k: v.numpy() for k, v in features.items()}, labels.numpy())
        for features, labels in dataset
    ]


def test_masks_round_length_times_probability_items_and_labels_them():
    windows = [np.array([11, 12, 13, 14, 15]), np.array([21, 22, 23, 24, 25, 26, 27, 28])]
    for seed in range(5):
        for window, (features, labels) in zip(
            windows, examples(windows, mask_last_rate=0.0, seed=seed)
        ):
            positions = features["masked_positions"]
            count = int((labels > 0).sum())
            # round(5 * 0.5) = 3 (halves up, as the original's Python 2 round); 8 * 0.5 = 4 > 3.
            assert count == 3
            real = positions[:count]
            assert np.all(np.diff(real) > 0)
            np.testing.assert_array_equal(labels[:count], window[real])
            np.testing.assert_array_equal(features["item_ids"][real], MASK)
            unmasked = np.setdiff1d(np.arange(len(window)), real)
            np.testing.assert_array_equal(features["item_ids"][unmasked], window[unmasked])
            np.testing.assert_array_equal(features["item_ids"][len(window) :], 0)
            assert positions[count:].tolist() == [0] * (3 - count)


def test_mask_last_instances_predict_only_the_last_item():
    window = np.array([4, 5, 6, 7])
    features, labels = examples([window], mask_last_rate=1.0)[0]
    assert features["item_ids"].tolist() == [4, 5, 6, MASK, 0, 0, 0, 0]
    assert features["masked_positions"].tolist() == [3, 0, 0]
    assert labels.tolist() == [7, 0, 0]


def test_windows_draw_different_masks_and_the_rate_of_mask_last_holds():
    windows = [np.arange(1, 9)] * 400
    positions = np.array([f["masked_positions"] for f, _ in examples(windows, mask_last_rate=0.25)])
    mask_last = np.all(positions == [7, 0, 0], axis=1)
    assert 0.18 < mask_last.mean() < 0.32
    assert len({tuple(p) for p in positions}) > 20


def test_too_long_windows_are_refused():
    with pytest.raises(ValueError, match="at most 8 items.*longest 9"):
        examples([np.arange(1, 10)])


def test_next_item_inputs_append_mask_after_the_latest_items():
    inputs = next_item_inputs(
        [np.arange(1, 10), np.array([3])], max_sequence_length=4, mask_id=MASK
    )
    assert inputs["item_ids"].tolist() == [[7, 8, 9, MASK], [3, MASK, 0, 0]]
    assert inputs["masked_positions"].tolist() == [[3], [1]]
    with pytest.raises(ValueError, match="History 1 is empty"):
        next_item_inputs([np.array([1]), np.array([], "int32")], 4, MASK)


def epoch_batches(windows, epochs, seed=3, batch_size=4, **kwargs):
    arguments = dict(mask_id=MASK, max_sequence_length=8, mask_probability=0.5, max_predictions=3)
    dataset = cloze_epochs(windows, batch_size, epochs, seed=seed, **{**arguments, **kwargs})
    return [
        ({k: v.numpy() for k, v in features.items()}, labels.numpy())
        for features, labels in dataset
    ]


def test_an_epoch_depends_on_the_seed_and_its_number_not_on_the_epochs_before():
    windows = [np.arange(1, 7) + 10 * i for i in range(10)]  # first items 1, 11, ..., 91
    whole = epoch_batches(windows, range(0, 3))
    assert [len(labels) for _, labels in whole] == [4, 4, 2] * 3
    resumed = epoch_batches(windows, range(2, 3))
    for (features, labels), (expected_features, expected_labels) in zip(resumed, whole[6:]):
        np.testing.assert_array_equal(features["item_ids"], expected_features["item_ids"])
        np.testing.assert_array_equal(labels, expected_labels)

    def orders(batches):
        first_items = np.concatenate([features["item_ids"][:, 0] for features, _ in batches])
        return [
            first_items[start : start + 10].tolist() for start in range(0, len(first_items), 10)
        ]

    epoch_orders = orders(whole)
    # Window i holds 10i+1..10i+6, half of them masked: its largest unmasked item tells it.
    windows_read = [
        sorted(int(np.where(row != MASK, row, 0).max()) // 10 for row in rows)
        for rows in np.split(np.concatenate([f["item_ids"] for f, _ in whole]), 3)
    ]
    assert windows_read == [list(range(10))] * 3  # every window once per epoch
    assert epoch_orders[0] != epoch_orders[1] != epoch_orders[2]
    assert orders(epoch_batches(windows, range(0, 1), seed=4))[0] != epoch_orders[0]


def test_epochs_mask_as_cloze_dataset_masks():
    windows = [np.arange(1, 9)] * 400
    batches = epoch_batches(windows, range(5, 6), batch_size=100, mask_last_rate=0.25)
    positions = np.concatenate([features["masked_positions"] for features, _ in batches])
    labels = np.concatenate([labels for _, labels in batches])
    mask_last = np.all(positions == [7, 0, 0], axis=1)
    assert 0.18 < mask_last.mean() < 0.32
    assert len({tuple(p) for p in positions}) > 20
    # round(8 * 0.5) = 4, capped at max_predictions = 3; the labels are the items masked.
    np.testing.assert_array_equal((labels > 0).sum(axis=1), np.where(mask_last, 1, 3))
    np.testing.assert_array_equal(labels[~mask_last], positions[~mask_last] + 1)
