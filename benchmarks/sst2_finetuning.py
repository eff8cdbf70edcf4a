"""The real-data fine-tuning case: whole programs on an SST-2 subset, ours against transformers.

What a user runs first, timed end to end: fine-tune the checkpoint on the
first `--sst2_train_examples` SST-2 train sentences (`../shared/data/sst2`),
then score SST-2 dev.

- bert_keras: `python -m tasks.classify --do_train --do_eval` in a child
  process per Keras backend (`--sst2_backends`), each batch padded to its
  longest sentence, or where XLA compiles each width (jax) to the
  narrowest of the few widths that the run chose by their cost;
- transformers: `BertForSequenceClassification` from the same checkpoint,
  the fast tokenizer with dynamic padding (each batch to its longest
  sentence, as `DataCollatorWithPadding` does), a plain torch loop with the
  same recipe (AdamW, weight decay 0.01 off biases and LayerNorm, linear
  warmup over 10% then decay, clipping at 1.0), the same batch size,
  epochs, learning rate and shuffling seed, in a child process too.

Prints each program's seconds (start to exit: loading, tokenising,
training, scoring), its first and later training epochs' seconds (the
difference is what compiling and the first pass cost), the seconds its
scoring of the dev set took (reading, tokenising, predicting, compiling
the prediction step where a backend compiles), dev accuracy, and the
ratio to transformers. `--sst2_bucket_by_length` adds a run per backend
with `--bucket_by_length`; `--sst2_max_batch_widths=N` gives every
bert_keras run `--max_batch_widths=N` (it bounds the widths XLA compiles,
on jax here; the other backends take each batch at its longest sentence).
`--sst2_jax_compilation_cache` gives each jax run a `--compilation_cache_dir`
of its own and then runs it again, its compiled programs read from there
(a "warm cache" row): what a rerun with other seeds costs.

    python -m benchmarks.finetuning --parts=sst2
"""

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import typing

from absl import flags

from benchmarks import common
from benchmarks import flag_checks
from benchmarks import measurements
from benchmarks.common import REPOSITORY

SST2_DIR = os.path.join(os.path.dirname(REPOSITORY), "shared", "data", "sst2")

_TRAIN_EXAMPLES = flags.DEFINE_integer(
    "sst2_train_examples", 4000, "SST-2 train sentences to fine-tune on.", lower_bound=1
)
_EPOCHS = flags.DEFINE_integer("sst2_epochs", 2, "Fine-tuning epochs.", lower_bound=1)
_LEARNING_RATE = flags.DEFINE_float("sst2_learning_rate", 5e-5, "Peak learning rate.")
flag_checks.require_positive(_LEARNING_RATE)
_BACKENDS = flags.DEFINE_list(
    "sst2_backends", ["jax", "tensorflow", "torch"], "Keras backends to run tasks.classify on."
)
flag_checks.require_known_names(_BACKENDS, common.KERAS_BACKENDS)
flag_checks.require_some(_BACKENDS)
_SEED = flags.DEFINE_integer(
    "sst2_seed", 0, "Seed of every program's initialisation, shuffling and dropout."
)
_BUCKET_BY_LENGTH = flags.DEFINE_boolean(
    "sst2_bucket_by_length", False, "Also run tasks.classify --bucket_by_length per backend."
)
_MAX_BATCH_WIDTHS = flags.DEFINE_integer(
    "sst2_max_batch_widths",
    None,
    "tasks.classify --max_batch_widths for every bert_keras run; default: the program's.",
    lower_bound=1,
)
_JAX_COMPILATION_CACHE = flags.DEFINE_boolean(
    "sst2_jax_compilation_cache",
    False,
    "Give each jax run a fresh --compilation_cache_dir, then run it again with the cache warm.",
)
_SEQUENCE_LENGTH = 128
_BATCH_SIZE = 32


def measure(checkpoint):
    """Runs every program on the SST-2 subset, prints seconds, accuracy and ratios, returns rows.

    The rows (`benchmarks.measurements`) hold each bert_keras run's seconds and dev accuracy
    beside transformers'.
    """
    if not os.path.isfile(os.path.join(SST2_DIR, "train.tsv")):
        print(f"sst2: skipped, no SST-2 files in {SST2_DIR}.")
        return [measurements.failure("sst2", f"no SST-2 files in {SST2_DIR}")]
    rows = {}
    with tempfile.TemporaryDirectory(prefix="sst2_benchmark_") as work_dir:
        rows["transformers (torch)"] = _timed(
            [
                sys.executable,
                "-m",
                "benchmarks.sst2_finetuning",
                f"--sst2_train_examples={_TRAIN_EXAMPLES.value}",
                f"--sst2_epochs={_EPOCHS.value}",
                f"--sst2_learning_rate={_LEARNING_RATE.value}",
                f"--sst2_seed={_SEED.value}",
                checkpoint,
                work_dir,
            ],
            os.path.join(work_dir, "transformers.json"),
        )
        runs = program_runs(_BACKENDS.value, _BUCKET_BY_LENGTH.value, _JAX_COMPILATION_CACHE.value)
        for run in runs:
            output_dir = os.path.join(work_dir, run.name.replace(" ", "_"))
            cache = None
            if run.compilation_cache:
                cache = os.path.join(work_dir, "jax_cache" + ("_buckets" if run.bucketed else ""))
            rows[run.name] = _timed(
                _classify_command(checkpoint, output_dir, run.bucketed, cache),
                os.path.join(output_dir, "eval_results.json"),
                {"KERAS_BACKEND": run.backend},
            )
    widths = _MAX_BATCH_WIDTHS.value
    print(
        f"SST-2: {_TRAIN_EXAMPLES.value} train sentences, {_EPOCHS.value} epochs, batch "
        f"{_BATCH_SIZE}, max length {_SEQUENCE_LENGTH}, lr {_LEARNING_RATE.value}, seed "
        f"{_SEED.value}; 872 dev sentences; {os.cpu_count()} CPU cores; batch widths: "
        f"{f'at most {widths}' if widths else 'as each program chooses them'}"
    )
    header = (
        f"{'program':<34} {'seconds':>8} {'epoch 1 s':>10} {'later epochs s':>15} "
        f"{'dev scoring s':>14} {'dev accuracy':>13} {'time / transformers':>20}"
    )
    print(header)
    print("-" * len(header))
    reference = rows["transformers (torch)"]
    for name, row in rows.items():
        first, *later = row["epoch_seconds"]
        print(
            f"{name:<34} {row['seconds']:>8.1f} {first:>10.1f} "
            f"{statistics.median(later) if later else float('nan'):>15.1f} "
            f"{row['scoring_seconds']:>14.2f} {row['accuracy']:>13.4f} "
            f"{row['seconds'] / reference['seconds']:>20.2f}"
        )
    settings = (
        f"{_TRAIN_EXAMPLES.value} train sentences, {_EPOCHS.value} epochs, batch {_BATCH_SIZE}"
    )
    return [
        measurements.measurement(
            "sst2",
            measure + run.variant,
            rows[run.name][key],
            "transformers (torch)",
            reference[key],
            backend=run.backend,
            higher_is_better=key == "accuracy",
            settings=settings,
        )
        for run in runs
        for measure, key in (
            ("program seconds", "seconds"),
            ("dev scoring seconds", "scoring_seconds"),
            ("dev accuracy", "accuracy"),
        )
    ]


class ProgramRun(typing.NamedTuple):
    """One `tasks.classify` run of the benchmark.

    `compilation_cache` is "written" for a jax run given an empty
    `--compilation_cache_dir` and "read" for the same program run again
    with it; None without one.
    """

    backend: str
    bucketed: bool
    compilation_cache: str | None = None

    @property
    def name(self):
        buckets = " buckets" if self.bucketed else ""
        warm = " warm cache" if self.compilation_cache == "read" else ""
        return f"bert_keras {self.backend}{buckets}{warm}"

    @property
    def variant(self):
        """What the measurements' names add: " (buckets)", " (buckets, warm compile cache)"."""
        parts = []
        if self.bucketed:
            parts.append("buckets")
        if self.compilation_cache == "read":
            parts.append("warm compile cache")
        return f" ({', '.join(parts)})" if parts else ""


def program_runs(backends, bucket_by_length, jax_compilation_cache):
    """The bert_keras runs, in order: each backend, then with buckets, each jax run then warm.

    Example:
    >>> for run in program_runs(["jax", "torch"], True, jax_compilation_cache=True):
    ...     print((run.name, run.compilation_cache, run.variant))
    ('bert_keras jax', 'written', '')
    ('bert_keras jax warm cache', 'read', ' (warm compile cache)')
    ('bert_keras jax buckets', 'written', ' (buckets)')
    ('bert_keras jax buckets warm cache', 'read', ' (buckets, warm compile cache)')
    ('bert_keras torch', None, '')
    ('bert_keras torch buckets', None, ' (buckets)')
    """
    runs = []
    for backend in backends:
        for bucketed in (False, True) if bucket_by_length else (False,):
            if backend == "jax" and jax_compilation_cache:
                runs += [ProgramRun(backend, bucketed, cache) for cache in ("written", "read")]
            else:
                runs.append(ProgramRun(backend, bucketed))
    return runs


def _classify_command(checkpoint, output_dir, bucket_by_length, compilation_cache_dir=None):
    return [
        sys.executable,
        "-m",
        "tasks.classify",
        "--task_name=SST-2",
        f"--data_dir={SST2_DIR}",
        f"--init_checkpoint={checkpoint}",
        f"--output_dir={output_dir}",
        "--do_train",
        "--do_eval",
        f"--train_limit={_TRAIN_EXAMPLES.value}",
        f"--num_train_epochs={_EPOCHS.value}",
        f"--train_batch_size={_BATCH_SIZE}",
        f"--eval_batch_size={_BATCH_SIZE}",
        f"--max_seq_length={_SEQUENCE_LENGTH}",
        f"--learning_rate={_LEARNING_RATE.value}",
        f"--seed={_SEED.value}",
        f"--bucket_by_length={bucket_by_length}",
        *([f"--max_batch_widths={_MAX_BATCH_WIDTHS.value}"] if _MAX_BATCH_WIDTHS.value else []),
        *([f"--compilation_cache_dir={compilation_cache_dir}"] if compilation_cache_dir else []),
    ]


def _timed(command, results_file, environment=None):
    """Seconds, dev accuracy, epoch seconds and dev scoring seconds of a program.

    The program writes `results_file`, with the accuracy and the seconds its
    scoring of the dev set took (reading, tokenizing, predicting); the epoch
    seconds are the file's own, or else those of the history.jsonl beside it.
    """
    start = time.perf_counter()
    completed = subprocess.run(
        command,
        cwd=REPOSITORY,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(environment or {})},
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    if completed.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{completed.stderr[-3000:]}")
    with open(results_file, encoding="utf-8") as file:
        results = json.load(file)
    if "epoch_seconds" not in results:  # ours: from history.jsonl (no Keras import here)
        with open(os.path.join(os.path.dirname(results_file), "history.jsonl")) as file:
            records = [json.loads(line) for line in file]
        results["epoch_seconds"] = seconds_per_pass(records, _EPOCHS.value)
    return {
        "accuracy": results["accuracy"],
        "epoch_seconds": results["epoch_seconds"],
        "scoring_seconds": results["seconds"],
        "seconds": seconds,
    }


def seconds_per_pass(records, num_passes):
    """Seconds of each of `num_passes` passes over the data, from history records.

    A record's interval runs from the previous record's `epoch` (passes so
    far) to its own; an interval that straddles two passes is shared between
    them in proportion to its steps in each, and the steps past the passes
    asked for (a last compiled call of several steps, see `fit_plan`) count
    towards the last pass.

    Example:
    >>> seconds_per_pass([{"epoch": 0.5, "seconds": 9.0}, {"epoch": 1.0, "seconds": 2.0},
    ...                   {"epoch": 1.6, "seconds": 2.0}, {"epoch": 2.2, "seconds": 2.0}], 2)
    [11.0, 4.0]
    >>> seconds_per_pass([{"epoch": 0.8, "seconds": 8.0}, {"epoch": 1.6, "seconds": 8.0}], 2)
    [10.0, 6.0]
    """
    passes = [0.0] * num_passes
    start = 0.0
    for record in records:
        end = record["epoch"]
        for number in range(num_passes):
            last = number + 1 == num_passes
            overlap = min(end, math.inf if last else number + 1) - max(start, number)
            if overlap > 0:
                passes[number] += record["seconds"] * overlap / (end - start)
        start = end
    return [round(seconds, 6) for seconds in passes]


def _read_sst2(split, limit=None):
    with open(os.path.join(SST2_DIR, f"{split}.tsv"), encoding="utf-8") as file:
        rows = [line.split("\t") for line in file.read().splitlines()[1:]]
    rows = rows[:limit] if limit else rows
    return [sentence for sentence, _ in rows], [int(label) for _, label in rows]


def transformers_program(checkpoint, work_dir):
    """Fine-tunes and scores with transformers + torch; writes work_dir/transformers.json."""
    import torch
    import transformers

    torch.manual_seed(_SEED.value)
    tokenizer = transformers.AutoTokenizer.from_pretrained(checkpoint)
    model = transformers.BertForSequenceClassification.from_pretrained(checkpoint, num_labels=2)
    texts, labels = _read_sst2("train", _TRAIN_EXAMPLES.value)
    steps_per_epoch = -(-len(texts) // _BATCH_SIZE)
    total_steps = steps_per_epoch * _EPOCHS.value
    train_step = common.transformers_train_step(
        model, _LEARNING_RATE.value, total_steps, int(0.1 * total_steps)
    )

    def batch(indices, sentences, sentence_labels):
        encoded = tokenizer(
            [sentences[i] for i in indices],
            padding=True,
            truncation=True,
            max_length=_SEQUENCE_LENGTH,
            return_tensors="pt",
        )
        return encoded, torch.tensor([sentence_labels[i] for i in indices])

    generator = torch.Generator().manual_seed(_SEED.value)
    model.train()
    epoch_seconds = []
    for _ in range(_EPOCHS.value):
        start_of_epoch = time.perf_counter()
        order = torch.randperm(len(texts), generator=generator).tolist()
        for start in range(0, len(order), _BATCH_SIZE):
            encoded, batch_labels = batch(order[start : start + _BATCH_SIZE], texts, labels)
            train_step({**encoded, "labels": batch_labels})
        epoch_seconds.append(time.perf_counter() - start_of_epoch)
    model.eval()
    start_of_scoring = time.perf_counter()
    dev_texts, dev_labels = _read_sst2("dev")
    correct = 0
    with torch.inference_mode():
        for start in range(0, len(dev_texts), _BATCH_SIZE):
            indices = range(start, min(start + _BATCH_SIZE, len(dev_texts)))
            encoded, batch_labels = batch(indices, dev_texts, dev_labels)
            correct += int((model(**encoded).logits.argmax(-1) == batch_labels).sum())
    with open(os.path.join(work_dir, "transformers.json"), "w", encoding="utf-8") as file:
        json.dump(
            {
                "accuracy": correct / len(dev_texts),
                "epoch_seconds": epoch_seconds,
                "seconds": time.perf_counter() - start_of_scoring,
            },
            file,
        )


if __name__ == "__main__":
    _, checkpoint_dir, output_dir = flags.FLAGS(sys.argv)
    transformers_program(checkpoint_dir, output_dir)
