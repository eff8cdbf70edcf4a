"""Record bytes written with numpy: exactly what TensorFlow serializes."""

import numpy as np
import pytest
import tensorflow as tf

from bert_keras.data.example_encoding import encode_examples
from bert_keras.data.pretraining_instances import Documents
from bert_keras.data.pretraining_instances import InstanceOptions
from bert_keras.data.pretraining_instances import SpecialTokens
from bert_keras.data.pretraining_instances import create_instances

VOCABULARY_SIZE = 1000
CLS, SEP, MASK = 2, 3, 4


@pytest.mark.parametrize(
    "whole_words, vocabulary_size, max_seq_length",
    # Ids and positions of one, two and three varint bytes; uint16 and int32 ids.
    [
        (False, VOCABULARY_SIZE, 32),
        (True, VOCABULARY_SIZE, 32),
        (False, 40_000, 200),
        (False, 100_000, 32),
    ],
)
def test_records_are_the_bytes_tensorflow_writes(whole_words, vocabulary_size, max_seq_length):
    options = InstanceOptions(
        max_seq_length=max_seq_length,
        max_predictions_per_seq=5,
        dupe_factor=1,
        do_whole_word_mask=whole_words,
    )
    rng = np.random.default_rng(1)
    documents = Documents.from_lists(
        [
            [
                list(rng.integers(5, vocabulary_size, rng.integers(1, 90)))
                for _ in range(rng.integers(1, 10))
            ]
            for _ in range(30)
        ]
    )
    special_tokens = SpecialTokens(
        CLS, SEP, MASK, vocabulary_size, np.arange(vocabulary_size) >= 900
    )
    instances = create_instances(documents, special_tokens, options, shard_index=0)
    assert instances.input_ids.max() >= 128 and (
        vocabulary_size < 16384 or instances.input_ids.max() >= 16384
    )
    assert instances.input_ids.dtype == (np.uint16 if vocabulary_size <= 65536 else np.int32)
    records = encode_examples(instances, rows_per_batch=16)
    assert len(records) == len(instances)
    for row in range(0, len(instances), 7):
        example = tf.train.Example()
        feature = example.features.feature
        for name in (
            "input_ids",
            "input_mask",
            "segment_ids",
            "masked_lm_positions",
            "masked_lm_ids",
        ):
            feature[name].int64_list.value.extend(getattr(instances, name)[row].tolist())
        feature["masked_lm_weights"].float_list.value.extend(
            instances.masked_lm_weights[row].tolist()
        )
        feature["next_sentence_labels"].int64_list.value.append(
            int(instances.next_sentence_labels[row])
        )
        assert records[row] == example.SerializeToString(deterministic=True)
