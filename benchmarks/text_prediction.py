"""Prediction on raw texts: a task model's `predict(texts)` against transformers' loop.

What a user runs to score a list of sentences, from strings to logits, on
the same texts and checkpoint (a fresh two-class head on each side):

- bert_keras: `BertClassifier.from_preset(checkpoint).predict(texts)` in
  the current Keras backend: the texts packed once by the in-graph
  tokenizer, batched shortest first, each batch as wide as it needs
  (`BertTask.prediction_batching`), the answers back in the texts' order;
- transformers: `BertTokenizerFast` on the same vocab.txt and
  `BertForSequenceClassification`, batch by batch in the texts' order,
  each batch padded to its longest text (`padding=True`, truncation at
  `max_seq_length`), under `torch.inference_mode`.

Each side predicts every text twice: the first call includes what a first
call costs (tracing, XLA's compiles, the tokenizer's tables), the second
what a service scoring text after text pays. Prints the seconds of both and
the ratios ours / transformers.

    KERAS_BACKEND=jax python -m benchmarks.finetuning --parts=text_prediction
"""

import os

import keras

from benchmarks import common
from benchmarks import measurements

NUM_CLASSES = 2


def measure(checkpoint, texts, description, batch_size, max_seq_length=128):
    """Times both sides predicting `texts` twice; prints and returns the rows."""
    ours = _ours(checkpoint, texts, batch_size, max_seq_length)
    theirs = _transformers(checkpoint, texts, batch_size, max_seq_length)
    print(
        f"Prediction on raw texts, backend {keras.backend.backend()}: {description} "
        f"({len(texts)} texts), batch {batch_size}, max_seq_length {max_seq_length}"
    )
    header = f"{'implementation':<14} {'first s':>9} {'second s':>9}"
    print(header)
    print("-" * len(header))
    for name, seconds in (("bert_keras", ours), ("transformers", theirs)):
        print(f"{name:<14} {seconds[0]:>9.2f} {seconds[1]:>9.2f}")
    print(
        "time ratio bert_keras / transformers: first "
        f"{ours[0] / theirs[0]:.2f}, second {ours[1] / theirs[1]:.2f}"
    )
    settings = f"{description}, {len(texts)} texts, batch {batch_size}"
    return [
        measurements.measurement(
            "finetuning",
            measure,
            ours[call],
            "transformers (dynamic padding)",
            theirs[call],
            backend=keras.backend.backend(),
            higher_is_better=False,
            settings=settings,
        )
        for call, measure in enumerate(
            ("predict(texts) first call seconds", "predict(texts) second call seconds")
        )
    ]


def _ours(checkpoint, texts, batch_size, max_seq_length):
    """Seconds of two `predict(texts)` calls of a classifier built from `checkpoint`."""
    from bert_keras.models.bert_classifier import BertClassifier

    model = BertClassifier.from_preset(
        checkpoint, num_classes=NUM_CLASSES, sequence_length=max_seq_length
    )
    return [
        common.seconds_of(lambda: model.predict(texts, batch_size=batch_size, verbose=0))
        for _ in range(2)
    ]


def _transformers(checkpoint, texts, batch_size, max_seq_length):
    """Seconds of two passes of transformers' tokenizer and classifier over `texts`."""
    import torch
    import transformers

    tokenizer = transformers.BertTokenizerFast(
        vocab_file=os.path.join(checkpoint, "vocab.txt"), do_lower_case=True
    )
    model = transformers.BertForSequenceClassification.from_pretrained(
        checkpoint, num_labels=NUM_CLASSES
    ).eval()

    @torch.inference_mode()
    def predict():
        for first in range(0, len(texts), batch_size):
            inputs = tokenizer(
                texts[first : first + batch_size],
                padding=True,
                truncation=True,
                max_length=max_seq_length,
                return_tensors="pt",
            )
            model(**inputs).logits.numpy()

    return [common.seconds_of(predict) for _ in range(2)]
