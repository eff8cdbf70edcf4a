"""The tagger export's in-graph windows are `window_bounds`' windows, sentence by sentence."""

import numpy as np
import pytest
import tensorflow as tf

from bert_keras.export.tagging import sentence_windows
from bert_keras.finetuning.word_windows import window_bounds


def _in_graph(budget):
    """`sentence_windows` traced as the export traces it: a while loop, any batch size."""
    return tf.function(
        lambda piece_counts: sentence_windows(piece_counts, budget),
        input_signature=[tf.RaggedTensorSpec([None, None], tf.int64)],
        autograph=False,
    )


@pytest.mark.parametrize("budget", [1, 2, 3, 4, 5, 7, 10, 126])
def test_windows_and_owners_are_window_bounds_on_random_sentences(budget):
    rng = np.random.default_rng(budget)
    # Long and short sentences in one batch, words of one piece to several
    # more than the budget, and sentences of no words.
    sentences = [
        rng.integers(1, budget + 4, size=rng.integers(0, 40)).tolist() for _ in range(60)
    ] + [[budget + 5] * 9, [1] * 3 * budget, []]
    firsts, ends, owners = _in_graph(budget)(tf.ragged.constant(sentences, tf.int64))
    for counts, first, end, owner in zip(
        sentences, firsts.to_list(), ends.to_list(), owners.to_list()
    ):
        windows, expected_owners = window_bounds(counts, budget)
        assert list(zip(first, end)) == windows, (counts, budget)
        assert owner == expected_owners, (counts, budget)
    assert max(len(row) for row in firsts.to_list()) > 2  # some sentences take several windows


def test_an_empty_batch_has_no_windows():
    firsts, ends, owners = _in_graph(4)(tf.ragged.constant([], tf.int64, ragged_rank=1))
    assert firsts.to_list() == ends.to_list() == owners.to_list() == []
