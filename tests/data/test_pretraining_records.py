"""The record reader: the original's schema in, BertPretrainer batches out."""

import os

import numpy as np
import pytest

from bert_keras.data.offline_text import docstring_corpus
from bert_keras.data.offline_text import vocab_file
from bert_keras.data.pretraining_corpus import create_pretraining_data
from bert_keras.data.pretraining_instances import InstanceOptions
from bert_keras.data.pretraining_records import pretraining_dataset
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_pretrainer import BertPretrainer

SEQ_LENGTH, PREDICTIONS = 32, 5


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    directory = tmp_path_factory.mktemp("records")
    corpus = str(directory / "corpus.txt")
    docstring_corpus(corpus, 20_000)
    output = str(directory / "examples.tfrecord")
    options = InstanceOptions(
        max_seq_length=SEQ_LENGTH, max_predictions_per_seq=PREDICTIONS, dupe_factor=1
    )
    create_pretraining_data(
        corpus, output, vocab_file(), options, num_workers=1, input_mb_per_shard=0.01
    )
    return output + "-*"


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
    assert tuple(features["token_ids"].shape) == (4, SEQ_LENGTH)
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
