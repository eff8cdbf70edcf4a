"""Labels on first word pieces, windows over long sentences, one prediction per word."""

import numpy as np
import pytest

from bert_keras.finetuning.word_windows import tokenize_words
from bert_keras.finetuning.word_windows import window_bounds
from bert_keras.finetuning.word_windows import word_windows
from bert_keras.models.bert_token_classifier import IGNORED_LABEL
from bert_keras.text.tokenizer import BertTokenizer

CLS, SEP = 2, 3
VOCABULARY = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "john",
    "##son",
    "lives",
    "in",
    "york",
    "new",
    ".",
    "u",
    "s",
]


def test_label_goes_on_the_first_piece_of_each_word():
    tokenizer = BertTokenizer(VOCABULARY)
    pieces = tokenize_words(tokenizer, [["Johnson", "lives", "in", "U.S."]])
    # "U.S." is one CoNLL word but four pieces after the punctuation split.
    assert pieces == [[[5, 6], [7], [8], [12, 11, 13, 11]]]
    windows = word_windows(pieces, 12, CLS, SEP, word_labels=[[1, 0, 0, 2]])
    assert windows.features["token_ids"].tolist() == [[2, 5, 6, 7, 8, 12, 11, 13, 11, 3, 0, 0]]
    assert windows.labels.tolist() == [
        [IGNORED_LABEL, 1, IGNORED_LABEL, 0, 0, 2] + [IGNORED_LABEL] * 6
    ]
    assert windows.features["padding_mask"].tolist() == [[1] * 10 + [0] * 2]
    assert windows.owned == [[(0, 1), (0, 3), (0, 4), (0, 5)]]


def test_words_the_tokenizer_drops_become_unknown():
    tokenizer = BertTokenizer(VOCABULARY)
    assert tokenize_words(tokenizer, [["john", "\u200b", "xyz"]]) == [[[5], [1], [1]]]


@pytest.mark.parametrize("budget", [1, 2, 3, 5, 8])
def test_windows_cover_every_word_and_each_word_is_owned_by_a_window_holding_it(budget):
    counts = [1, 3, 2, 1, 1, 4, 1, 2, 1, 1, 1]
    windows, owners = window_bounds(counts, budget)
    assert windows[0][0] == 0 and windows[-1][1] == len(counts)
    for (_, end), (next_first, next_end) in zip(windows, windows[1:]):
        assert next_first <= end and next_end > end  # contiguous, always advancing
    for first, end in windows:
        assert sum(min(c, budget) for c in counts[first:end]) <= budget
    for word, owner in enumerate(owners):
        first, end = windows[owner]
        assert first <= word < end


def test_a_word_is_predicted_from_the_window_where_it_has_most_context():
    windows, owners = window_bounds([1] * 10, 4)
    assert windows == [(0, 4), (2, 6), (4, 8), (6, 10)]
    # Word 3 is at the edge of the first window but in the middle of the second.
    assert owners == [0, 0, 0, 1, 1, 2, 2, 3, 3, 3]


@pytest.mark.parametrize("budget", [1, 3, 8, 30])
def test_each_word_is_owned_by_the_first_window_of_most_context_among_all(budget):
    """The few windows holding a word are looked at; all of them would choose the same."""
    counts = [int(count) for count in np.random.default_rng(budget).integers(1, 6, 500)]
    windows, owners = window_bounds(counts, budget)
    offsets = np.concatenate([[0], np.cumsum([min(count, budget) for count in counts])])
    for word, owner in enumerate(owners):
        contexts = [
            min(offsets[word] - offsets[first], offsets[end] - offsets[word + 1])
            if first <= word < end
            else -1
            for first, end in windows
        ]
        assert owner == int(np.argmax(contexts))


def test_long_sentences_get_a_prediction_for_every_word():
    rng = np.random.default_rng(0)
    sentences = [
        [[7 + int(rng.integers(5))] * int(rng.integers(1, 4)) for _ in range(n)]
        for n in (1, 5, 40, 13)
    ]
    labels = [[int(rng.integers(3)) for _ in sentence] for sentence in sentences]
    windows = word_windows(sentences, 10, CLS, SEP, word_labels=labels)
    assert len(windows) > len(sentences)  # the long ones were split
    assert windows.features["token_ids"].shape == (len(windows), 10)
    assert np.all(windows.features["token_ids"][:, 0] == CLS)
    # Logits that put all their weight on each position's own label reproduce every word's label.
    num_classes = 3
    logits = np.zeros((len(windows), 10, num_classes))
    for window, row in enumerate(windows.labels):
        for position, label in enumerate(row):
            if label != IGNORED_LABEL:
                logits[window, position, label] = 1.0
    assert windows.word_predictions(logits) == labels
    for owned, sentence in zip(windows.owned, sentences):
        assert len(owned) == len(sentence)


def test_a_word_longer_than_a_window_keeps_its_first_pieces():
    windows = word_windows([[[7] * 9, [8]]], 5, CLS, SEP, word_labels=[[1, 2]])
    assert windows.features["token_ids"].tolist() == [[2, 7, 7, 7, 3], [2, 8, 3, 0, 0]]
    assert windows.word_predictions(np.eye(3)[[[0, 1, 0, 0, 0], [0, 2, 0, 0, 0]]]) == [[1, 2]]
