"""SQuAD exact match and F1 as the official v1.1 and v2.0 evaluation scripts compute them."""

import collections
import re
import string

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text):
    """Lower case, drop punctuation and the articles a/an/the, fold whitespace.

    Example:
    >>> normalize_answer("The  Eiffel-Tower!")
    'eiffeltower'
    """
    text = "".join(character for character in text.lower() if character not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction, gold):
    """1.0 when the normalised strings are equal.

    Example:
    >>> exact_match("the Louvre", "Louvre")
    1.0
    """
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction, gold):
    """Bag-of-tokens F1 of the normalised strings; an empty side scores 1.0 only if both are.

    Example:
    >>> round(token_f1("in Paris France", "Paris"), 3)
    0.5
    """
    prediction_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not prediction_tokens or not gold_tokens:
        return float(prediction_tokens == gold_tokens)
    common = collections.Counter(prediction_tokens) & collections.Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(prediction_tokens), overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_scores(gold_answers, predictions):
    """Exact match and F1 in percent, best over each question's gold answers.

    Args:
        gold_answers: dict question id → list of gold answer texts; an empty
            list marks an unanswerable SQuAD v2.0 question (gold "").
        predictions: dict question id → predicted text ("" = no answer). A
            question without a prediction scores 0, as in the official script.

    Returns:
        dict with "exact_match", "f1", "total", and when unanswerable
        questions are present the v2.0 breakdown "HasAns_exact",
        "HasAns_f1", "HasAns_total", "NoAns_exact", "NoAns_f1", "NoAns_total".

    Example:
    >>> squad_scores({"q1": ["Paris"], "q2": []}, {"q1": "Paris", "q2": ""})["exact_match"]
    100.0
    """
    exact, f1 = {}, {}
    for question_id, answers in gold_answers.items():
        golds = [answer for answer in answers if normalize_answer(answer)] or [""]
        prediction = predictions.get(question_id)
        if prediction is None:
            exact[question_id] = f1[question_id] = 0.0
            continue
        exact[question_id] = max(exact_match(prediction, gold) for gold in golds)
        f1[question_id] = max(token_f1(prediction, gold) for gold in golds)
    scores = _averages(exact, f1, list(gold_answers), "")
    has_answer = [
        qid for qid, answers in gold_answers.items() if any(map(normalize_answer, answers))
    ]
    no_answer = [qid for qid in gold_answers if qid not in set(has_answer)]
    if no_answer:
        scores.update(_averages(exact, f1, has_answer, "HasAns_"))
        scores.update(_averages(exact, f1, no_answer, "NoAns_"))
    return scores


def _averages(exact, f1, question_ids, prefix):
    total = len(question_ids)
    exact_name = f"{prefix}exact" if prefix else "exact_match"
    return {
        exact_name: 100.0 * sum(exact[q] for q in question_ids) / total if total else 0.0,
        f"{prefix}f1": 100.0 * sum(f1[q] for q in question_ids) / total if total else 0.0,
        f"{prefix}total": total,
    }
