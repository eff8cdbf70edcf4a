import warnings

import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_token_classifier import IGNORED_LABEL
from bert_keras.models.bert_token_classifier import BertTokenClassifier
from bert_keras.text.preprocessor import BertPreprocessor
from bert_keras.text.preprocessor import on_first_pieces
from bert_keras.text.tokenizer import SPECIAL_TOKENS
from bert_keras.text.tokenizer import BertTokenizer
from tests.test_case import TINY_INPUTS
from tests.test_case import TRAINING_BACKBONE
from tests.test_case import TestCase
from tests.test_case import check_validation_data_overrides_split
from tests.test_case import tiny_backbone

# First word pieces carry a tag; [CLS], continuation pieces and padding are ignored.
LABELS = np.full((4, 7), IGNORED_LABEL, "int32")
LABELS[:, 1:5] = [[1, 0, 2, 0], [3, 3, 0, 1], [0, 4, 0, IGNORED_LABEL], [2, 0, 0, 1]]


class TestBertTokenClassifier(TestCase):
    def test_shared_checks(self):
        self.run_task_test(
            BertTokenClassifier,
            {"num_classes": 5},
            TINY_INPUTS,
            LABELS,
            unused_weights=("pooler_dense",),
        )

    def test_ignored_positions_do_not_change_the_loss(self):
        tagger = BertTokenClassifier(tiny_backbone(), num_classes=5)
        tagger.compile()
        logits = tagger(TINY_INPUTS)
        loss = tagger.loss
        relabelled = np.where(LABELS == IGNORED_LABEL, IGNORED_LABEL, LABELS)
        np.testing.assert_allclose(
            ops.convert_to_numpy(loss(LABELS, logits)),
            ops.convert_to_numpy(loss(relabelled, logits)),
        )
        real = LABELS != IGNORED_LABEL
        log_probs = ops.convert_to_numpy(ops.log_softmax(logits, axis=-1))
        picked = np.take_along_axis(log_probs, np.maximum(LABELS, 0)[..., None], -1)[..., 0]
        np.testing.assert_allclose(
            float(ops.convert_to_numpy(loss(LABELS, logits))), -picked[real].mean(), rtol=1e-5
        )


# Raw words with word-level tags, through an attached preprocessor.
ENTITIES = ["eu", "peter", "london", "walk", "bonn"]  # tag 1; "walk"+"##ing" is two pieces
OTHERS = ["rejects", "the", "call", "to", "boycott"]  # tag 0
PIECES = ["##ing", "##s"]
FILLER = [f"word{index}" for index in range(50 - len(SPECIAL_TOKENS) - 12)]
VOCABULARY = list(SPECIAL_TOKENS) + ENTITIES + OTHERS + PIECES + FILLER  # 50 tokens
SEQUENCE_LENGTH = 10


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCABULARY)


def _tagger(tokenizer, sequence_length=SEQUENCE_LENGTH, dropout=0.1):
    backbone = BertBackbone(**{**TRAINING_BACKBONE, "vocabulary_size": len(VOCABULARY)})
    return BertTokenClassifier(
        backbone,
        num_classes=2,
        dropout=dropout,
        preprocessor=BertPreprocessor(tokenizer, sequence_length),
    )


def _toy_tagging(count, seed=0):
    """Sentences of 2 to 5 words; entities (some "walking", two pieces) are tag 1."""
    rng = np.random.default_rng(seed)
    words, tags = [], []
    for _ in range(count):
        is_entity = rng.integers(0, 2, rng.integers(2, 6))
        words.append(
            [
                (str(rng.choice(ENTITIES)) + ("ing" if rng.random() < 0.3 else ""))
                if entity
                else str(rng.choice(OTHERS))
                for entity in is_entity
            ]
        )
        tags.append(is_entity.tolist())
    return words, tags


def _batches(dataset):
    return [tuple(np.asarray(part) for part in batch[1:]) + (batch[0],) for batch in dataset]


def test_word_labels_land_on_first_pieces_only(tokenizer):
    tagger = _tagger(tokenizer)
    words = [["EUs", "rejects", "walking"], ["Peter", "\x00", "calls"]]
    dataset = tagger.tagged_words_dataset(
        words, [[1, 0, 1], [1, 0, 0]], [[0.5, 1.0, 2.0], [3.0, 4.0, 5.0]]
    )
    ((labels, weights, features),) = _batches(dataset)
    ids = {token: index for index, token in enumerate(VOCABULARY)}
    # [CLS] eu ##s rejects walk ##ing [SEP]; [CLS] peter [UNK] call ##s [SEP]
    # ("\x00" is no piece at all, so it is tagged on [UNK]).
    np.testing.assert_array_equal(
        features["token_ids"][:, :7],
        [
            [2, ids["eu"], ids["##s"], ids["rejects"], ids["walk"], ids["##ing"], 3],
            [2, ids["peter"], 1, ids["call"], ids["##s"], 3, 0],
        ],
    )
    ignored = IGNORED_LABEL
    np.testing.assert_array_equal(
        labels,
        [
            [ignored, 1, ignored, 0, 1, ignored, ignored, ignored, ignored, ignored],
            [ignored, 1, 0, 0, ignored, ignored, ignored, ignored, ignored, ignored],
        ],
    )
    np.testing.assert_array_equal(
        weights,
        [
            [0, 0.5, 0, 1, 2, 0, 0, 0, 0, 0],
            [0, 3, 4, 5, 0, 0, 0, 0, 0, 0],
        ],
    )


@pytest.mark.parametrize(
    "sequence_length, kept_labels",
    [
        (6, [1, IGNORED_LABEL, 0, 1]),  # "walking" keeps its first piece, and its tag
        (5, [1, IGNORED_LABEL, 0]),
        (4, [1, IGNORED_LABEL]),
    ],
)
def test_truncation_keeps_labels_on_their_words(tokenizer, sequence_length, kept_labels):
    tagger = _tagger(tokenizer, sequence_length)
    words = tf.ragged.constant([["EUs", "rejects", "walking", "Bonn"]])
    ((labels, features),) = _batches(tagger.tagged_words_dataset(words, [[1, 0, 1, 1]]))
    assert labels.shape == (1, sequence_length)
    np.testing.assert_array_equal(labels[0], [IGNORED_LABEL, *kept_labels, IGNORED_LABEL])
    assert features["token_ids"][0, -1] == 3  # [SEP] closes the truncated sentence


@pytest.mark.one_backend  # text in tf.data, then a plain fit
@pytest.mark.parametrize("labels", [np.zeros((4, 6), "int32"), np.zeros(4, "int32")])
def test_labels_not_one_per_token_are_named_before_any_step(labels):
    tagger = BertTokenClassifier(tiny_backbone(), num_classes=5)
    tagger.compile()
    with pytest.raises(ValueError, match=r"y has the shape \(4,( 6)?\), but x\['token_ids'\] has"):
        tagger.fit(TINY_INPUTS, labels, epochs=1, verbose=0)


@pytest.mark.one_backend  # settled in the constructor
def test_one_tag_is_refused_before_a_loss_of_the_wrong_shape():
    with pytest.raises(ValueError, match="got num_classes 1; tagging needs two tags or more"):
        BertTokenClassifier(tiny_backbone(), num_classes=1)


def test_fit_does_not_warn_that_the_pooler_it_never_reads_has_no_gradients():
    tagger = BertTokenClassifier(tiny_backbone(), num_classes=5)
    tagger.compile()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tagger.fit(TINY_INPUTS, np.maximum(LABELS, 0), epochs=1, verbose=0)
    assert [str(w.message) for w in caught if "Gradients do not exist" in str(w.message)] == []


def test_fit_on_words_learns_a_toy_tagging_rule(tokenizer):
    words, tags = _toy_tagging(80)
    tagger = _tagger(tokenizer, dropout=0.0)
    tagger.compile(learning_rate=2e-2)
    history = tagger.fit(
        words, tags, batch_size=8, epochs=4, validation_split=0.2, verbose=0
    ).history
    assert history["loss"][-1] < 0.5 * history["loss"][0], history["loss"]
    assert history["val_loss"][-1] < history["val_loss"][0], history["val_loss"]

    held_out_words, held_out_tags = _toy_tagging(16, seed=1)
    logits = tagger.predict(held_out_words, batch_size=8, verbose=0)  # [sentences, seq, 2]
    _, word_ids = tagger.preprocessor.call_with_word_ids(held_out_words)
    expected = on_first_pieces(word_ids, tf.ragged.constant(held_out_tags), -1).numpy()
    first_pieces = expected >= 0
    accuracy = np.mean(np.argmax(logits, -1)[first_pieces] == expected[first_pieces])
    assert accuracy > 0.9, accuracy


@pytest.mark.one_backend  # what validates is settled before Keras' loop
def test_validation_data_of_words_overrides_validation_split_as_in_keras(tokenizer):
    words, tags = _toy_tagging(8)
    check_validation_data_overrides_split(
        _tagger(tokenizer, dropout=0.0), words, tags, _toy_tagging(4, seed=1)
    )


@pytest.mark.one_backend  # text in tf.data, then a plain fit
def test_evaluate_and_validation_data_on_words(tokenizer):
    words, tags = _toy_tagging(8)
    tagger = _tagger(tokenizer)
    tagger.compile()
    with pytest.raises(ValueError, match="word_labels must give one value per word"):
        tagger.fit(words, [tag[:-1] for tag in tags], verbose=0)
    with pytest.raises(ValueError, match="y holds the label 2 "):  # of num_classes=2
        tagger.fit(words, [[2] * len(tag) for tag in tags], verbose=0)
    validation = (words[:4], tags[:4])
    history = tagger.fit(words, tags, batch_size=4, validation_data=validation, verbose=0).history
    assert history["val_loss"][0] == pytest.approx(
        tagger.evaluate(*validation, verbose=0), rel=1e-5
    )
    dataset = tf.data.Dataset.from_tensor_slices(
        (tf.ragged.constant(words), tf.ragged.constant(tags))
    ).batch(4)
    assert tagger.evaluate(dataset, verbose=0) == pytest.approx(
        tagger.evaluate(words, tags, batch_size=4, verbose=0), rel=1e-5
    )
    np.testing.assert_allclose(
        tagger.predict(
            tf.data.Dataset.from_tensor_slices(tf.ragged.constant(words)).batch(4), verbose=0
        ),
        tagger.predict(words, batch_size=4, verbose=0),
        atol=1e-6,
    )


def test_predict_on_plain_strings_still_works(tokenizer):
    tagger = _tagger(tokenizer)
    sentences = ["EUs rejects walking", "Peter calls"]
    features = {name: value.numpy() for name, value in tagger.preprocessor(sentences).items()}
    np.testing.assert_allclose(
        tagger.predict(sentences, verbose=0), tagger.predict(features, verbose=0), atol=1e-6
    )


def test_labels_per_word_with_unsplit_texts_are_an_error_before_any_step(tokenizer):
    tagger = _tagger(tokenizer)
    tagger.compile()
    sentences = ["eu rejects the call", "peter walks"]
    with pytest.raises(ValueError, match=r"x holds texts not split into words, with labels in"):
        tagger.fit(sentences, [[1, 0, 0, 0], [1, 0]], verbose=0)
    with pytest.raises(ValueError, match=r"split into words, with labels of the shape \(2, 2\)"):
        tagger.evaluate(sentences, [[1, 0], [1, 0]], verbose=0)
    assert tagger.optimizer.iterations.numpy() == 0
    per_token = np.full((2, SEQUENCE_LENGTH), IGNORED_LABEL)  # labels per packed token pass
    per_token[:, 1] = 1
    tagger.fit(sentences, per_token, verbose=0)


@pytest.mark.one_backend  # where the inputs go is backend-free
def test_a_sentence_of_no_words_is_a_sentence_wherever_it_stands(tokenizer):
    tagger = _tagger(tokenizer)
    tagger.compile()
    logits = tagger.predict([[], ["EUs", "rejects"]], verbose=0)
    np.testing.assert_allclose(
        logits[1], tagger.predict([["EUs", "rejects"]], verbose=0)[0], atol=1e-6
    )
    np.testing.assert_allclose(logits[0], tagger.predict([[]], verbose=0)[0], atol=1e-6)
    tagger.fit([[], ["Peter", "calls"]], [[], [1, 0]], epochs=1, verbose=0)
    assert tagger.optimizer.iterations.numpy() == 1


@pytest.mark.one_backend  # where the inputs go is backend-free
def test_words_in_numpy_object_arrays_are_words_as_in_lists(tokenizer):
    words, tags = _toy_tagging(4)
    as_arrays = np.array(words, dtype=object), np.array(tags, dtype=object)
    assert as_arrays[0].shape == (4,)  # rows of many lengths, as numpy holds them
    tagger = _tagger(tokenizer, dropout=0.0)
    tagger.compile()
    np.testing.assert_allclose(
        tagger.predict(as_arrays[0], verbose=0), tagger.predict(words, verbose=0), atol=1e-6
    )
    assert tagger.evaluate(*as_arrays, verbose=0) == pytest.approx(
        tagger.evaluate(words, tags, verbose=0), rel=1e-6
    )
