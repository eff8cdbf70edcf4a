"""Pretrains BERT (masked LM + next sentence) on records of tools/create_pretraining_data.py.

Flags follow the original run_pretraining.py, so its command lines carry over:

    python -m tasks.pretrain --input_file='/data/records-*' --output_dir=/tmp/pretrain \\
        --preset=bert_base --max_seq_length=128 --max_predictions_per_seq=20 \\
        --train_batch_size=256 --num_train_steps=900000 --num_warmup_steps=10000 \\
        --learning_rate=1e-4 --save_checkpoints_steps=10000

Run the same command again after an interruption and it continues from the
newest checkpoint in OUTPUT_DIR/checkpoints (weights, optimizer, step, data
position). Phase 2 (512 tokens): a new --output_dir, records made with
--max_seq_length=512 and --init_checkpoint=PHASE1_OUTPUT_DIR/export.
OUTPUT_DIR also gets history.jsonl, tensorboard/ and export/ (the final
backbone and heads in the project's checkpoint format).
"""

import contextlib
import functools
import sys

from absl import app
from absl import flags

from bert_keras.training.execution import define_execution_flags
from bert_keras.training.garbage_collection import freeze_heap_at_exit
from bert_keras.training.garbage_collection import long_lived_objects
from bert_keras.training.host_memory import restart_with_training_malloc
from bert_keras.training.output_lock import OutputLockedError
from bert_keras.training.output_lock import output_lock
from bert_keras.training.usage_errors import run_program

# Several programs name their flags alike (input_file, max_seq_length, ...), as
# the original scripts do; overridable definitions let one test process import
# them all. A program run on its own defines each flag once either way.
_define_string = functools.partial(flags.DEFINE_string, allow_override=True)
_define_integer = functools.partial(flags.DEFINE_integer, allow_override=True)
_define_float = functools.partial(flags.DEFINE_float, allow_override=True)
_define_bool = functools.partial(flags.DEFINE_bool, allow_override=True)
_define_enum = functools.partial(flags.DEFINE_enum, allow_override=True)

_INPUT_FILE = _define_string("input_file", None, "Pretraining records: globs, comma separated.")
_OUTPUT_DIR = _define_string("output_dir", None, "Checkpoints, history, logs and the export.")
_PRESET = _define_string("preset", None, "Backbone size, e.g. bert_base (random init).")
_BERT_CONFIG_FILE = _define_string("bert_config_file", None, "bert_config.json or config.json.")
_INIT_CHECKPOINT = _define_string("init_checkpoint", None, "Checkpoint directory to start from.")
_VOCAB_FILE = _define_string("vocab_file", None, "vocab.txt to copy into the export.")
_DO_LOWER_CASE = _define_bool("do_lower_case", True, "Whether the vocabulary is uncased.")
_MAX_SEQ_LENGTH = _define_integer("max_seq_length", 128, "Tokens per record.")
_MAX_PREDICTIONS = _define_integer("max_predictions_per_seq", 20, "Masked positions per record.")
_TRAIN_BATCH_SIZE = _define_integer("train_batch_size", 32, "Sequences per batch.")
_NUM_TRAIN_STEPS = _define_integer("num_train_steps", 100000, "Optimizer steps.")
_NUM_WARMUP_STEPS = _define_integer("num_warmup_steps", 10000, "Linear warmup steps.")
_LEARNING_RATE = _define_float("learning_rate", 1e-4, "Peak learning rate.")
_SAVE_CHECKPOINTS_STEPS = _define_integer(
    "save_checkpoints_steps", 1000, "Steps between checkpoints."
)
_OPTIMIZER = _define_enum("optimizer", "adamw", ["adamw", "lamb"], "LAMB for large batches.")
_WEIGHT_DECAY = _define_float(
    "weight_decay", 0.01, "Decoupled weight decay (not on LayerNorm, bias)."
)
_GRADIENT_ACCUMULATION_STEPS = _define_integer(
    "gradient_accumulation_steps", 1, "Batches per optimizer step."
)
_SEED = _define_integer("seed", 12345, "Seeds the weights, dropout and the data order.")
_KEEP_CHECKPOINT_MAX = _define_integer("keep_checkpoint_max", 5, "Checkpoints kept.")
_BUCKET_BY_LENGTH = _define_bool(
    "bucket_by_length", False, "Batch records of one rounded length together (mixed lengths)."
)
_EXECUTION = define_execution_flags(allow_override=True)


def main(argv):
    del argv
    for flag in (_INPUT_FILE, _OUTPUT_DIR):
        if not flag.value:
            raise app.UsageError(f"--{flag.name} is required.")
    if not (_PRESET.value or _BERT_CONFIG_FILE.value or _INIT_CHECKPOINT.value):
        raise app.UsageError(
            "One of --preset, --bert_config_file or --init_checkpoint is required."
        )
    with long_lived_objects():
        from bert_keras.data.input_file_error import InputFileError
        from bert_keras.pretraining.pretraining_run import PretrainingConfig
        from bert_keras.pretraining.pretraining_run import PretrainingRun
        from bert_keras.pretraining.pretraining_run import resolve_backbone_config

    with contextlib.ExitStack() as stack:
        try:
            config = PretrainingConfig(
                input_file=_INPUT_FILE.value,
                output_dir=_OUTPUT_DIR.value,
                backbone_config=resolve_backbone_config(_PRESET.value, _BERT_CONFIG_FILE.value),
                init_checkpoint=_INIT_CHECKPOINT.value,
                vocab_file=_VOCAB_FILE.value,
                do_lower_case=_DO_LOWER_CASE.value,
                max_seq_length=_MAX_SEQ_LENGTH.value,
                max_predictions_per_seq=_MAX_PREDICTIONS.value,
                train_batch_size=_TRAIN_BATCH_SIZE.value,
                num_train_steps=_NUM_TRAIN_STEPS.value,
                num_warmup_steps=_NUM_WARMUP_STEPS.value,
                learning_rate=_LEARNING_RATE.value,
                save_checkpoints_steps=_SAVE_CHECKPOINTS_STEPS.value,
                optimizer=_OPTIMIZER.value,
                weight_decay=_WEIGHT_DECAY.value,
                mixed_precision=_EXECUTION.mixed_precision.value,
                gradient_accumulation_steps=_GRADIENT_ACCUMULATION_STEPS.value,
                steps_per_execution=_EXECUTION.steps_per_execution.value,
                jit_compile=_EXECUTION.jit_compile.value,  # unset: XLA (one width, it pays)
                seed=_SEED.value,
                keep_checkpoint_max=_KEEP_CHECKPOINT_MAX.value,
                distribution=_EXECUTION.distribution.value,
                mesh_shape=_EXECUTION.execution().mesh_shape,
                bucket_by_length=_BUCKET_BY_LENGTH.value,
                compilation_cache_dir=_EXECUTION.compilation_cache_dir.value,
            )
            stack.enter_context(output_lock(config.output_dir))
            run = PretrainingRun(config)
        except (ValueError, FileNotFoundError, OutputLockedError) as error:
            raise app.UsageError(str(error)) from error
        try:
            run.train()
        except InputFileError as error:  # a record the run reached that it cannot train on
            raise app.UsageError(str(error)) from error
        except OSError as error:  # a full disk, say: the checkpoints written before stay
            sys.exit(f"pretrain: {error}")


if __name__ == "__main__":
    restart_with_training_malloc()
    freeze_heap_at_exit()
    run_program(main)
