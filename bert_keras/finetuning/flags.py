"""The flags every fine-tuning program takes, their checks, and the steps they ask for.

Imports neither TensorFlow nor Keras (nor, through `bert_keras/__init__.py`,
the models), so a program given a bad or missing flag fails at once; a task's
absl program calls `define_flags` at import, `check_flags` in `main`, and only
then imports its run (`bert_keras.finetuning.classification`, ...) and hands
it to `run_steps`, which does what --do_train, --do_eval and --do_predict ask,
in that order.
"""

import contextlib
import dataclasses
import json
import os
import sys

from absl import app
from absl import flags

from bert_keras.data.input_file_error import InputFileError
from bert_keras.finetuning.training_diverged import TrainingDivergedError
from bert_keras.training.execution import ExecutionFlags
from bert_keras.training.execution import define_execution_flags
from bert_keras.training.output_lock import OutputLockedError
from bert_keras.training.output_lock import output_lock

# The flags this module defines belong to the program that asks for them, so
# that its --help lists them (absl's key flags of the main module).
flags.disclaim_key_flags()

# The original run_classifier.py's and run_squad.py's flags that a checkpoint directory replaces.
CHECKPOINT_FLAGS = {
    "vocab_file": "the --init_checkpoint directory holds vocab.txt.",
    "bert_config_file": "the --init_checkpoint directory holds the config.",
    "do_lower_case": "the casing comes with the --init_checkpoint directory (its tokenizer files, "
    "or an original release's name: cased_ or uncased_).",
}


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
    bucket_by_length: flags.FlagHolder
    max_batch_widths: flags.FlagHolder
    freeze_backbone: flags.FlagHolder
    execution: ExecutionFlags

    def splits(self):
        """The splits the steps asked for read ("train", "dev", "test"), in that order.

        Example:
        >>> from absl import flags
        >>> flag_values = flags.FlagValues()
        >>> program_flags = define_flags(flag_values)
        >>> _ = flag_values(["program", "--do_train", "--do_predict"])
        >>> program_flags.splits()
        ['train', 'test']
        """
        steps = (("train", self.do_train), ("dev", self.do_eval), ("test", self.do_predict))
        return [split for split, flag in steps if flag.value]

    def run_arguments(self):
        """The `FineTuningRun` constructor arguments the flags give."""
        return {
            "data_dir": self.data_dir.value,
            "init_checkpoint": self.init_checkpoint.value,
            "output_dir": self.output_dir.value,
            # Unset: the run's default, or the checkpoint's positions where they are fewer.
            "max_seq_length": self.max_seq_length.value if self.max_seq_length.present else None,
            "seed": self.seed.value,
            "bucket_by_length": self.bucket_by_length.value,
            "max_batch_widths": self.max_batch_widths.value,
            "freeze_backbone": self.freeze_backbone.value,
            "execution": self.execution.execution(),
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
        max_seq_length=define(
            "integer",
            "max_seq_length",
            max_seq_length,
            "Tokens per packed input. Unset: this default, or the checkpoint's position "
            "embeddings where they are fewer.",
        ),
        train_batch_size=define("integer", "train_batch_size", 32, "Training batch size."),
        eval_batch_size=define("integer", "eval_batch_size", 8, "Evaluation batch size."),
        learning_rate=define("float", "learning_rate", learning_rate, "Peak AdamW learning rate."),
        num_train_epochs=define("float", "num_train_epochs", 3.0, "Training epochs."),
        warmup_proportion=define(
            "float", "warmup_proportion", 0.1, "Fraction of steps warming up."
        ),
        train_limit=define(
            "integer", "train_limit", None, "Use only the first N training examples."
        ),
        seed=define("integer", "seed", 12345, "Random seed."),
        bucket_by_length=define_bucket_by_length_flag(flag_values),
        max_batch_widths=define_max_batch_widths_flag(flag_values),
        freeze_backbone=define_freeze_backbone_flag(flag_values),
        execution=define_execution_flags(flag_values),
    )


def define_bucket_by_length_flag(flag_values=flags.FLAGS):
    """Defines --bucket_by_length (see `FineTuningRun`'s `bucket_by_length`).

    Example:
    >>> from absl import flags
    >>> flag_values = flags.FlagValues()
    >>> bucket_by_length = define_bucket_by_length_flag(flag_values)
    >>> _ = flag_values(["program", "--bucket_by_length"])
    >>> bucket_by_length.value
    True
    """
    return flags.DEFINE_boolean(
        "bucket_by_length",
        False,
        "Train on batches of texts of one length bucket (the lengths between two batch "
        "widths where XLA compiles each width, else 16 lengths each): less padding; the "
        "buckets' leftovers make a pass's last, mixed batches.",
        flag_values=flag_values,
    )


def define_max_batch_widths_flag(flag_values=flags.FLAGS):
    """Defines --max_batch_widths (see `FineTuningRun`'s `max_batch_widths`).

    Example:
    >>> from absl import flags
    >>> flag_values = flags.FlagValues()
    >>> max_batch_widths = define_max_batch_widths_flag(flag_values)
    >>> _ = flag_values(["program", "--max_batch_widths=3"])
    >>> max_batch_widths.value
    3
    """
    return flags.DEFINE_integer(
        "max_batch_widths",
        None,
        "Where XLA compiles a program per batch width (jax; TensorFlow with --jit_compile): "
        "at most this many widths, those that pad the data's texts least: fewer compiles "
        "for more padding. Default: the widths whose padding saved pays for their compile.",
        lower_bound=1,
        flag_values=flag_values,
    )


def define_freeze_backbone_flag(flag_values=flags.FLAGS):
    """Defines --freeze_backbone (see `FineTuningRun`'s `freeze_backbone`).

    Example:
    >>> from absl import flags
    >>> flag_values = flags.FlagValues()
    >>> freeze_backbone = define_freeze_backbone_flag(flag_values)
    >>> _ = flag_values(["program", "--freeze_backbone"])
    >>> freeze_backbone.value
    True
    """
    return flags.DEFINE_boolean(
        "freeze_backbone",
        False,
        "Keep the checkpoint's backbone weights fixed and train only the task's head.",
        flag_values=flag_values,
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
    for flag in (
        *required,
        program_flags.data_dir,
        program_flags.init_checkpoint,
        program_flags.output_dir,
    ):
        if not flag.value:
            raise app.UsageError(f"--{flag.name} is required.")
    if not (
        program_flags.do_train.value
        or program_flags.do_eval.value
        or program_flags.do_predict.value
    ):
        raise app.UsageError("At least one of --do_train, --do_eval, --do_predict must be set.")
    if program_flags.max_seq_length.value < 3:
        raise app.UsageError(
            f"--max_seq_length must be at least 3, got {program_flags.max_seq_length.value}."
        )
    for flag in (
        program_flags.train_batch_size,
        program_flags.eval_batch_size,
        program_flags.execution.steps_per_execution,
    ):
        if flag.value < 1:
            raise app.UsageError(f"--{flag.name} must be positive, got {flag.value}.")
    if program_flags.train_limit.value is not None and program_flags.train_limit.value < 1:
        raise app.UsageError(
            f"--train_limit must be positive, got {program_flags.train_limit.value}."
        )
    if program_flags.num_train_epochs.value <= 0:
        raise app.UsageError(
            f"--num_train_epochs must be positive, got {program_flags.num_train_epochs.value}."
        )
    if not program_flags.learning_rate.value > 0:
        raise app.UsageError(
            f"--learning_rate must be positive, got {program_flags.learning_rate.value}."
        )
    if not 0.0 <= program_flags.warmup_proportion.value <= 1.0:
        raise app.UsageError(
            f"--warmup_proportion must be in [0, 1], got {program_flags.warmup_proportion.value}."
        )


def run_steps(build_run, program_flags):
    """Builds the run, then trains, evaluates on "dev" (printing the metrics) and predicts "test".

    Each step runs only when its flag asks; the run holds OUTPUT_DIR's lock
    (`bert_keras.training.output_lock`) from before it is built to the end.

    Args:
        build_run: `FineTuningRun` subclass (or a partial of one), called
            with `program_flags.run_arguments()`.
        program_flags: `FineTuningFlags`, parsed.

    Returns:
        The dev metrics, or None without --do_eval.

    Raises:
        app.UsageError: another run holds OUTPUT_DIR, the run refuses the
            flags (a `ValueError` or `FileNotFoundError` of its constructor),
            or a step cannot read a data file (`InputFileError`,
            `FileNotFoundError`).
    """
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(output_lock(program_flags.output_dir.value))
            run = build_run(**program_flags.run_arguments())
            if program_flags.do_train.value:
                run.replicas.check_batch_size(program_flags.train_batch_size.value)
        except (OutputLockedError, FileNotFoundError, ValueError) as error:
            raise app.UsageError(str(error)) from error
        try:
            return _steps(run, program_flags)
        except (InputFileError, FileNotFoundError, TrainingDivergedError) as error:
            raise app.UsageError(str(error)) from error
        except OSError as error:  # a full disk, say: what was written before stays
            sys.exit(f"{os.path.basename(sys.argv[0])}: {error}")


def _steps(run, program_flags):
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
        if run.replicas.is_chief:  # of several processes, the one that writes the results
            print(json.dumps(results))
    if program_flags.do_predict.value:
        run.predict("test", program_flags.eval_batch_size.value)
    run.warn_of_earlier_files_kept()
    return results
