"""The record reader: the original's schema in, BertPretrainer batches out."""

import logging
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras.data.offline_text import docstring_corpus
from bert_keras.data.offline_text import vocab_file
from bert_keras.data.pretraining_corpus import create_pretraining_data
from bert_keras.data.pretraining_instances import InstanceOptions
from bert_keras.data.pretraining_records import pretraining_dataset
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_pretrainer import BertPretrainer

SEQ_LENGTH, PREDICTIONS = 32, 5


def _records(directory, short_documents=False):
    corpus = str(directory / "corpus.txt")
    docstring_corpus(corpus, 20_000)
    if short_documents:
        _cut_every_other_document(corpus)
    output = str(directory / "examples.tfrecord")
    options = InstanceOptions(
        max_seq_length=SEQ_LENGTH, max_predictions_per_seq=PREDICTIONS, dupe_factor=1
    )
    create_pretraining_data(
        corpus, output, vocab_file(), options, num_workers=1, input_mb_per_shard=0.01
    )
    return output + "-*"


def _cut_every_other_document(corpus):
    """Documents of two sentences; in every other one, sentences of four words."""
    with open(corpus, encoding="utf-8") as file:
        sentences = [line for line in file.read().splitlines() if line.strip()]
    documents = []
    for index in range(0, len(sentences) - 1, 2):
        pair = sentences[index : index + 2]
        if index % 4 == 0:
            pair = [" ".join(sentence.split()[:4]) for sentence in pair]
        documents.append("\n".join(pair))
    with open(corpus, "w", encoding="utf-8") as file:
        file.write("\n\n".join(documents) + "\n")


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    return _records(tmp_path_factory.mktemp("records"))


@pytest.fixture(scope="module")
def mixed_length_records(tmp_path_factory):
    """Records of which about half hold short sequences, half SEQ_LENGTH long ones."""
    return _records(tmp_path_factory.mktemp("mixed"), short_documents=True)


def test_batches_have_the_pretrainer_layout(records):
    features, labels = next(
        iter(pretraining_dataset(records, SEQ_LENGTH, PREDICTIONS, batch_size=4))
    )
    assert sorted(features) == ["masked_positions", "padding_mask", "segment_ids", "token_ids"]
    assert {name: tuple(tensor.shape) for name, tensor in labels.items()} == {
        "masked_lm_ids": (4, PREDICTIONS),
        "masked_lm_weights": (4, PREDICTIONS),
        "next_sentence_labels": (4,),
    }
    assert all(tensor.dtype == "int32" for tensor in features.values())
    assert features["token_ids"].shape[1] in (16, SEQ_LENGTH)  # the longest, rounded up to 16
    assert features["padding_mask"].numpy().sum(axis=1).max() > features["token_ids"].shape[1] - 16
    assert labels["masked_lm_weights"].dtype == "float32"
    token_ids = features["token_ids"].numpy()
    assert (token_ids[:, 0] == 101).all()
    np.testing.assert_array_equal(features["padding_mask"].numpy(), token_ids != 0)


@pytest.mark.parametrize(
    "expected, message",
    [
        ((64, PREDICTIONS), f"records have max_seq_length {SEQ_LENGTH} but 64 was expected"),
        ((SEQ_LENGTH, 7), f"records have max_predictions_per_seq {PREDICTIONS} but 7 was expected"),
    ],
)
def test_other_lengths_name_the_file_and_both_numbers(records, expected, message):
    with pytest.raises(ValueError, match=message) as error:
        pretraining_dataset(records, *expected, batch_size=4)
    assert os.path.basename(records[:-2]) in str(error.value)


def test_a_file_that_is_not_records_is_named(records, tmp_path):
    # e.g. a side file beside the records (older versions of the data tool left their
    # progress log there), caught by a glob like "examples.tfrecord*"
    not_records = tmp_path / "examples.tfrecord.progress"
    not_records.write_text("shard 0 done\n")
    with pytest.raises(ValueError, match="examples.tfrecord.progress is not a file of TFRecords"):
        pretraining_dataset(f"{records},{not_records}", SEQ_LENGTH, PREDICTIONS, batch_size=4)


def test_every_glob_must_match_a_file(records, tmp_path):
    # As the programs' --input_file: a typo must not drop part of the data unseen.
    with pytest.raises(FileNotFoundError) as error:
        pretraining_dataset(f"{records},{tmp_path}/TYPO*", SEQ_LENGTH, PREDICTIONS, batch_size=4)
    assert str(error.value) == f"file_pattern: no file matches '{tmp_path}/TYPO*'."


def test_overlapping_globs_read_each_file_once_and_are_warned_of(records, caplog):
    first_shard = sorted(tf.io.gfile.glob(records))[0]
    with caplog.at_level(logging.WARNING):
        assert count_examples(f"{records},{first_shard}") == count_examples(records)
    assert (
        f"file_pattern's patterns match {os.path.realpath(first_shard)} more than once; each "
        "file is read once."
    ) in caplog.messages


def count_examples(file_pattern):
    batches = pretraining_dataset(
        file_pattern, SEQ_LENGTH, PREDICTIONS, batch_size=64, drop_remainder=False
    )
    return sum(int(labels["next_sentence_labels"].shape[0]) for _, labels in batches)


def test_files_that_hold_no_record_are_refused_unless_others_do(records, tmp_path):
    # Repeated, records files without a record would be read forever.
    empty = [tmp_path / "a.tfrecord", tmp_path / "b.tfrecord"]
    for path in empty:
        path.write_bytes(b"")
    with pytest.raises(ValueError) as error:
        pretraining_dataset(str(tmp_path / "*.tfrecord"), SEQ_LENGTH, PREDICTIONS, batch_size=4)
    assert str(error.value) == f"{empty[0]}, {empty[1]} hold no records: there is nothing to read."
    assert count_examples(f"{records},{empty[0]}") == count_examples(records)


def test_gzip_and_plain_files_are_read_together(records, tmp_path):
    plain = sorted(tf.io.gfile.glob(records))[0]
    gzipped = str(tmp_path / "examples.tfrecord.gz")
    with tf.io.TFRecordWriter(gzipped, tf.io.TFRecordOptions(compression_type="GZIP")) as writer:
        for record in tf.data.TFRecordDataset(plain):
            writer.write(record.numpy())
    assert count_examples(f"{gzipped},{plain}") == 2 * count_examples(plain)


def test_a_pretrainer_fits_on_the_records(records):
    backbone = BertBackbone(
        vocabulary_size=30522,
        num_layers=1,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=SEQ_LENGTH,
    )
    pretrainer = BertPretrainer(backbone)
    pretrainer.compile(optimizer="adam")
    dataset = pretraining_dataset(
        records, SEQ_LENGTH, PREDICTIONS, batch_size=8, shuffle=True, seed=1
    )
    history = pretrainer.fit(dataset.take(3), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def _pairs_of_batches(records, batch_size):
    """The same batches, cut to their longest record (rounded up to 8) and padded to SEQ_LENGTH."""
    return zip(
        pretraining_dataset(
            records, SEQ_LENGTH, PREDICTIONS, batch_size, drop_remainder=False, pad_to_multiple_of=8
        ),
        pretraining_dataset(
            records,
            SEQ_LENGTH,
            PREDICTIONS,
            batch_size,
            drop_remainder=False,
            pad_to_multiple_of=None,
        ),
    )


def test_batches_of_short_records_are_cut_to_their_longest_record(mixed_length_records):
    widths = []
    for (features, labels), (full, full_labels) in _pairs_of_batches(mixed_length_records, 2):
        width = features["token_ids"].shape[1]
        widths.append(width)
        longest = int(full["padding_mask"].numpy().sum(axis=1).max())
        assert width % 8 == 0 and longest <= width < longest + 8
        for name in ("token_ids", "segment_ids", "padding_mask"):
            np.testing.assert_array_equal(features[name], full[name][:, :width])
            assert not full[name][:, width:].numpy().any()
        np.testing.assert_array_equal(features["masked_positions"], full["masked_positions"])
        for name, tensor in labels.items():
            np.testing.assert_array_equal(tensor, full_labels[name])
    assert len(set(widths)) > 1 and min(widths) < SEQ_LENGTH


def _pretrainer():
    backbone = BertBackbone(
        vocabulary_size=30522,
        num_layers=2,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=SEQ_LENGTH,
        dropout=0.0,
    )
    pretrainer = BertPretrainer(backbone)
    pretrainer.compile(optimizer=keras.optimizers.SGD(0.5))
    return pretrainer


@pytest.mark.every_backend
def test_cut_batches_give_the_full_length_losses_and_updates(mixed_length_records):
    cut, full = next(
        tf.nest.map_structure(lambda tensor: tensor.numpy(), pair)
        for pair in _pairs_of_batches(mixed_length_records, 2)
        if pair[0][0]["token_ids"].shape[1] < SEQ_LENGTH
    )
    keras.utils.set_random_seed(3)
    on_cut = _pretrainer()
    on_full = _pretrainer()
    on_full.set_weights(on_cut.get_weights())
    np.testing.assert_allclose(
        on_cut.test_on_batch(*cut), on_full.test_on_batch(*full), rtol=1e-5, atol=1e-6
    )
    on_cut.train_on_batch(*cut)
    on_full.train_on_batch(*full)
    for after_cut, after_full in zip(on_cut.get_weights(), on_full.get_weights()):
        np.testing.assert_allclose(after_cut, after_full, rtol=1e-4, atol=1e-6)


def _bucketed(records, **options):
    return pretraining_dataset(
        records,
        SEQ_LENGTH,
        PREDICTIONS,
        batch_size=4,
        shuffle=True,
        seed=1,
        pad_to_multiple_of=8,
        bucket_by_length=True,
        **options,
    )


def _rows(features):
    return [tuple(row[row > 0]) for row in features["token_ids"].numpy()]


def test_bucketed_batches_hold_records_of_one_rounded_length_each_once(mixed_length_records):
    plain = pretraining_dataset(
        mixed_length_records, SEQ_LENGTH, PREDICTIONS, batch_size=4, drop_remainder=False
    )
    bucketed = list(_bucketed(mixed_length_records, drop_remainder=False))
    leftover_batches = SEQ_LENGTH // 8  # one bucket's leftovers each, at most
    for position, (features, labels) in enumerate(bucketed):
        rounded = -(-features["padding_mask"].numpy().sum(axis=1) // 8) * 8
        width = features["token_ids"].shape[1]
        assert rounded.max() == width, (rounded, width)
        if position < len(bucketed) - leftover_batches:
            assert (rounded == width).all(), (rounded, width)
        assert features["masked_positions"].shape[1] == labels["masked_lm_ids"].shape[1]
    assert len({features["token_ids"].shape[1] for features, _ in bucketed}) > 2
    every_record = sorted(row for features, _ in plain for row in _rows(features))
    assert sorted(row for features, _ in bucketed for row in _rows(features)) == every_record
    assert len(bucketed) == len(list(plain))  # the leftovers pooled: no extra batches


def test_a_resumed_bucketed_stream_goes_on_as_the_uninterrupted_one(mixed_length_records):
    uninterrupted = list(_bucketed(mixed_length_records, repeat=True).take(9))
    resumed = list(_bucketed(mixed_length_records, repeat=True, skip_batches=4).take(5))
    for (features, labels), (expected, expected_labels) in zip(resumed, uninterrupted[4:]):
        tf.nest.map_structure(
            np.testing.assert_array_equal, (features, labels), (expected, expected_labels)
        )
