"""Fine-tunes a BERT checkpoint on multiple choice in SWAG's CSV format.

Flags follow the original run_classifier.py (and run_swag.py), so command
lines carry over:

    python -m tasks.multiple_choice --data_dir=swag \\
        --init_checkpoint=/path/to/checkpoint_dir --output_dir=/tmp/swag \\
        --do_train --do_eval --max_seq_length=80 --train_batch_size=16 \\
        --learning_rate=2e-5 --num_train_epochs=3

--data_dir holds train.csv, val.csv (or dev.csv) and test.csv with a header
naming sent1, sent2, ending0, ending1, ... and label (test.csv: none, or -1
or empty as in Hugging Face's swag test split); each choice is "[CLS] sent1
[SEP] sent2 ending_i [SEP]". The files --do_eval and --do_predict ask for
are read and checked before training starts. Accuracy goes to
OUTPUT_DIR/eval_results.json, the chosen ending of each example to
OUTPUT_DIR/predictions_{dev,test}.tsv.
"""

import functools

from bert_keras.finetuning.flags import CHECKPOINT_FLAGS
from bert_keras.finetuning.flags import check_flags
from bert_keras.finetuning.flags import define_flags
from bert_keras.finetuning.flags import run_steps
from bert_keras.training.garbage_collection import freeze_heap_at_exit
from bert_keras.training.garbage_collection import long_lived_objects
from bert_keras.training.host_memory import restart_with_training_malloc
from bert_keras.training.usage_errors import run_program

_FLAGS = define_flags(learning_rate=2e-5)


def main(argv):
    del argv
    check_flags(_FLAGS)
    with long_lived_objects():
        from bert_keras.finetuning.multiple_choice import MultipleChoiceRun

    # The dev and test files asked for are checked before training, not after it.
    check_splits = [split for split in _FLAGS.splits() if split != "train"]
    scores_only = "train" not in _FLAGS.splits()
    run_steps(
        functools.partial(MultipleChoiceRun, check_splits=check_splits, scores_only=scores_only),
        _FLAGS,
    )


if __name__ == "__main__":
    restart_with_training_malloc()
    freeze_heap_at_exit()
    run_program(main, retired_flags=CHECKPOINT_FLAGS)
