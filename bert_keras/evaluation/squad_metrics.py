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

    That is evaluate-v2.0.py's compute_f1 (`squad_scores` uses v1.1's for
    v1.1, which scores two empty sides 0).

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


def squad_scores(gold_answers, predictions, version_2_with_negative=False):
    """Exact match and F1 in percent, best over each question's gold answers.

    v1.1 (evaluate-v1.1.py): every gold answer counts as given, and F1 is 0
    when prediction and gold share no token (so a gold answer that
    normalises to "", such as "the", scores F1 0 even for the same text).
    v2.0 (evaluate-v2.0.py): gold answers that normalise to "" are dropped,
    leaving "" when none is left, and an empty prediction or gold scores 1
    only when both are empty; a question is answerable when its gold list
    is non-empty (the script's `bool(qa['answers'])`), and the breakdown
    "HasAns_*" / "NoAns_*" is added for whichever of the two kinds is
    present, as the script does.

    Args:
        gold_answers: dict question id → list of gold answer texts; an empty
            list marks an unanswerable SQuAD v2.0 question.
        predictions: dict question id → predicted text ("" = no answer). A
            question without a prediction scores 0 and counts in the total,
            as in evaluate-v1.1.py.
        version_2_with_negative: score as evaluate-v2.0.py, else v1.1.

    Returns:
        dict with "exact_match", "f1", "total", and for v2.0 "HasAns_exact",
        "HasAns_f1", "HasAns_total" when some questions are answerable and
        "NoAns_exact", "NoAns_f1", "NoAns_total" when some are not.

    Raises:
        ValueError: a v1.1 question with no gold answer (evaluate-v1.1.py
            cannot score it), named by its id.

    Example:
    >>> scores = squad_scores({"q1": ["Paris"], "q2": []}, {"q1": "Paris", "q2": ""},
    ...                       version_2_with_negative=True)
    >>> scores["exact_match"], scores["HasAns_total"], scores["NoAns_total"]
    (100.0, 1, 1)
    >>> squad_scores({"q1": ["the"]}, {"q1": "the"})
    {'exact_match': 100.0, 'f1': 0.0, 'total': 1}
    """
    exact, f1 = {}, {}
    for question_id, answers in gold_answers.items():
        if version_2_with_negative:
            golds = [answer for answer in answers if normalize_answer(answer)] or [""]
            f1_of = token_f1
        elif not answers:
            raise ValueError(
                f"Question {question_id!r} has no gold answer; SQuAD v1.1 scoring needs "
                "one (score v2.0 with version_2_with_negative)."
            )
        else:
            golds, f1_of = answers, _v1_token_f1
        prediction = predictions.get(question_id)
        if prediction is None:
            exact[question_id] = f1[question_id] = 0.0
            continue
        exact[question_id] = max(exact_match(prediction, gold) for gold in golds)
        f1[question_id] = max(f1_of(prediction, gold) for gold in golds)
    scores = _averages(exact, f1, list(gold_answers), "")
    if version_2_with_negative:
        has_answer = [question_id for question_id, answers in gold_answers.items() if answers]
        no_answer = [question_id for question_id, answers in gold_answers.items() if not answers]
        if has_answer:
            scores.update(_averages(exact, f1, has_answer, "HasAns_"))
        if no_answer:
            scores.update(_averages(exact, f1, no_answer, "NoAns_"))
    return scores


def _v1_token_f1(prediction, gold):
    """evaluate-v1.1.py's f1_score: 0 when no token is shared, even both empty."""
    if not (normalize_answer(prediction).split() and normalize_answer(gold).split()):
        return 0.0
    return token_f1(prediction, gold)


def _averages(exact, f1, question_ids, prefix):
    total = len(question_ids)
    exact_name = f"{prefix}exact" if prefix else "exact_match"
    return {
        exact_name: 100.0 * sum(exact[q] for q in question_ids) / total if total else 0.0,
        f"{prefix}f1": 100.0 * sum(f1[q] for q in question_ids) / total if total else 0.0,
        f"{prefix}total": total,
    }
