"""Pretraining on real English: installed packages' docstrings, the real uncased BERT vocabulary.

The slowest pretraining test (a few hundred steps), run under one backend
only to keep the suite short; every backend trains the same run in
tests/pretraining/test_pretraining_run.py. Select it alone with `-k real_corpus`.
"""

import collections
import os

import numpy as np
import pytest

from bert_keras.data.offline_text import docstring_corpus
from bert_keras.data.offline_text import vocab_file
from bert_keras.data.pretraining_corpus import create_pretraining_data
from bert_keras.data.pretraining_instances import InstanceOptions
from bert_keras.data.pretraining_records import pretraining_dataset
from bert_keras.pretraining.pretraining_run import PretrainingConfig
from bert_keras.pretraining.pretraining_run import PretrainingRun

pytestmark = pytest.mark.large

SEQ_LENGTH, PREDICTIONS, BATCH_SIZE, STEPS = 64, 10, 16, 300
SMALL_BACKBONE = {
    "vocabulary_size": 30522,
    "num_layers": 2,
    "num_heads": 2,
    "hidden_dim": 64,
    "intermediate_dim": 256,
    "max_sequence_length": 64,
}


def split_documents(path, train_path, eval_path):
    """The last tenth of the documents (blank-line separated) is held out."""
    documents = open(path, encoding="utf-8").read().split("\n\n")
    held_out = len(documents) // 10
    open(train_path, "w", encoding="utf-8").write("\n\n".join(documents[:-held_out]))
    open(eval_path, "w", encoding="utf-8").write("\n\n".join(documents[-held_out:]))


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    directory = tmp_path_factory.mktemp("real_corpus")
    corpus = str(directory / "docstrings.txt")
    docstring_corpus(corpus, 1_500_000)
    split_documents(corpus, str(directory / "train.txt"), str(directory / "eval.txt"))
    options = InstanceOptions(
        max_seq_length=SEQ_LENGTH, max_predictions_per_seq=PREDICTIONS, dupe_factor=2
    )
    for split in ("train", "eval"):
        create_pretraining_data(
            str(directory / f"{split}.txt"),
            str(directory / f"{split}.tfrecord"),
            vocab_file(),
            options,
            num_workers=1,
            input_mb_per_shard=0.5,
        )
    return str(directory / "train.tfrecord-*"), str(directory / "eval.tfrecord-*")


def majority_rates(pattern):
    """Accuracy of always predicting the most frequent masked token, and the most frequent NSP label."""
    labels, next_sentence = collections.Counter(), collections.Counter()
    for _, batch in pretraining_dataset(
        pattern, SEQ_LENGTH, PREDICTIONS, 256, drop_remainder=False
    ):
        weights = batch["masked_lm_weights"].numpy() > 0
        labels.update(batch["masked_lm_ids"].numpy()[weights].tolist())
        next_sentence.update(batch["next_sentence_labels"].numpy().tolist())
    return (
        labels.most_common(1)[0][1] / sum(labels.values()),
        next_sentence.most_common(1)[0][1] / sum(next_sentence.values()),
    )


@pytest.mark.one_backend  # a learning check
def test_real_corpus_pretraining_learns_masked_words_and_next_sentences(records, tmp_path):
    train_records, eval_records = records
    run = PretrainingRun(
        PretrainingConfig(
            input_file=train_records,
            output_dir=str(tmp_path),
            backbone_config=SMALL_BACKBONE,
            max_seq_length=SEQ_LENGTH,
            max_predictions_per_seq=PREDICTIONS,
            train_batch_size=BATCH_SIZE,
            num_train_steps=STEPS,
            num_warmup_steps=30,
            learning_rate=2e-3,
            save_checkpoints_steps=50,
        )
    )
    history = run.train(verbose=0)
    # An untrained model's loss is about ln(vocabulary size) = 10.3.
    assert history[-1]["masked_lm_loss"] < 0.7 * np.log(SMALL_BACKBONE["vocabulary_size"])
    assert history[-1]["masked_lm_loss"] < history[0]["masked_lm_loss"]
    unigram_accuracy, majority_next_sentence = majority_rates(eval_records)
    held_out = run.model.evaluate(
        pretraining_dataset(eval_records, SEQ_LENGTH, PREDICTIONS, BATCH_SIZE),
        return_dict=True,
        verbose=0,
    )
    print(
        f"\nheld out: {held_out}; unigram accuracy {unigram_accuracy:.3f}, "
        f"NSP majority {majority_next_sentence:.3f}; history: {history}"
    )
    # At this length the model has learnt word frequencies (its held-out accuracy is
    # about that of always guessing the most frequent word, 0.061: 0.058 measured on
    # torch, above 0.061 on tensorflow) and starts on context; the next-sentence head
    # is at about the majority rate (see the report for longer runs).
    assert held_out["masked_lm_loss"] < 0.7 * np.log(SMALL_BACKBONE["vocabulary_size"])
    assert held_out["masked_lm_accuracy"] > 0.8 * unigram_accuracy
    assert held_out["next_sentence_accuracy"] > 0.5
    assert np.isfinite(held_out["loss"])
    assert os.path.isdir(tmp_path / "export")
