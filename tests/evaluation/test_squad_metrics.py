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
    scores = squad_scores(gold, predictions, version_2_with_negative=True)
    assert scores["exact_match"] == pytest.approx(200 / 3)
    assert (scores["HasAns_exact"], scores["HasAns_total"]) == (100.0, 1)
    assert (scores["NoAns_exact"], scores["NoAns_total"]) == (50.0, 2)


def test_all_null_questions_and_empty_predictions():
    scores = squad_scores({"a": [], "b": []}, {"a": "", "b": ""}, version_2_with_negative=True)
    # evaluate-v2.0.py adds HasAns_* only when some question is answerable.
    assert scores["exact_match"] == 100.0 and "HasAns_total" not in scores
    assert squad_scores({"a": ["x"]}, {})["f1"] == 0.0  # missing prediction scores 0


def test_v2_answerable_means_a_non_empty_gold_list_as_the_official_script():
    # evaluate-v2.0.py: has_ans = bool(qa["answers"]); a gold normalising to ""
    # is dropped from the golds, leaving "" as the one to match.
    gold = {"q1": ["."], "q2": [], "q3": ["Paris"]}
    scores = squad_scores(gold, {"q1": "", "q2": "", "q3": "Paris"}, version_2_with_negative=True)
    assert (scores["HasAns_total"], scores["NoAns_total"]) == (2, 1)
    assert (scores["exact_match"], scores["f1"], scores["HasAns_f1"]) == (100.0, 100.0, 100.0)
    wrong = squad_scores(
        gold, {"q1": "Lyon", "q2": "", "q3": "Paris"}, version_2_with_negative=True
    )
    assert wrong["HasAns_f1"] == 50.0


def test_v1_scores_as_evaluate_v1_1_without_a_breakdown():
    # evaluate-v1.1.py: f1_score is 0 when no token is shared, even when
    # prediction and gold both normalise to ""; exact match still compares them.
    scores = squad_scores({"q1": ["the"], "q3": ["Paris"]}, {"q1": "the", "q3": "Paris"})
    assert scores == {"exact_match": 100.0, "f1": 50.0, "total": 2}
    assert token_f1("the", "the") == 1.0  # v2.0's compute_f1 gives 1


def test_v1_refuses_a_question_without_gold_answers():
    with pytest.raises(ValueError, match="'q2' has no gold answer"):
        squad_scores({"q1": ["Paris"], "q2": []}, {"q1": "Paris", "q2": ""})
