"""Fine-tunes a BERT checkpoint on a GLUE task or a generic CSV/TSV classification set.

Flags follow the original run_classifier.py, so its command lines carry over:

    python -m tasks.classify --task_name=SST-2 --data_dir=glue/SST-2 \\
        --init_checkpoint=/path/to/checkpoint_dir --output_dir=/tmp/sst2 \\
        --do_train --do_eval --max_seq_length=128 --train_batch_size=32 \\
        --learning_rate=2e-5 --num_train_epochs=3

`--init_checkpoint` is any directory the loader reads (Hugging Face, the
original release, bert_keras's own); its vocab.txt and casing come with it.
`--task_name=csv` reads train/dev/test .csv or .tsv files with a header naming
`text`, optional `text_pair` and `label`. Metrics go to
OUTPUT_DIR/eval_results.json, predictions to OUTPUT_DIR/predictions_{split}.tsv.
"""

from absl import app
from absl import flags

_TASK_NAME = flags.DEFINE_string("task_name", None, "GLUE task (e.g. SST-2, MNLI) or 'csv'.")
_DATA_DIR = flags.DEFINE_string("data_dir", None, "Directory of the task's files.")
_INIT_CHECKPOINT = flags.DEFINE_string("init_checkpoint", None, "Checkpoint directory.")
_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Where results are written.")
_DO_TRAIN = flags.DEFINE_boolean("do_train", False, "Fine-tune on the train split.")
_DO_EVAL = flags.DEFINE_boolean("do_eval", False, "Evaluate on the dev split.")
_DO_PREDICT = flags.DEFINE_boolean("do_predict", False, "Predict the test split.")
_MAX_SEQ_LENGTH = flags.DEFINE_integer("max_seq_length", 128, "Tokens per packed input.")
_TRAIN_BATCH_SIZE = flags.DEFINE_integer("train_batch_size", 32, "Training batch size.")
_EVAL_BATCH_SIZE = flags.DEFINE_integer("eval_batch_size", 8, "Evaluation batch size.")
_LEARNING_RATE = flags.DEFINE_float("learning_rate", 5e-5, "Peak AdamW learning rate.")
_NUM_TRAIN_EPOCHS = flags.DEFINE_float("num_train_epochs", 3.0, "Training epochs.")
_WARMUP_PROPORTION = flags.DEFINE_float("warmup_proportion", 0.1, "Fraction of steps warming up.")
_TRAIN_LIMIT = flags.DEFINE_integer("train_limit", None, "Use only the first N training examples.")
_SEED = flags.DEFINE_integer("seed", 12345, "Random seed.")


def main(argv):
    del argv
    _check_flags()
    from bert_keras.finetuning.classification import ClassificationRun

    run = ClassificationRun(
        task_name=_TASK_NAME.value,
        data_dir=_DATA_DIR.value,
        init_checkpoint=_INIT_CHECKPOINT.value,
        output_dir=_OUTPUT_DIR.value,
        max_seq_length=_MAX_SEQ_LENGTH.value,
        seed=_SEED.value,
    )
    if _DO_TRAIN.value:
        run.train(
            batch_size=_TRAIN_BATCH_SIZE.value,
            learning_rate=_LEARNING_RATE.value,
            num_epochs=_NUM_TRAIN_EPOCHS.value,
            warmup_proportion=_WARMUP_PROPORTION.value,
            limit=_TRAIN_LIMIT.value,
        )
    if _DO_EVAL.value:
        print(run.evaluate("dev", _EVAL_BATCH_SIZE.value))
    if _DO_PREDICT.value:
        run.predict("test", _EVAL_BATCH_SIZE.value)


def _check_flags():
    for flag in (_TASK_NAME, _DATA_DIR, _INIT_CHECKPOINT, _OUTPUT_DIR):
        if not flag.value:
            raise app.UsageError(f"--{flag.name} is required.")
    if not (_DO_TRAIN.value or _DO_EVAL.value or _DO_PREDICT.value):
        raise app.UsageError("At least one of --do_train, --do_eval, --do_predict must be set.")
    if _MAX_SEQ_LENGTH.value < 3:
        raise app.UsageError(f"--max_seq_length must be at least 3, got {_MAX_SEQ_LENGTH.value}.")


if __name__ == "__main__":
    app.run(main)
