"""Trains and evaluates BERT4Rec on a user-item interaction log.

    python -m tasks.recommend --input_file=ml-1m/ratings.dat --input_format=movielens \\
        --output_dir=/tmp/ml1m --preset=bert4rec_ml1m --num_train_epochs=200 \\
        --do_train --do_eval --do_predict

Each user's last item is the test target and the one before it the validation
target (leave-one-out); training stops early on validation NDCG@10.
OUTPUT_DIR/eval_results.json holds the test metrics with full ranking
(`test/full/hr@10`, `test/full/ndcg@10`, ...) and with 100 popularity-sampled
negatives (`test/pop100/...`), the number of users evaluated and of items
ranked; OUTPUT_DIR/predictions.tsv the top-k unseen items after each user's
whole history.

Training writes a checkpoint after every epoch (OUTPUT_DIR/checkpoints): the
same command run again resumes after the last whole epoch and ends as an
uninterrupted run would; other model, data or schedule flags are refused,
naming them; a larger --patience continues a run that stopped early; a run
that finished training loads its model.keras instead of training again.
"""

import json
import os
import sys

from absl import app
from absl import flags

from bert_keras.data.interactions import INPUT_FORMATS
from bert_keras.training.garbage_collection import freeze_heap_at_exit
from bert_keras.training.garbage_collection import long_lived_objects
from bert_keras.training.host_memory import restart_with_training_malloc
from bert_keras.training.output_lock import OutputLockedError
from bert_keras.training.output_lock import output_lock
from bert_keras.training.usage_errors import run_program

_INPUT_FILE = flags.DEFINE_string("input_file", None, "The interaction log.")
_INPUT_FORMAT = flags.DEFINE_enum("input_format", None, INPUT_FORMATS, "The log's format.")
_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Where results are written.")
_PRESET = flags.DEFINE_string("preset", "bert4rec_ml1m", "A BERT4Rec preset name.")
_DO_TRAIN = flags.DEFINE_boolean("do_train", False, "Train a model.")
_DO_EVAL = flags.DEFINE_boolean("do_eval", False, "Evaluate on each user's last item.")
_DO_PREDICT = flags.DEFINE_boolean("do_predict", False, "Write top-k items per user.")
_NUM_TRAIN_EPOCHS = flags.DEFINE_integer("num_train_epochs", 100, "Training epochs (at most).")
_TRAIN_BATCH_SIZE = flags.DEFINE_integer("train_batch_size", 256, "Training batch size.")
_LEARNING_RATE = flags.DEFINE_float("learning_rate", 1e-4, "Peak learning rate.")
_NUM_WARMUP_STEPS = flags.DEFINE_integer(
    "num_warmup_steps", 100, "Warmup steps; at most a tenth of the training steps."
)
_MAX_SEQUENCE_LENGTH = flags.DEFINE_integer(
    "max_sequence_length", None, "Items per window; the preset's by default."
)
_SLIDING_WINDOW = flags.DEFINE_float(
    "sliding_window", 0.5, "Step between a long history's windows, as a share of the length."
)
_MIN_INTERACTIONS = flags.DEFINE_integer(
    "min_interactions", 5, "Users with fewer interactions are dropped."
)
_PATIENCE = flags.DEFINE_integer(
    "patience", 10, "Epochs without a better validation NDCG@10 before training stops."
)
_NUM_NEGATIVES = flags.DEFINE_integer(
    "num_negatives",
    100,
    "Popularity-sampled negatives per evaluated user; 0 reports the full-ranking metrics alone.",
)
_SAMPLED_NEGATIVES = flags.DEFINE_integer(
    "sampled_negatives",
    None,
    "Train with a sampled softmax over this many log-uniformly drawn negatives (for large "
    "catalogues); the paper's full softmax when unset.",
)
_TOP_K = flags.DEFINE_integer("top_k", 10, "Items per user in predictions.tsv.")
_SEED = flags.DEFINE_integer("seed", 12345, "Random seed.")


def check_flags():
    """Raises `app.UsageError` naming the first missing or out-of-range flag."""
    for flag in (_INPUT_FILE, _INPUT_FORMAT, _OUTPUT_DIR):
        if not flag.value:
            raise app.UsageError(f"--{flag.name} is required.")
    if not (_DO_TRAIN.value or _DO_EVAL.value or _DO_PREDICT.value):
        raise app.UsageError("At least one of --do_train, --do_eval, --do_predict must be set.")
    if os.path.isdir(_INPUT_FILE.value):
        raise app.UsageError(f"--input_file={_INPUT_FILE.value} is a directory, not a log file.")
    positive = (_NUM_TRAIN_EPOCHS, _TRAIN_BATCH_SIZE, _TOP_K, _MIN_INTERACTIONS)
    for flag in (*positive, _SAMPLED_NEGATIVES):
        if flag.value is not None and flag.value < 1:
            raise app.UsageError(f"--{flag.name} must be positive, got {flag.value}.")
    if not _LEARNING_RATE.value > 0:  # NaN too
        raise app.UsageError(f"--learning_rate must be positive, got {_LEARNING_RATE.value}.")
    if _NUM_NEGATIVES.value < 0:
        raise app.UsageError(f"--num_negatives must be 0 or more, got {_NUM_NEGATIVES.value}.")
    if _MIN_INTERACTIONS.value < 3:
        raise app.UsageError(
            f"--min_interactions must be at least 3 (train, validation and test items), "
            f"got {_MIN_INTERACTIONS.value}."
        )
    if _MAX_SEQUENCE_LENGTH.value is not None and _MAX_SEQUENCE_LENGTH.value < 2:
        raise app.UsageError(
            f"--max_sequence_length must be at least 2, got {_MAX_SEQUENCE_LENGTH.value}."
        )
    for flag in (_NUM_WARMUP_STEPS, _PATIENCE):
        if flag.value < 0:
            raise app.UsageError(f"--{flag.name} must not be negative, got {flag.value}.")
    if not 0 <= _SEED.value < 2**32:
        raise app.UsageError(f"--seed must be in 0..2**32 - 1, got {_SEED.value}.")
    if not 0.0 < _SLIDING_WINDOW.value <= 1.0:
        raise app.UsageError(f"--sliding_window must be in (0, 1], got {_SLIDING_WINDOW.value}.")


def main(argv):
    del argv
    check_flags()
    with long_lived_objects():
        from bert_keras.models.presets import BERT4REC_PRESETS
        from bert_keras.recommendation.run import RecommendationRun

    if _PRESET.value not in BERT4REC_PRESETS:
        raise app.UsageError(f"--preset={_PRESET.value}: not one of {sorted(BERT4REC_PRESETS)}.")
    try:
        with output_lock(_OUTPUT_DIR.value):
            _run_steps(RecommendationRun)
    except (OSError, ValueError, OutputLockedError) as error:  # OSError: a full disk, say
        sys.exit(f"recommend: {error}")


def _run_steps(run_class):
    """Reads the log, then trains, evaluates and predicts as the flags ask."""
    run = run_class(
        _INPUT_FILE.value,
        _INPUT_FORMAT.value,
        _OUTPUT_DIR.value,
        preset=_PRESET.value,
        min_interactions=_MIN_INTERACTIONS.value,
        max_sequence_length=_MAX_SEQUENCE_LENGTH.value,
        num_negatives=_NUM_NEGATIVES.value,
        seed=_SEED.value,
        sampled_negatives=_SAMPLED_NEGATIVES.value,
    )
    sequences = run.sequences
    print(
        f"{len(sequences.sequences)} users ({sequences.dropped_users} with fewer than "
        f"{_MIN_INTERACTIONS.value} interactions dropped), {sequences.num_items} items, "
        f"{sum(len(s) for s in sequences.sequences)} interactions"
    )
    if _DO_EVAL.value:
        run.check_negatives()  # before hours of training, not after
    if _DO_TRAIN.value:
        run.train(
            _NUM_TRAIN_EPOCHS.value,
            batch_size=_TRAIN_BATCH_SIZE.value,
            learning_rate=_LEARNING_RATE.value,
            num_warmup_steps=_NUM_WARMUP_STEPS.value,
            sliding_window=_SLIDING_WINDOW.value,
            patience=_PATIENCE.value,
        )
    if _DO_EVAL.value:
        print(json.dumps(run.evaluate()))
    if _DO_PREDICT.value:
        print(f"Top-{_TOP_K.value} items per user: {run.predict(top_k=_TOP_K.value)}")


if __name__ == "__main__":
    restart_with_training_malloc()
    freeze_heap_at_exit()
    run_program(main)
