"""Fine-tunes a BERT checkpoint on SQuAD v1.1 or v2.0 and writes the original's prediction files.

Flags are named as in the original run_squad.py. Its command lines carry
over without --vocab_file, --bert_config_file and --do_lower_case, which
are not flags here (given one, the program says what replaces it): the checkpoint directory holds
vocab.txt and the config, and the casing comes from its tokenizer files (an
original release's from its name, cased_ or uncased_; else lower case, the
original's default). --init_checkpoint is that directory, or an original
release's checkpoint prefix DIR/bert_model.ckpt, read as DIR. The TPU flags
(--use_tpu, --tpu_name, ...), --save_checkpoints_steps, --iterations_per_loop
and --verbose_logging are not taken either.

    python -m tasks.squad --init_checkpoint=uncased_L-12_H-768_A-12/bert_model.ckpt \\
        --train_file=train-v1.1.json --predict_file=dev-v1.1.json \\
        --output_dir=/tmp/squad --do_train=True --do_predict=True \\
        --train_batch_size=12 --learning_rate=3e-5 --num_train_epochs=2.0 \\
        --max_seq_length=384 --doc_stride=128

Add --version_2_with_negative (and tune --null_score_diff_threshold) for
v2.0. --do_predict writes OUTPUT_DIR/predictions.json, nbest_predictions.json
and, for v2.0, null_odds.json; when --predict_file has answers (a dev set) it
also scores them as the official scripts do (evaluate-v1.1.py, or
evaluate-v2.0.py with --version_2_with_negative), from the answer texts alone,
into OUTPUT_DIR/eval_results.json. As in the original, a training question
whose answer is not in the words at its answer_start is skipped with a
warning. --predict_file is read and checked before training.
"""

import contextlib
import json
import os

from absl import app
from absl import flags

from bert_keras.data.input_file_error import InputFileError
from bert_keras.finetuning.flags import CHECKPOINT_FLAGS
from bert_keras.finetuning.flags import define_bucket_by_length_flag
from bert_keras.finetuning.flags import define_freeze_backbone_flag
from bert_keras.finetuning.flags import define_max_batch_widths_flag
from bert_keras.finetuning.training_diverged import TrainingDivergedError
from bert_keras.training.execution import define_execution_flags
from bert_keras.training.garbage_collection import freeze_heap_at_exit
from bert_keras.training.garbage_collection import long_lived_objects
from bert_keras.training.host_memory import restart_with_training_malloc
from bert_keras.training.output_lock import OutputLockedError
from bert_keras.training.output_lock import output_lock
from bert_keras.training.usage_errors import run_program

_TRAIN_FILE = flags.DEFINE_string("train_file", None, "SQuAD JSON to train on.")
_PREDICT_FILE = flags.DEFINE_string("predict_file", None, "SQuAD JSON to predict (and score).")
_INIT_CHECKPOINT = flags.DEFINE_string(
    "init_checkpoint", None, "Checkpoint directory (or an original DIR/bert_model.ckpt)."
)
_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Where predictions and results go.")
_DO_TRAIN = flags.DEFINE_boolean("do_train", False, "Fine-tune on --train_file.")
_DO_PREDICT = flags.DEFINE_boolean("do_predict", False, "Predict (and score) --predict_file.")
_MAX_SEQ_LENGTH = flags.DEFINE_integer("max_seq_length", 384, "Tokens per window.")
_DOC_STRIDE = flags.DEFINE_integer("doc_stride", 128, "Tokens between context windows' starts.")
_MAX_QUERY_LENGTH = flags.DEFINE_integer("max_query_length", 64, "Most question tokens kept.")
_TRAIN_BATCH_SIZE = flags.DEFINE_integer("train_batch_size", 32, "Training batch size.")
_PREDICT_BATCH_SIZE = flags.DEFINE_integer("predict_batch_size", 8, "Prediction batch size.")
_LEARNING_RATE = flags.DEFINE_float("learning_rate", 5e-5, "Peak AdamW learning rate.")
_NUM_TRAIN_EPOCHS = flags.DEFINE_float("num_train_epochs", 3.0, "Training epochs.")
_WARMUP_PROPORTION = flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of steps warming up.")
_N_BEST_SIZE = flags.DEFINE_integer("n_best_size", 20, "Candidates kept per question.")
_MAX_ANSWER_LENGTH = flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in tokens.")
_VERSION_2 = flags.DEFINE_boolean(
    "version_2_with_negative", False, "SQuAD v2.0: some questions have no answer."
)
_NULL_SCORE_DIFF_THRESHOLD = flags.DEFINE_float(
    "null_score_diff_threshold", 0.0, "Predict no answer when null score - best span > this."
)
_SEED = flags.DEFINE_integer("seed", 12345, "Random seed.")
_BUCKET_BY_LENGTH = define_bucket_by_length_flag()
_MAX_BATCH_WIDTHS = define_max_batch_widths_flag()
_FREEZE_BACKBONE = define_freeze_backbone_flag()
_EXECUTION = define_execution_flags()


def main(argv):
    del argv
    _check_flags()
    with long_lived_objects():
        from bert_keras.finetuning.squad import SquadRun

    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(output_lock(_OUTPUT_DIR.value))
            _check_data_files()
            run = SquadRun(
                init_checkpoint=_INIT_CHECKPOINT.value,
                output_dir=_OUTPUT_DIR.value,
                max_seq_length=_MAX_SEQ_LENGTH.value,
                doc_stride=_DOC_STRIDE.value,
                max_query_length=_MAX_QUERY_LENGTH.value,
                version_2_with_negative=_VERSION_2.value,
                seed=_SEED.value,
                execution=_EXECUTION.execution(),
                bucket_by_length=_BUCKET_BY_LENGTH.value,
                max_batch_widths=_MAX_BATCH_WIDTHS.value,
                freeze_backbone=_FREEZE_BACKBONE.value,
                scores_only=not _DO_TRAIN.value,
            )
        except (OutputLockedError, FileNotFoundError, ValueError) as error:
            raise app.UsageError(str(error)) from error
        try:
            _run_steps(run)
        except (InputFileError, FileNotFoundError, TrainingDivergedError) as error:
            raise app.UsageError(str(error)) from error


def _run_steps(run):
    if _DO_PREDICT.value:  # a bad file is an error before training, not after it
        run.predict_examples(_PREDICT_FILE.value)
    if _DO_TRAIN.value:
        run.train(
            _TRAIN_FILE.value,
            batch_size=_TRAIN_BATCH_SIZE.value,
            learning_rate=_LEARNING_RATE.value,
            num_epochs=_NUM_TRAIN_EPOCHS.value,
            warmup_proportion=_WARMUP_PROPORTION.value,
        )
    if _DO_PREDICT.value:
        results = run.predict(
            _PREDICT_FILE.value,
            batch_size=_PREDICT_BATCH_SIZE.value,
            n_best_size=_N_BEST_SIZE.value,
            max_answer_length=_MAX_ANSWER_LENGTH.value,
            null_score_diff_threshold=_NULL_SCORE_DIFF_THRESHOLD.value,
        )
        if results is not None:
            print(json.dumps(results))
    run.warn_of_earlier_files_kept()


def _check_data_files():
    """Names a --train_file or --predict_file that is missing or a directory (after the lock)."""
    for flag, step in ((_TRAIN_FILE, _DO_TRAIN), (_PREDICT_FILE, _DO_PREDICT)):
        if step.value and not os.path.isfile(flag.value):
            what = "a directory" if os.path.isdir(flag.value) else "no file"
            raise app.UsageError(f"--{flag.name}={flag.value} is {what}; expected SQuAD JSON.")


def _check_flags():
    for flag in (_INIT_CHECKPOINT, _OUTPUT_DIR):
        if not flag.value:
            raise app.UsageError(f"--{flag.name} is required.")
    if not (_DO_TRAIN.value or _DO_PREDICT.value):
        raise app.UsageError("At least one of --do_train, --do_predict must be set.")
    if _DO_TRAIN.value and not _TRAIN_FILE.value:
        raise app.UsageError("--train_file is required with --do_train.")
    if _DO_PREDICT.value and not _PREDICT_FILE.value:
        raise app.UsageError("--predict_file is required with --do_predict.")
    for flag in (
        _DOC_STRIDE,
        _MAX_QUERY_LENGTH,
        _TRAIN_BATCH_SIZE,
        _PREDICT_BATCH_SIZE,
        _EXECUTION.steps_per_execution,
        _N_BEST_SIZE,
        _MAX_ANSWER_LENGTH,
    ):
        if flag.value < 1:
            raise app.UsageError(f"--{flag.name} must be positive, got {flag.value}.")
    if _MAX_SEQ_LENGTH.value <= _MAX_QUERY_LENGTH.value + 3:
        raise app.UsageError(
            f"--max_seq_length ({_MAX_SEQ_LENGTH.value}) must be greater than "
            f"--max_query_length ({_MAX_QUERY_LENGTH.value}) + 3, to leave room for context."
        )
    if not 0.0 <= _WARMUP_PROPORTION.value <= 1.0:
        raise app.UsageError(
            f"--warmup_proportion must be in [0, 1], got {_WARMUP_PROPORTION.value}."
        )
    if _NUM_TRAIN_EPOCHS.value <= 0:
        raise app.UsageError(f"--num_train_epochs must be positive, got {_NUM_TRAIN_EPOCHS.value}.")


if __name__ == "__main__":
    restart_with_training_malloc()
    freeze_heap_at_exit()
    run_program(main, retired_flags=CHECKPOINT_FLAGS)
