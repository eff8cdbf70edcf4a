"""SQuAD windows of ragged lengths: training and prediction seconds, ours against transformers.

A question and its context make windows of any length up to
max_seq_length (384): a short context fills part of one window, a long
one several. On the same windows (`squad_features` of a SQuAD v1.1 file
written from docstring prose, as the feature-building part writes it):

- bert_keras: a `SquadRun` on the checkpoint in the current Keras backend;
  two passes of training as `tasks.squad` trains (shuffled, each batch as
  long as its longest window, or where XLA compiles each width as the
  narrowest of the run's widths chosen by their cost), then every window predicted twice by length
  (`FineTuningRun.predict_features`, as `tasks.squad --do_predict`);
- transformers: `BertForQuestionAnswering` from the same checkpoint, a
  torch loop with the same recipe (AdamW, weight decay off biases and
  LayerNorm, linear warmup and decay, clipping at 1.0), batch size,
  shuffling and pass count, each batch padded to its longest window
  (run_qa.py with --pad_to_max_length=False; its default pads every
  window to 384); prediction in file order under `torch.inference_mode`.

Prints each training pass's seconds (the first includes XLA's compiling
and the input pipeline's start) and the prediction seconds (the first
includes compiling), with the ratios ours / transformers of the later
ones.

    KERAS_BACKEND=jax python -m benchmarks.finetuning --parts=squad_windows
"""

import json
import os
import time

import keras
import numpy as np
from absl import flags

from benchmarks import common
from benchmarks import measurements
from benchmarks.sst2_finetuning import seconds_per_pass

_QUESTIONS = flags.DEFINE_integer(
    "squad_window_questions",
    100,
    "Questions whose windows train and are predicted.",
    lower_bound=1,
)
_LEARNING_RATE = 5e-5
_PASSES = 2


def measure(checkpoint, squad_file, work_dir, batch_size, max_seq_length, doc_stride, query_length):
    """Times both sides on the windows of `squad_file`'s first questions; returns the rows."""
    from bert_keras.data.squad import read_squad
    from bert_keras.finetuning.squad import SquadRun

    path = _first_questions(squad_file, _QUESTIONS.value, work_dir)
    run = SquadRun(
        checkpoint,
        os.path.join(work_dir, "squad_windows"),
        max_seq_length=max_seq_length,
        doc_stride=doc_stride,
        max_query_length=query_length,
    )
    features = run.features(read_squad(path, is_training=True), is_training=True)
    ours = _ours(run, path, features, batch_size)
    theirs = _transformers(checkpoint, features, batch_size)
    lengths = features.padding_mask.sum(axis=1)
    print(
        f"SQuAD windows, backend {keras.backend.backend()}: {len(features)} windows of "
        f"{_QUESTIONS.value} questions, {lengths.min()} to {lengths.max()} tokens (mean "
        f"{lengths.mean():.0f}, max_seq_length {max_seq_length}), batch {batch_size}, "
        f"{_PASSES} training passes, lr {_LEARNING_RATE}"
    )
    header = (
        f"{'implementation':<14} {'pass 1 s':>9} {'pass 2 s':>9} {'predict 1 s':>12} "
        f"{'predict 2 s':>12}"
    )
    print(header)
    print("-" * len(header))
    for name, row in (("bert_keras", ours), ("transformers", theirs)):
        print(
            f"{name:<14} {row['passes'][0]:>9.2f} {row['passes'][-1]:>9.2f} "
            f"{row['predict'][0]:>12.2f} {row['predict'][-1]:>12.2f}"
        )
    print(
        "time ratio bert_keras / transformers: training pass "
        f"{ours['passes'][-1] / theirs['passes'][-1]:.2f}, prediction "
        f"{ours['predict'][-1] / theirs['predict'][-1]:.2f}"
    )
    settings = f"{len(features)} windows, batch {batch_size}, max_seq_length {max_seq_length}"
    return [
        measurements.measurement(
            "finetuning",
            measure,
            ours[key][-1],
            "transformers (dynamic padding)",
            theirs[key][-1],
            backend=keras.backend.backend(),
            higher_is_better=False,
            settings=settings,
        )
        for measure, key in (
            ("SQuAD windows training pass seconds", "passes"),
            ("SQuAD windows prediction seconds", "predict"),
        )
    ]


def _first_questions(squad_file, count, work_dir):
    """A SQuAD file of `squad_file`'s first `count` questions, with their contexts."""
    with open(squad_file, encoding="utf-8") as file:
        squad = json.load(file)
    paragraphs = []
    for paragraph in squad["data"][0]["paragraphs"]:
        if count <= 0:
            break
        paragraphs.append({**paragraph, "qas": paragraph["qas"][:count]})
        count -= len(paragraphs[-1]["qas"])
    path = os.path.join(work_dir, "squad_windows.json")
    with open(path, "w", encoding="utf-8") as file:
        json.dump(
            {"version": "1.1", "data": [{"title": "windows", "paragraphs": paragraphs}]}, file
        )
    return path


def _ours(run, path, features, batch_size):
    """Seconds of each training pass and of two predictions of every window."""
    from bert_keras.finetuning.run import HISTORY_FILE

    run.train(path, batch_size, _LEARNING_RATE, num_epochs=_PASSES, verbose=0)
    with open(os.path.join(run.output_dir, HISTORY_FILE), encoding="utf-8") as file:
        passes = seconds_per_pass([json.loads(line) for line in file], _PASSES)

    def predict():
        run.predict_features(run.model, features.inputs(), batch_size, per_token_outputs=True)

    return {"passes": passes, "predict": [common.seconds_of(predict) for _ in range(2)]}


def _transformers(checkpoint, features, batch_size):
    """The same passes and predictions with transformers' BertForQuestionAnswering."""
    import torch
    import transformers

    torch.manual_seed(0)
    model = transformers.BertForQuestionAnswering.from_pretrained(checkpoint)
    steps = -(-len(features) // batch_size) * _PASSES
    train_step = common.transformers_train_step(model, _LEARNING_RATE, steps, int(0.1 * steps))
    generator = torch.Generator().manual_seed(0)
    passes = []
    model.train()
    for _ in range(_PASSES):
        start = time.perf_counter()
        order = torch.randperm(len(features), generator=generator).numpy()
        for first in range(0, len(order), batch_size):
            rows = order[first : first + batch_size]
            inputs = _padded_to_longest(features, rows)
            inputs["start_positions"] = torch.tensor(
                features.start_positions[rows], dtype=torch.long
            )
            inputs["end_positions"] = torch.tensor(features.end_positions[rows], dtype=torch.long)
            train_step(inputs)
        passes.append(time.perf_counter() - start)
    model.eval()

    @torch.inference_mode()
    def predict():
        for first in range(0, len(features), batch_size):
            rows = np.arange(first, min(first + batch_size, len(features)))
            model(**_padded_to_longest(features, rows))

    return {"passes": passes, "predict": [common.seconds_of(predict) for _ in range(2)]}


def _padded_to_longest(features, rows):
    """transformers' inputs of the windows `rows`, cut to the longest of them."""
    import torch

    width = int(features.padding_mask[rows].sum(axis=1).max())
    return {
        name: torch.tensor(getattr(features, field)[rows, :width], dtype=torch.long)
        for name, field in (
            ("input_ids", "token_ids"),
            ("token_type_ids", "segment_ids"),
            ("attention_mask", "padding_mask"),
        )
    }
