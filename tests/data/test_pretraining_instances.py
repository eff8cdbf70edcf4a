"""The original algorithm on token arrays: pairs, truncation, masking."""

import random

import numpy as np

from bert_keras.data import pretraining_instances
from bert_keras.data.example_encoding import encode_examples
from bert_keras.data.pretraining_instances import Documents
from bert_keras.data.pretraining_instances import InstanceOptions
from bert_keras.data.pretraining_instances import create_instances
from bert_keras.data.pretraining_instances import num_predictions
from bert_keras.data.pretraining_instances import truncated_lengths
from tests.data.synthetic_documents import CLS
from tests.data.synthetic_documents import CONTINUATION_FROM
from tests.data.synthetic_documents import MASK
from tests.data.synthetic_documents import SEP
from tests.data.synthetic_documents import random_documents
from tests.data.synthetic_documents import special_tokens


def _original_truncation(a_length, b_length, max_num_tokens):
    while a_length + b_length > max_num_tokens:
        if a_length > b_length:
            a_length -= 1
        else:
            b_length -= 1
    return a_length, b_length


def test_truncated_lengths_match_the_original_loop():
    for max_num_tokens in (2, 3, 8, 13):
        for a_length in range(1, 30):
            b_lengths = np.arange(1, 30)
            a_final, b_final = truncated_lengths(np.full(29, a_length), b_lengths, max_num_tokens)
            expected = [_original_truncation(a_length, b, max_num_tokens) for b in b_lengths]
            assert list(zip(a_final.tolist(), b_final.tolist())) == expected


def _check_layout(instances, options):
    lengths = instances.input_mask.sum(axis=1)
    assert (instances.input_ids[:, 0] == CLS).all()
    rows = np.arange(len(instances))
    assert (instances.input_ids[rows, lengths - 1] == SEP).all()
    assert ((instances.input_ids == SEP).sum(axis=1) >= 2).all()
    # Padding is zero everywhere.
    assert (instances.input_ids[instances.input_mask == 0] == 0).all()
    assert (lengths <= options.max_seq_length).all()
    real = instances.masked_lm_weights > 0
    positions = instances.masked_lm_positions
    assert (positions[~real] == 0).all() and (instances.masked_lm_ids[~real] == 0).all()
    # Masked positions: sorted, distinct, inside the text, never [CLS] / [SEP].
    for row in range(0, len(instances), 13):
        chosen = positions[row, real[row]]
        assert (np.diff(chosen) > 0).all()
        assert (chosen > 0).all() and (chosen < lengths[row]).all()
        assert not np.isin(instances.masked_lm_ids[row, real[row]], [CLS, SEP]).any()


def test_token_masking_counts_and_split():
    options = InstanceOptions(max_seq_length=64, max_predictions_per_seq=8)
    instances = create_instances(random_documents(), special_tokens(), options, shard_index=3)
    _check_layout(instances, options)
    lengths = instances.input_mask.sum(axis=1)
    np.testing.assert_array_equal(
        instances.masked_lm_weights.sum(axis=1), num_predictions(lengths, options)
    )
    mask, random_token, kept = instances.masking_counts / instances.masked_lm_weights.sum()
    assert abs(mask - 0.8) < 0.01 and abs(random_token - 0.1) < 0.01 and abs(kept - 0.1) < 0.01


def test_whole_word_masking_treats_each_word_as_one():
    options = InstanceOptions(
        max_seq_length=64, max_predictions_per_seq=10, do_whole_word_mask=True
    )
    instances = create_instances(random_documents(), special_tokens(), options, shard_index=0)
    _check_layout(instances, options)
    mixed_words, joined_pieces = 0, 0
    for row in range(len(instances)):
        real = instances.masked_lm_weights[row] > 0
        positions = set(instances.masked_lm_positions[row, real].tolist())
        labels = dict(
            zip(
                instances.masked_lm_positions[row, real].tolist(),
                instances.masked_lm_ids[row, real].tolist(),
            )
        )
        for position in positions:
            # A continuation piece is masked with the piece before it.
            if (
                labels[position] >= CONTINUATION_FROM
                and position > 1
                and instances.input_ids[row, position - 1] != SEP
            ):
                assert position - 1 in positions
        # The pieces of a word are all [MASK] or none is.
        for position in positions:
            if labels[position] >= CONTINUATION_FROM and position - 1 in positions:
                is_mask = instances.input_ids[row, [position - 1, position]] == MASK
                mixed_words += is_mask[0] != is_mask[1]
                joined_pieces += 1
    # Only a random replacement that happens to draw [MASK] mixes (per piece,
    # as in the original, about a third of these pairs would).
    assert joined_pieces > 500 and mixed_words / joined_pieces < 0.01
    masked = instances.masked_lm_weights.sum(axis=1)
    wanted = num_predictions(instances.input_mask.sum(axis=1), options)
    # Words that do not fit are skipped, the next ones tried: rows fill up.
    assert (masked <= wanted).all() and (masked == wanted).mean() > 0.95
    mask, random_token, kept = instances.masking_counts / masked.sum()
    assert abs(mask - 0.8) < 0.02 and abs(random_token - 0.1) < 0.02 and abs(kept - 0.1) < 0.02


def _original_random_next_labels(documents, options, rng):
    """The original's chunking loop (google-research/bert), labels only."""
    labels = []
    for document in documents:
        target_length = options.max_num_tokens
        if rng.random() < options.short_seq_prob:
            target_length = rng.randint(2, options.max_num_tokens)
        chunk, length, i = [], 0, 0
        while i < len(document):
            chunk.append(document[i])
            length += len(document[i])
            if i == len(document) - 1 or length >= target_length:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                if len(chunk) == 1 or rng.random() < 0.5:
                    labels.append(1)
                    i -= len(chunk) - a_end
                else:
                    labels.append(0)
                chunk, length = [], 0
            i += 1
    return labels


def _original_pairs(documents, options, rng):
    """The original's loop, as token spans, drawing the random document among the others.

    google-research/bert `create_instances_from_document` (the one documented
    departure: the other document is `randrange(n - 1)`, skipping this one).
    """
    offsets, offset = [], 0
    for document in documents:
        offsets.append([])
        for sentence in document:
            offsets[-1].append(offset)
            offset += len(sentence)

    def span(document_index, first, last):  # sentences first..last inclusive
        end = offsets[document_index][last] + len(documents[document_index][last])
        return offsets[document_index][first], end

    pairs = []
    for document_index, document in enumerate(documents):
        target_seq_length = options.max_num_tokens
        if rng.random() < options.short_seq_prob:
            target_seq_length = rng.randint(2, options.max_num_tokens)
        chunk, length, i = [], 0, 0
        while i < len(document):
            chunk.append(i)
            length += len(document[i])
            if i == len(document) - 1 or length >= target_seq_length:
                a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
                a_start, a_stop = span(document_index, chunk[0], chunk[a_end - 1])
                if len(chunk) == 1 or rng.random() < 0.5:
                    target_b_length = target_seq_length - (a_stop - a_start)
                    other = rng.randrange(len(documents) - 1)
                    other += other >= document_index
                    random_start = rng.randint(0, len(documents[other]) - 1)
                    b_length = 0
                    for j in range(random_start, len(documents[other])):
                        b_length += len(documents[other][j])
                        if b_length >= target_b_length:
                            break
                    pairs.append((a_start, a_stop, *span(other, random_start, j), 1))
                    i -= len(chunk) - a_end
                else:
                    pairs.append(
                        (a_start, a_stop, *span(document_index, chunk[a_end], chunk[-1]), 0)
                    )
                chunk, length = [], 0
            i += 1
    return pairs


def test_sentence_pairs_are_the_original_loops_draw_for_draw():
    rng = random.Random(3)
    documents = [[[7] * rng.randint(1, 70) for _ in range(rng.randint(1, 12))] for _ in range(300)]
    options = InstanceOptions(max_seq_length=64, short_seq_prob=0.3)
    flat = Documents.from_lists(documents)
    ours = pretraining_instances._sentence_pairs(
        flat.sentence_starts.tolist(), flat.document_starts.tolist(), options, random.Random(5)
    )
    assert ours.tolist() == [
        list(pair) for pair in _original_pairs(documents, options, random.Random(5))
    ]
    assert 0 < ours[:, 4].mean() < 1


def test_next_sentence_fraction_follows_the_original():
    rng = random.Random(1)
    documents = [[[7] * rng.randint(3, 40) for _ in range(rng.randint(1, 30))] for _ in range(300)]
    options = InstanceOptions(max_seq_length=64, dupe_factor=3)
    ours = create_instances(
        Documents.from_lists(documents), special_tokens(), options, shard_index=0
    )
    original = [
        label
        for _ in range(options.dupe_factor)
        for label in _original_random_next_labels(documents, options, rng)
    ]
    assert abs(ours.next_sentence_labels.mean() - np.mean(original)) < 0.015
    assert abs(len(ours) / len(original) - 1) < 0.02
    # One-sentence documents: every pair is random, as in the original.
    documents = Documents.from_lists([[[7] * 10] for _ in range(50)])
    instances = create_instances(documents, special_tokens(), options, shard_index=0)
    assert instances.next_sentence_labels.all()


def test_more_predictions_than_positions():
    options = InstanceOptions(max_seq_length=8, max_predictions_per_seq=12, masked_lm_prob=0.9)
    instances = create_instances(random_documents(20), special_tokens(), options, shard_index=0)
    assert instances.masked_lm_positions.shape == (len(instances), 12)
    _check_layout(instances, options)
    # All but [CLS] and the two [SEP]: the original stops when none is left.
    np.testing.assert_array_equal(
        instances.masked_lm_weights.sum(axis=1), instances.input_mask.sum(axis=1) - 3
    )
    records = encode_examples(instances)
    assert len(records) == len(instances)


def test_masked_lm_prob_zero_masks_one_token_and_one_masks_all_it_may():
    documents = random_documents(20)
    for probability, expected in [(0.0, lambda length: 1), (1.0, lambda length: length - 3)]:
        options = InstanceOptions(
            max_seq_length=8, max_predictions_per_seq=8, masked_lm_prob=probability
        )
        options.validate()  # the original's range: both ends allowed
        instances = create_instances(documents, special_tokens(), options, shard_index=0)
        _check_layout(instances, options)
        np.testing.assert_array_equal(
            instances.masked_lm_weights.sum(axis=1), expected(instances.input_mask.sum(axis=1))
        )


def test_shards_depend_only_on_seed_and_index():
    documents, options = random_documents(40), InstanceOptions(max_seq_length=32, dupe_factor=2)
    first = encode_examples(create_instances(documents, special_tokens(), options, shard_index=5))
    again = encode_examples(create_instances(documents, special_tokens(), options, shard_index=5))
    other = encode_examples(create_instances(documents, special_tokens(), options, shard_index=6))
    assert first == again and first != other
