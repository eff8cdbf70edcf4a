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
what a service scoring text after text pays. Given `new_texts`, each side
then predicts those once: other texts, whose lengths differ, as a service
meets them (where XLA compiles each width, ours takes the widths compiled
before wherever they pad less than a compile costs). Given `small_calls`,
each side then predicts that many calls of `small_call_size` texts (the
first of `new_texts`, else of `texts`), as an interactive user or a service
of small requests calls it: there a call's fixed cost counts, and where XLA
compiles each shape, the widths of a new batch size compile too. Prints
the seconds of every call (the milliseconds of a small call, on average)
and the ratios ours / transformers.

    KERAS_BACKEND=jax python -m benchmarks.finetuning --parts=text_prediction
"""

import functools
import os

import keras

from benchmarks import common
from benchmarks import measurements

NUM_CLASSES = 2
CALL_NAMES = ("first s", "second s", "new texts s", "small call ms")
MEASURES = (
    "predict(texts) first call seconds",
    "predict(texts) second call seconds",
    "predict(texts) new texts call seconds",
    "predict(texts) small call milliseconds",
)


def measure(
    checkpoint,
    texts,
    description,
    batch_size,
    max_seq_length=128,
    new_texts=None,
    small_calls=0,
    small_call_size=8,
):
    """Times both sides predicting `texts` twice, `new_texts` once, then the small calls.

    Prints and returns the rows.
    """
    calls = [texts, texts] + ([new_texts] if new_texts is not None else [])
    pool = new_texts if new_texts is not None else texts
    starts = range(
        0, min(small_calls, len(pool) // small_call_size) * small_call_size, small_call_size
    )
    small = [pool[start : start + small_call_size] for start in starts]
    ours, theirs = (
        _per_call(side(checkpoint, calls + small, batch_size, max_seq_length), len(calls))
        for side in (_ours, _transformers)
    )
    kept = list(range(len(calls))) + ([len(CALL_NAMES) - 1] if small else [])
    names, measures = [CALL_NAMES[i] for i in kept], [MEASURES[i] for i in kept]
    print(
        f"Prediction on raw texts, backend {keras.backend.backend()}: {description} "
        f"({len(texts)} texts), batch {batch_size}, max_seq_length {max_seq_length}"
    )
    if small:
        print(f"then {len(small)} calls of {small_call_size} texts")
    header = f"{'implementation':<14}" + "".join(f" {call:>16}" for call in names)
    print(header)
    print("-" * len(header))
    for name, seconds in (("bert_keras", ours), ("transformers", theirs)):
        print(f"{name:<14}" + "".join(f" {value:>16.2f}" for value in seconds))
    ratios = ", ".join(f"{call} {mine / peer:.2f}" for call, mine, peer in zip(names, ours, theirs))
    print(f"time ratio bert_keras / transformers: {ratios}")
    settings = f"{description}, {len(texts)} texts, batch {batch_size}"
    settings += f", {len(small)} calls of {small_call_size} texts" if small else ""
    return [
        measurements.measurement(
            "finetuning",
            measure,
            mine,
            "transformers (dynamic padding)",
            peer,
            backend=keras.backend.backend(),
            higher_is_better=False,
            settings=settings,
        )
        for measure, mine, peer in zip(measures, ours, theirs)
    ]


def _per_call(seconds, num_large_calls):
    """The large calls' seconds, then the small calls' milliseconds a call (if any)."""
    large, small = seconds[:num_large_calls], seconds[num_large_calls:]
    return large + ([1000 * sum(small) / len(small)] if small else [])


def _ours(checkpoint, calls, batch_size, max_seq_length):
    """Seconds of `predict(texts)` of a classifier built from `checkpoint`, for each of `calls`."""
    from bert_keras.models.bert_classifier import BertClassifier

    model = BertClassifier.from_preset(
        checkpoint, num_classes=NUM_CLASSES, sequence_length=max_seq_length
    )
    return [
        common.seconds_of(functools.partial(model.predict, texts, batch_size=batch_size, verbose=0))
        for texts in calls
    ]


def _transformers(checkpoint, calls, batch_size, max_seq_length):
    """Seconds of a pass of transformers' tokenizer and classifier over each of `calls`."""
    import torch
    import transformers

    tokenizer = transformers.BertTokenizerFast(
        vocab_file=os.path.join(checkpoint, "vocab.txt"), do_lower_case=True
    )
    model = transformers.BertForSequenceClassification.from_pretrained(
        checkpoint, num_labels=NUM_CLASSES
    ).eval()

    @torch.inference_mode()
    def predict(texts):
        for first in range(0, len(texts), batch_size):
            inputs = tokenizer(
                texts[first : first + batch_size],
                padding=True,
                truncation=True,
                max_length=max_seq_length,
                return_tensors="pt",
            )
            model(**inputs).logits.numpy()

    return [common.seconds_of(functools.partial(predict, texts)) for texts in calls]
