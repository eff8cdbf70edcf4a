"""Entity-level precision, recall and F1 exactly as CoNLL's conlleval script counts them.

A chunk (entity) starts and ends by conlleval's rules (`startOfChunk` and
`endOfChunk`), which read IOB1, IOB2 and IOE/IOBES tags alike (and BILOU's,
read as IOBES: L- as E-, U- as S-); a predicted
entity is correct only when its type, start and end all match a gold entity.
"""

import dataclasses


def entities(tags):
    """The (type, first, last) spans of a tag sequence, by conlleval's rules.

    Args:
        tags: tags such as "B-PER", "I-PER", "O" (a "-X" suffix gives the type).

    Example:
    >>> entities(["B-PER", "I-PER", "O", "I-LOC", "B-LOC"])
    [('PER', 0, 1), ('LOC', 3, 3), ('LOC', 4, 4)]
    >>> entities(["B-PER", "L-PER", "U-LOC"])  # BILOU
    [('PER', 0, 1), ('LOC', 2, 2)]
    """
    spans = []
    previous_tag, previous_type, start = "O", "", None
    for index, tag in enumerate(list(tags) + ["O"]):
        prefix, entity_type = _split(tag)
        if start is not None and _ends(previous_tag, prefix, previous_type, entity_type):
            spans.append((previous_type, start, index - 1))
            start = None
        if _starts(previous_tag, prefix, previous_type, entity_type):
            start = index
        previous_tag, previous_type = prefix, entity_type
    return spans


_BILOU_PREFIXES = {"L": "E", "U": "S"}  # BILOU's last and unit tags are IOBES's end and single


def _split(tag):
    if tag in ("O", "") or "-" not in tag:
        return ("O", "") if tag in ("O", "") else (tag, "")
    prefix, entity_type = tag.split("-", 1)
    return _BILOU_PREFIXES.get(prefix, prefix), entity_type


def _ends(previous, current, previous_type, current_type):
    if previous in ("E", "S"):
        return True
    if previous in ("B", "I"):
        return current in ("B", "S", "O") or previous_type != current_type
    return False


def _starts(previous, current, previous_type, current_type):
    if current in ("B", "S"):
        return True
    if current in ("E", "I"):
        return previous in ("E", "S", "O") or previous_type != current_type
    return False


@dataclasses.dataclass(frozen=True)
class EntityScores:
    """Entity counts and the scores conlleval prints (as fractions, not percent)."""

    gold: int
    predicted: int
    correct: int

    @property
    def precision(self):
        return self.correct / self.predicted if self.predicted else 0.0

    @property
    def recall(self):
        return self.correct / self.gold if self.gold else 0.0

    @property
    def f1(self):
        total = self.precision + self.recall
        return 2 * self.precision * self.recall / total if total else 0.0


def entity_scores(gold_sentences, predicted_sentences):
    """Scores predicted tag sequences against gold ones, sentence by sentence.

    Example:
    >>> scores = entity_scores([["B-PER", "I-PER", "O"]], [["B-PER", "O", "O"]])
    >>> scores.gold, scores.predicted, scores.correct
    (1, 1, 0)
    """
    gold_count = predicted_count = correct = 0
    for number, (gold, predicted) in enumerate(zip(gold_sentences, predicted_sentences)):
        if len(gold) != len(predicted):
            raise ValueError(
                f"Sentence {number}: {len(gold)} gold tags but {len(predicted)} predicted."
            )
        gold_spans, predicted_spans = set(entities(gold)), set(entities(predicted))
        gold_count += len(gold_spans)
        predicted_count += len(predicted_spans)
        correct += len(gold_spans & predicted_spans)
    return EntityScores(gold_count, predicted_count, correct)
