"""What every fine-tuning program shares: flags, a task model from a checkpoint, training, files.

A task's run (classification, tagging, multiple choice, ...) subclasses
`FineTuningRun` and adds reading its data and scoring it; a task's absl
program calls `define_flags` at import, then `check_flags`, builds its run
from `run_arguments` and hands it to `run_steps`, which does what
--do_train, --do_eval and --do_predict ask, in that order.
"""

import dataclasses
import json
import math
import os

import keras
from absl import app
from absl import flags
from absl import logging

from bert_keras.checkpoints.preset import load_checkpoint
from bert_keras.checkpoints.preset import set_backbone_weights
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.text.tokenizer import BertTokenizer

EVAL_RESULTS_FILE = "eval_results.json"


class FineTuningRun:
    """A checkpoint's tokenizer, a task model on its backbone, training, result files.

    Subclasses read their task's data and implement `train(batch_size,
    learning_rate, num_epochs, warmup_proportion, limit)`, `evaluate(split,
    batch_size)` (returns and writes the metrics) and `predict(split,
    batch_size)`; `build_model` and `fit` do the parts every task shares.

    Args:
        data_dir: directory of the task's files.
        init_checkpoint: checkpoint directory (Hugging Face, the original
            release, bert_keras's own); its vocab.txt and casing are used.
        output_dir: results and predictions go here (created if absent).
        max_seq_length: tokens per packed input.
        seed: seeds Keras (weights of new heads, dropout) and shuffling.

    Example:
    >>> import tempfile
    >>> checkpoint = tempfile.mkdtemp() + "/tiny"
    >>> vocab = tempfile.mkdtemp() + "/vocab.txt"
    >>> _ = open(vocab, "w").write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "ok"]))
    >>> BertBackbone(6, 1, 2, 8, 16).save_to_preset(checkpoint, vocabulary_file=vocab)
    >>> run = FineTuningRun(tempfile.mkdtemp(), checkpoint, tempfile.mkdtemp())
    >>> from bert_keras.models.bert_classifier import BertClassifier
    >>> model = run.build_model(lambda backbone: BertClassifier(backbone, 3), "classifier")
    >>> tuple(model.get_layer("logits").kernel.shape)
    (8, 3)
    """

    def __init__(self, data_dir, init_checkpoint, output_dir, max_seq_length=128, seed=0):
        keras.utils.set_random_seed(seed)
        self.data_dir = data_dir
        self.output_dir = output_dir
        self.max_seq_length = max_seq_length
        self.seed = seed
        os.makedirs(output_dir, exist_ok=True)
        self.checkpoint = load_checkpoint(init_checkpoint)
        self.tokenizer = BertTokenizer.from_preset(self.checkpoint.directory)

    def build_model(self, build_task, head_name, output_layer="logits"):
        """The task model on the checkpoint's backbone, with its head when one fits.

        Args:
            build_task: backbone -> task model (e.g. a `BertTokenClassifier`).
            head_name: the checkpoint head (see `Checkpoint.head_weights`)
                whose `kernel` and `bias` the output layer takes when their
                shapes match it; otherwise the layer keeps its fresh weights.
            output_layer: name of the task model's output `Dense` layer.

        Returns:
            The task model.
        """
        backbone = BertBackbone.from_config(self.checkpoint.backbone_config)
        set_backbone_weights(backbone, self.checkpoint)
        model = build_task(backbone)
        head = self.checkpoint.head_weights.get(head_name)
        layer = model.get_layer(output_layer)
        if head and tuple(head["kernel"].shape) == tuple(layer.kernel.shape):
            layer.set_weights([head["kernel"], head["bias"]])
            logging.info("Loaded the checkpoint's %s head.", head_name)
        elif head:
            logging.info(
                "Not loading the checkpoint's %s head: its kernel is %s, the task's %s.",
                head_name, list(head["kernel"].shape), list(layer.kernel.shape),
            )
        return model

    def fit(self, model, dataset, num_examples, batch_size, learning_rate, num_epochs,
            warmup_proportion=0.1, verbose=2):
        """Fine-tunes `model` with the paper's AdamW recipe; returns the history.

        Args:
            model: a `BertTask` (compiled here with its own loss and metrics).
            dataset: a finite, batched `tf.data.Dataset` of `(features,
                labels)` that reshuffles itself on every pass.
            num_examples: examples in one pass of `dataset`.
            batch_size: examples per batch of `dataset`.
            learning_rate: peak learning rate, reached after the warmup.
            num_epochs: passes over the data; may be fractional.
            warmup_proportion: fraction of the steps warming up linearly.
            verbose: `keras.Model.fit`'s verbosity.

        Returns:
            The `History.history` dict.
        """
        if num_examples == 0:
            raise ValueError(f"No training examples in {self.data_dir}.")
        steps_per_epoch = math.ceil(num_examples / batch_size)
        total_steps = max(1, int(steps_per_epoch * num_epochs))
        model.compile(
            learning_rate=learning_rate,
            num_train_steps=total_steps,
            warmup_proportion=warmup_proportion,
        )
        epochs = max(1, math.ceil(num_epochs))
        history = model.fit(
            dataset.repeat(),
            epochs=epochs,
            steps_per_epoch=math.ceil(total_steps / epochs),
            shuffle=False,  # the dataset reshuffles itself each pass
            verbose=verbose,
        )
        return history.history

    def write_results(self, results):
        """Writes `results` (a JSON-able dict) to OUTPUT_DIR/eval_results.json."""
        self.write_file(EVAL_RESULTS_FILE, json.dumps(results, indent=2) + "\n")

    def write_file(self, name, text):
        """Writes `text` to OUTPUT_DIR/`name`, atomically."""
        write_atomically(os.path.join(self.output_dir, name), text)


def write_atomically(path, text):
    """Writes `text` to a temporary name then renames it: `path` is never half-written.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "results.json")
    >>> write_atomically(path, "{}\\n")
    >>> open(path).read(), os.listdir(os.path.dirname(path))
    ('{}\\n', ['results.json'])
    """
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as file:
        file.write(text)
    os.replace(temporary, path)


@dataclasses.dataclass(frozen=True)
class FineTuningFlags:
    """The `absl.flags.FlagHolder`s of the flags every fine-tuning program takes."""

    data_dir: flags.FlagHolder
    init_checkpoint: flags.FlagHolder
    output_dir: flags.FlagHolder
    do_train: flags.FlagHolder
    do_eval: flags.FlagHolder
    do_predict: flags.FlagHolder
    max_seq_length: flags.FlagHolder
    train_batch_size: flags.FlagHolder
    eval_batch_size: flags.FlagHolder
    learning_rate: flags.FlagHolder
    num_train_epochs: flags.FlagHolder
    warmup_proportion: flags.FlagHolder
    train_limit: flags.FlagHolder
    seed: flags.FlagHolder

    def run_arguments(self):
        """The `FineTuningRun` constructor arguments the flags give."""
        return {
            "data_dir": self.data_dir.value,
            "init_checkpoint": self.init_checkpoint.value,
            "output_dir": self.output_dir.value,
            "max_seq_length": self.max_seq_length.value,
            "seed": self.seed.value,
        }


def define_flags(flag_values=flags.FLAGS, learning_rate=5e-5, max_seq_length=128):
    """Defines the task-independent flags, named as in the original run_classifier.py.

    Call it once, at a program's import (flags are process-wide).

    Args:
        flag_values: the `absl.flags.FlagValues` to define them in.
        learning_rate: the task's default --learning_rate.
        max_seq_length: the task's default --max_seq_length.

    Returns:
        `FineTuningFlags`.

    Example:
    >>> from absl import flags
    >>> flag_values = flags.FlagValues()
    >>> program_flags = define_flags(flag_values)
    >>> _ = flag_values(["program", "--data_dir=data", "--do_eval"])
    >>> program_flags.data_dir.value, program_flags.train_batch_size.value
    ('data', 32)
    """

    def define(kind, name, default, help_text):
        return getattr(flags, f"DEFINE_{kind}")(name, default, help_text, flag_values=flag_values)

    return FineTuningFlags(
        data_dir=define("string", "data_dir", None, "Directory of the task's files."),
        init_checkpoint=define("string", "init_checkpoint", None, "Checkpoint directory."),
        output_dir=define("string", "output_dir", None, "Where results are written."),
        do_train=define("boolean", "do_train", False, "Fine-tune on the train split."),
        do_eval=define("boolean", "do_eval", False, "Evaluate on the dev split."),
        do_predict=define("boolean", "do_predict", False, "Predict the test split."),
        max_seq_length=define("integer", "max_seq_length", max_seq_length, "Tokens per packed input."),
        train_batch_size=define("integer", "train_batch_size", 32, "Training batch size."),
        eval_batch_size=define("integer", "eval_batch_size", 8, "Evaluation batch size."),
        learning_rate=define("float", "learning_rate", learning_rate, "Peak AdamW learning rate."),
        num_train_epochs=define("float", "num_train_epochs", 3.0, "Training epochs."),
        warmup_proportion=define("float", "warmup_proportion", 0.1, "Fraction of steps warming up."),
        train_limit=define("integer", "train_limit", None, "Use only the first N training examples."),
        seed=define("integer", "seed", 12345, "Random seed."),
    )


def check_flags(program_flags, required=()):
    """Raises `app.UsageError` naming the first flag that is missing or out of range.

    Args:
        program_flags: `FineTuningFlags`.
        required: the program's own required `FlagHolder`s.

    Example:
    >>> from absl import flags
    >>> flag_values = flags.FlagValues()
    >>> program_flags = define_flags(flag_values)
    >>> _ = flag_values(["program", "--data_dir=d", "--init_checkpoint=c", "--output_dir=o"])
    >>> check_flags(program_flags)
    Traceback (most recent call last):
    ...
    absl.app.UsageError: At least one of --do_train, --do_eval, --do_predict must be set.
    """
    for flag in (*required, program_flags.data_dir, program_flags.init_checkpoint,
                 program_flags.output_dir):
        if not flag.value:
            raise app.UsageError(f"--{flag.name} is required.")
    if not (program_flags.do_train.value or program_flags.do_eval.value
            or program_flags.do_predict.value):
        raise app.UsageError("At least one of --do_train, --do_eval, --do_predict must be set.")
    if program_flags.max_seq_length.value < 3:
        raise app.UsageError(
            f"--max_seq_length must be at least 3, got {program_flags.max_seq_length.value}."
        )
    for flag in (program_flags.train_batch_size, program_flags.eval_batch_size):
        if flag.value < 1:
            raise app.UsageError(f"--{flag.name} must be positive, got {flag.value}.")


def run_steps(run, program_flags):
    """Trains, evaluates on "dev" (printing the metrics), predicts "test", as the flags ask.

    Args:
        run: a `FineTuningRun`.
        program_flags: `FineTuningFlags`, parsed.

    Returns:
        The dev metrics, or None without --do_eval.
    """
    results = None
    if program_flags.do_train.value:
        run.train(
            batch_size=program_flags.train_batch_size.value,
            learning_rate=program_flags.learning_rate.value,
            num_epochs=program_flags.num_train_epochs.value,
            warmup_proportion=program_flags.warmup_proportion.value,
            limit=program_flags.train_limit.value,
        )
    if program_flags.do_eval.value:
        results = run.evaluate("dev", program_flags.eval_batch_size.value)
        print(json.dumps(results))
    if program_flags.do_predict.value:
        run.predict("test", program_flags.eval_batch_size.value)
    return results
