"""BERT4Rec on real data: a short run on MovieLens-100K beats two classic baselines."""

import keras
import pytest

from bert_keras.data.interactions import movielens_100k_path
from bert_keras.recommendation.baselines import item_knn_scores
from bert_keras.recommendation.baselines import most_popular_scores
from bert_keras.recommendation.run import RecommendationRun

pytestmark = [
    pytest.mark.slow,
    # Learning on real data is measured once; tests/models/test_bert4rec.py and
    # test_run.py check the model and training on every backend.
    pytest.mark.skipif(keras.backend.backend() != "torch", reason="one backend suffices"),
]


def test_a_short_run_beats_most_popular_and_item_knn_on_full_ranking(tmp_path):
    run = RecommendationRun(movielens_100k_path(), "recbole", str(tmp_path), max_sequence_length=50)
    assert (len(run.split.test_targets), run.sequences.num_items) == (943, 1682)
    run.train(num_epochs=12, batch_size=64, learning_rate=2e-3, verbose=0)
    model = run.evaluate()
    for baseline in (most_popular_scores, item_knn_scores):
        results = run.test_metrics(
            lambda histories, baseline=baseline: baseline(
                run.split.train, run.sequences.num_items, histories
            )
        )
        for metric in ("test/full/ndcg@10", "test/full/hr@10"):
            assert model[metric] > results[metric], (baseline.__name__, metric, model, results)
