import pytest

from bert_keras.evaluation.conll_metrics import entities
from bert_keras.evaluation.conll_metrics import entity_scores


def test_iob2_entities():
    assert entities(["B-ORG", "I-ORG", "O", "B-PER", "B-PER", "I-LOC"]) == [
        ("ORG", 0, 1),
        ("PER", 3, 3),
        ("PER", 4, 4),
        ("LOC", 5, 5),
    ]


def test_iob1_entities_start_with_i_and_split_on_b():
    # IOB1: I- starts an entity; B- only separates two adjacent ones of one type.
    assert entities(["I-PER", "I-PER", "B-PER", "O", "I-LOC"]) == [
        ("PER", 0, 1),
        ("PER", 2, 2),
        ("LOC", 4, 4),
    ]


def test_bilou_entities_are_read_as_iobes():
    bilou = ["U-PER", "B-LOC", "I-LOC", "L-LOC", "U-LOC", "O", "B-ORG", "L-ORG"]
    iobes = ["S-PER", "B-LOC", "I-LOC", "E-LOC", "S-LOC", "O", "B-ORG", "E-ORG"]
    assert (
        entities(bilou)
        == entities(iobes)
        == [
            ("PER", 0, 0),
            ("LOC", 1, 3),
            ("LOC", 4, 4),
            ("ORG", 6, 7),
        ]
    )


def test_a_type_change_inside_ends_the_entity():
    assert entities(["B-PER", "I-LOC", "I-LOC"]) == [("PER", 0, 0), ("LOC", 1, 2)]


def test_scores_by_hand():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    predicted = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "B-MISC"]]
    scores = entity_scores(gold, predicted)
    # gold 3, predicted 4, correct 2 (PER, ORG)
    assert (scores.gold, scores.predicted, scores.correct) == (3, 4, 2)
    assert scores.precision == pytest.approx(0.5)
    assert scores.recall == pytest.approx(2 / 3)
    assert scores.f1 == pytest.approx(4 / 7)


def test_a_partial_entity_is_wrong():
    # An entity cut short, as when only some word pieces were tagged, earns nothing.
    scores = entity_scores([["B-PER", "I-PER", "I-PER"]], [["B-PER", "I-PER", "O"]])
    assert scores.correct == 0 and scores.f1 == 0.0


def test_no_predictions_scores_zero_without_dividing_by_zero():
    scores = entity_scores([["B-PER"]], [["O"]])
    assert (scores.precision, scores.recall, scores.f1) == (0.0, 0.0, 0.0)


def test_length_mismatch_names_the_sentence():
    with pytest.raises(ValueError, match="Sentence 1: 2 gold tags but 1 predicted"):
        entity_scores([["O"], ["O", "O"]], [["O"], ["O"]])
