import math
import warnings

import pytest

from bert_keras.evaluation import glue_metrics as metrics


def test_accuracy_and_f1_by_hand():
    labels, predictions = [1, 1, 1, 0, 0, 0], [1, 1, 0, 1, 0, 0]
    assert metrics.accuracy(labels, predictions) == pytest.approx(4 / 6)
    # tp 2, fp 1, fn 1: precision 2/3, recall 2/3
    assert metrics.f1(labels, predictions) == pytest.approx(2 / 3)


def test_f1_when_nothing_is_predicted_positive():
    assert metrics.f1([1, 0], [0, 0]) == 0.0


def test_matthews_correlation_by_hand():
    labels, predictions = [1, 1, 1, 0, 0, 0], [1, 1, 0, 1, 0, 0]
    # tp 2, tn 2, fp 1, fn 1: (4 - 1) / sqrt(3 * 3 * 3 * 3) = 1/3
    assert metrics.matthews_correlation(labels, predictions) == pytest.approx(1 / 3)
    assert metrics.matthews_correlation([1, 0, 1], [0, 1, 0]) == pytest.approx(-1.0)
    assert metrics.matthews_correlation([1, 1], [1, 1]) == 0.0  # undefined → 0


def test_pearson_and_spearman_by_hand():
    labels, predictions = [1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 4.0]
    # ranks differ by one swap: 1 - 6 * (1 + 1) / (4 * 15) = 0.8
    assert metrics.spearman(labels, predictions) == pytest.approx(0.8)
    assert metrics.pearson(labels, predictions) == pytest.approx(0.8)
    # ties share their mean rank: [1, 2.5, 2.5, 4]
    assert metrics.spearman([1, 2, 3, 4], [0, 5, 5, 9]) == pytest.approx(0.9486833, abs=1e-6)


def test_glue_metrics_per_task():
    assert set(metrics.glue_metrics("CoLA", [1, 0], [1, 0])) == {"matthews_correlation"}
    assert set(metrics.glue_metrics("sts-b", [1.0, 2.0, 3.0], [1.0, 2.0, 2.5])) == {
        "pearson",
        "spearman",
    }
    with pytest.raises(ValueError, match="Unknown GLUE task 'squad'"):
        metrics.glue_metrics("squad", [1], [1])


@pytest.mark.parametrize(
    "labels, predictions",
    [([4.5], [3.0]), ([1.0, 2.0, 3.0], [2.0, 2.0, 2.0]), ([2.0, 2.0], [1.0, 3.0])],
    ids=["one example", "constant predictions", "constant labels"],
)
def test_an_undefined_correlation_is_nan_without_a_numpy_warning(labels, predictions):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert math.isnan(metrics.pearson(labels, predictions))
        assert math.isnan(metrics.spearman(labels, predictions))
