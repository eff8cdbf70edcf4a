"""Ranks and metrics against hand-computed rankings; popularity negatives."""

import math

import numpy as np
import pytest

from bert_keras.evaluation.ranking_metrics import next_item_ranks
from bert_keras.evaluation.ranking_metrics import popularity_negatives
from bert_keras.evaluation.ranking_metrics import ranking_metrics
from bert_keras.evaluation.ranking_metrics import target_ranks


def test_ranks_count_better_and_tied_candidates_against_the_target():
    scores = np.array(
        [
            [0.5, 0.1, 0.9, 0.3],  # target 0: only 0.9 beats it -> 2
            [0.2, 0.2, 0.2, 0.2],  # all tied: the target ranks last -> 4
            [0.0, 0.1, 0.2, 0.3],  # target 0 is the worst -> 4
            [0.4, 0.4, 0.1, 0.0],  # one tie -> 2
        ]
    )
    assert target_ranks(scores, np.array([0, 1, 0, 0])).tolist() == [2, 4, 4, 2]


def test_excluded_columns_do_not_count_and_an_excluded_target_ranks_last():
    scores = np.array([[0.9, 0.8, 0.7, 0.1]])
    assert target_ranks(scores, np.array([2]), [np.array([0, 1])]).tolist() == [1]
    # A target already in the history is never recommended (as in RecBole's full
    # ranking, where it scores -inf): a miss at every cut-off, not a hit among fewer items.
    seen = target_ranks(scores, np.array([2]), [np.array([0, 1, 2])])
    assert seen.tolist() == [math.inf]
    assert ranking_metrics(seen, cutoffs=(1, 5, 10)) == {
        "hr@1": 0.0,
        "hr@5": 0.0,
        "ndcg@5": 0.0,
        "hr@10": 0.0,
        "ndcg@10": 0.0,
        "mrr": 0.0,
    }


def test_a_diverged_model_s_nan_scores_rank_its_targets_last():
    scores = np.array([[np.nan, np.nan, np.nan], [0.1, np.nan, 0.3], [np.nan, 0.5, 0.2]])
    ranks = target_ranks(scores, np.array([0, 2, 2]))
    assert ranks.tolist() == [math.inf, 1, 2]  # NaN: no score, never a hit
    assert ranking_metrics(ranks[:1], cutoffs=(5,)) == {"hr@5": 0.0, "ndcg@5": 0.0, "mrr": 0.0}


def test_a_constant_model_hits_no_target_the_user_has_seen_before():
    scores = np.zeros((2, 7))  # ids 0 (padding) .. 6
    histories = [np.array([1, 2, 3, 4, 5, 6]), np.array([1, 2, 3, 4, 5])]
    full, _ = next_item_ranks(scores, histories, np.array([3, 6]), np.zeros((2, 0), "int64"))
    assert full.tolist() == [math.inf, 1]  # a repeat is never ranked; a new one is the only one
    assert ranking_metrics(full, cutoffs=(10,))["hr@10"] == 0.5  # 6 items, yet the repeat misses


def test_metrics_from_ranks_by_hand():
    metrics = ranking_metrics(np.array([1, 2, 6, 11]), cutoffs=(1, 5, 10))
    assert metrics["hr@1"] == 0.25
    assert metrics["hr@5"] == 0.5
    assert metrics["hr@10"] == 0.75
    assert metrics["ndcg@5"] == pytest.approx((1 + 1 / math.log2(3)) / 4)
    assert metrics["ndcg@10"] == pytest.approx((1 + 1 / math.log2(3) + 1 / math.log2(7)) / 4)
    assert metrics["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 6 + 1 / 11) / 4)
    assert "ndcg@1" not in metrics


def test_negatives_are_distinct_unseen_and_drawn_by_popularity():
    counts = np.array([0.0] + [1.0] * 50 + [100.0] * 50)  # ids 51..100 are popular
    histories = [np.arange(51, 71), np.arange(1, 30)]
    targets = np.array([80, 30])
    negatives = popularity_negatives(histories, targets, counts, num_negatives=20, seed=1)
    for history, target, row in zip(histories, targets, negatives):
        assert len(set(row.tolist())) == 20
        assert not set(row.tolist()) & (set(history.tolist()) | {int(target)})
        assert 0 not in row.tolist()
    # Mostly popular ids, though user 0 has seen 20 of the 50 popular ones.
    assert (negatives > 50).mean() > 0.8


def test_negatives_run_out_with_a_clear_error():
    counts = np.array([0.0, 1, 1, 1, 1])
    with pytest.raises(ValueError, match="User 0 has seen all but 1 of the 4 items"):
        popularity_negatives([np.array([1, 2])], np.array([3]), counts, num_negatives=2)


def test_next_item_ranks_of_both_protocols():
    # ids 0 (padding) .. 5
    scores = np.array([[9.0, 0.5, 0.9, 0.4, 0.8, 0.1]])
    full, sampled = next_item_ranks(scores, [np.array([2])], np.array([4]), np.array([[5, 1]]))
    # Full: id 2 is seen and the padding column never counts, so only ids 1, 3, 5 compete.
    assert full.tolist() == [1]
    assert sampled.tolist() == [1]
    full, sampled = next_item_ranks(scores, [np.array([4])], np.array([3]), np.array([[5, 1]]))
    assert full.tolist() == [3]  # ids 2 and 1 beat it; id 4 (0.8) is seen
    assert sampled.tolist() == [2]
