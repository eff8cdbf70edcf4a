"""Small random pretraining records and a tiny backbone config, for fast runs."""

import json
import os

import numpy as np
import tensorflow as tf

from bert_keras.checkpoints import original
from bert_keras.data.pretraining_records import original_feature_spec
from tests.test_case import TRAINING_BACKBONE


def write_records(
    path,
    num_examples,
    max_seq_length=16,
    max_predictions_per_seq=3,
    seed=0,
    vocabulary_size=TRAINING_BACKBONE["vocabulary_size"],
):
    """Writes `num_examples` records of the original layout; returns `path`.

    Each record holds 1 to `max_predictions_per_seq` real predictions, the
    rest padded as the original pads them (position, id and weight 0).
    """
    rng = np.random.default_rng(seed)
    spec = original_feature_spec(max_seq_length, max_predictions_per_seq)
    os.makedirs(os.path.dirname(os.fspath(path)), exist_ok=True)
    with tf.io.TFRecordWriter(os.fspath(path)) as writer:
        for index in range(num_examples):
            length = int(rng.integers(max_seq_length // 2, max_seq_length + 1))
            input_ids = np.pad(
                rng.integers(5, vocabulary_size, length), (0, max_seq_length - length)
            )
            positions = rng.choice(np.arange(1, length), max_predictions_per_seq, replace=False)
            real = np.arange(max_predictions_per_seq) < rng.integers(1, max_predictions_per_seq + 1)
            values = {
                "input_ids": input_ids,
                "input_mask": np.pad(np.ones(length, int), (0, max_seq_length - length)),
                "segment_ids": np.pad(
                    (np.arange(length) >= length // 2).astype(int), (0, max_seq_length - length)
                ),
                "masked_lm_positions": np.where(real, positions, 0),
                "masked_lm_ids": np.where(real, input_ids[positions], 0),
                "masked_lm_weights": real.astype("float32"),
                "next_sentence_labels": [index % 2],
            }
            example = tf.train.Example()
            for name, feature_spec in spec.items():
                feature = example.features.feature[name]
                target = (
                    feature.float_list if feature_spec.dtype == tf.float32 else feature.int64_list
                )
                target.value.extend(np.asarray(values[name]).tolist())
            writer.write(example.SerializeToString())
    return os.fspath(path)


def write_bert_config(path, backbone=TRAINING_BACKBONE):
    """Writes `backbone`, modeling.BertConfig's defaults for the rest, as bert_config.json; returns `path`."""
    defaults = {ours: default for _, ours, default in original.CONFIG_TABLE}
    config = original.config_json(
        {
            **defaults,
            "attention_dropout": None,
            "activation": "gelu_approximate",
            "layer_norm_epsilon": original.LAYER_NORM_EPSILON,
            **backbone,
        }
    )
    with open(path, "w", encoding="utf-8") as file:
        json.dump(config, file)
    return os.fspath(path)
