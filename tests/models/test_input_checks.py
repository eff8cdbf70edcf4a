"""Bad array inputs to fit, evaluate and predict are errors naming the input and the example."""

import numpy as np
import pytest
import tensorflow as tf

from bert_keras.models.input_checks import check_array_inputs
from bert_keras.models.input_checks import check_class_ids


@pytest.mark.parametrize(
    "x",
    [
        ["a film", "a movie"],
        np.array(["a film", "a movie"]),
        np.array([b"a film", b"a movie"], dtype=object),
        (["a film", "a movie"], ["yes", "no"]),  # pairs
        [["EU", "rejects"], ["Peter"]],  # words
        (["which?", "who?"], [["a", "b"], ["c", "d"]]),  # contexts and choices
        {"token_ids": np.ones((2, 4), "int32"), "padding_mask": np.ones((2, 4), "int32")},
        tf.constant(["a film", "a movie"]),
        tf.ragged.constant([["EU", "rejects"], ["Peter"]]),
    ],
)
def test_good_inputs_pass(x):
    check_array_inputs(x, [0, 1], np.ones(2))


def test_datasets_and_generators_pass_unchecked():
    check_array_inputs(tf.data.Dataset.from_tensor_slices(["a"]).batch(1), [0, 1, 2])
    check_array_inputs(text for text in ["a"])


@pytest.mark.parametrize(
    "x, y, sample_weight, message",
    [
        ("a film", None, None, r"x is one string or number \('a film'\); give a batch"),
        (np.array("a film"), None, None, "x is one string or number"),
        (3, None, None, r"x is one string or number \(3\)"),
        (None, None, None, "x is None; give a batch"),
        ([], None, None, "x holds no examples"),
        ({}, None, None, "x is an empty dict: it holds no inputs"),
        ((), None, None, "x is an empty tuple"),
        ({"token_ids": np.ones((0, 4))}, None, None, r"x\['token_ids'\] holds no examples"),
        (["a", None], None, None, r"x\[1\] is None, not a string"),
        ([None, "a"], None, None, r"x\[0\] is None, not a string"),
        (np.array([None, "a", 3], dtype=object), None, None, r"x\[0\] is None, not a string"),
        (np.array(["a", 3], dtype=object), None, None, r"x\[1\] is 3, not a string"),
        ((["a", "b"], ["c", 4]), None, None, r"x\[1\]\[1\] is 4, not a string"),
        ([["EU", "rejects"], ["Peter", None]], None, None, r"x\[1\]\[1\] is None"),
        ((["a", "b", "c"], ["d", "e"]), None, None, r"x\[1\] holds 2 examples for the 3 of x\[0\]"),
        (["a", "b", "c"], [0, 1], None, r"y holds 2 examples for the 3 of x\."),
        (["a", "b"], [0, 1], [1.0], "sample_weight holds 1 examples for the 2 of x"),
        (["a", "b"], ["pos", "neg"], None, r"y holds strings \('pos', …\); labels are numbers"),
        (["a", "b"], np.array(["pos", "neg"]), None, "y holds strings"),
        (("good", "bad!"), None, None, r"x\[0\] is one string \('good'\); a tuple x holds pairs"),
        (("a", "bb", "ccc", ""), None, None, r"x\[0\] is one string \('a'\)"),
        ((["a"], None), None, None, r"x\[1\] is None; a tuple x holds pairs \(texts, text_pairs\)"),
        (
            (["a"], ["b"], ["c"]),
            None,
            None,
            "x is a tuple of 3 parts; a tuple of texts holds a pair",
        ),
        (
            [("a", "b"), ("c", "d")],
            None,
            None,
            r"x holds tuples \(x\[0\] is a tuple\) where one text",
        ),
    ],
)
def test_bad_inputs_are_errors_naming_them(x, y, sample_weight, message):
    with pytest.raises(ValueError, match=message):
        check_array_inputs(x, y, sample_weight)


@pytest.mark.parametrize("batch_size", [0, -1, 2.5, True, "32"])
def test_a_batch_size_that_is_not_a_positive_whole_number_is_an_error(batch_size):
    with pytest.raises(
        ValueError, match=f"batch_size must be a positive whole number, got {batch_size!r}"
    ):
        check_array_inputs(["a"], batch_size=batch_size)
    check_array_inputs(["a"], batch_size=np.int64(32))


def test_the_source_begins_the_names():
    with pytest.raises(ValueError, match="validation_data: y holds 1 examples for the 2 of"):
        check_array_inputs(["a", "b"], [0], source="validation_data: ")


def test_long_values_are_shortened_in_errors():
    with pytest.raises(ValueError) as error:
        check_array_inputs("a very long review " * 20)
    assert "a very long review a very long" in str(error.value)
    assert len(str(error.value)) < 120


@pytest.mark.parametrize(
    "labels",
    [[0, 1, 2], np.array([[2], [0]]), [[0, 1], [2]], tf.ragged.constant([[0], [1, 2]])],
)
def test_class_ids_in_range_pass(labels):
    check_class_ids(labels, num_classes=3)


@pytest.mark.parametrize(
    "labels, message",
    [
        (
            [0, 3, 1],
            r"y holds the label 3 \(at index 1 of its 3 labels\); class ids run from 0 to 2",
        ),
        ([0, -1], "the label -1 "),
        ([0.0, 1.5], "the label 1.5 "),
        ([[0, 1], [2, 7]], r"the label 7 \(at index 3 of its 4 labels\)"),
        (tf.ragged.constant([[0], [1, 5]]), "the label 5 "),
    ],
)
def test_class_ids_out_of_range_are_errors(labels, message):
    with pytest.raises(ValueError, match=message):
        check_class_ids(labels, num_classes=3)


def test_the_ignored_label_passes_the_class_ids_check():
    check_class_ids([[0, -100], [2]], num_classes=3, ignored_label=-100)
    with pytest.raises(ValueError, match="word_labels holds the label -1 "):
        check_class_ids([[0, -1]], num_classes=3, name="word_labels", ignored_label=-100)
