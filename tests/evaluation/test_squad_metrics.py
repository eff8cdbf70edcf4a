import pytest

from bert_keras.evaluation.squad_metrics import normalize_answer
from bert_keras.evaluation.squad_metrics import squad_scores
from bert_keras.evaluation.squad_metrics import token_f1


def test_normalization_as_the_official_script():
    assert normalize_answer("  An Apple, a day!") == "apple day"
    assert normalize_answer("theatre") == "theatre"  # articles only as whole words


def test_f1_by_hand():
    # prediction tokens [denver, broncos, won], gold [broncos]: p 1/3, r 1 → 0.5
    assert token_f1("Denver Broncos won", "the Broncos") == pytest.approx(0.5)
    assert token_f1("", "Broncos") == 0.0
    assert token_f1("", "") == 1.0


def test_v1_scores_take_the_best_gold_answer():
    gold = {"q1": ["Denver Broncos", "Broncos"], "q2": ["1966"]}
    predictions = {"q1": "the Broncos", "q2": "in 1967"}
    scores = squad_scores(gold, predictions)
    assert scores["exact_match"] == pytest.approx(50.0)
    assert scores["f1"] == pytest.approx(50.0)
    assert "HasAns_total" not in scores


def test_v2_breakdown_and_no_answer():
    gold = {"a": ["Paris"], "b": [], "c": []}
    predictions = {"a": "Paris", "b": "", "c": "Lyon"}
    scores = squad_scores(gold, predictions)
    assert scores["exact_match"] == pytest.approx(200 / 3)
    assert (scores["HasAns_exact"], scores["HasAns_total"]) == (100.0, 1)
    assert (scores["NoAns_exact"], scores["NoAns_total"]) == (50.0, 2)


def test_all_null_questions_and_empty_predictions():
    scores = squad_scores({"a": [], "b": []}, {"a": "", "b": ""})
    assert scores["exact_match"] == 100.0 and scores["HasAns_total"] == 0
    assert squad_scores({"a": ["x"]}, {})["f1"] == 0.0  # missing prediction scores 0
