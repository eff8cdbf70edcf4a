"""Fine-tunes a BERT checkpoint to tag words (CoNLL-2003 NER, POS, other CoNLL-format data).

Flags follow the original run_classifier.py, so its command lines carry over:

    python -m tasks.tag --data_dir=conll2003 \\
        --init_checkpoint=/path/to/checkpoint_dir --output_dir=/tmp/ner \\
        --do_train --do_eval --max_seq_length=128 --train_batch_size=32 \\
        --learning_rate=5e-5 --num_train_epochs=3

--data_dir holds train.txt, valid.txt (or dev.txt) and test.txt: one word per
line, its tag in the last column, a blank line between sentences, -DOCSTART-
lines skipped; test.txt, the text --do_predict tags, may be words alone, one
a line. Any tag set: entity tags in IOB1, IOB2 or IOBES (the scheme is
detected and reported), or others such as part of speech. Each word is tagged
on its first word piece; sentences longer than --max_seq_length become
overlapping windows, so every word gets a tag. Tag accuracy and, for entity
tags, entity precision/recall/F1 as conlleval computes them go to
OUTPUT_DIR/eval_results.json; OUTPUT_DIR/predictions_{dev,test}.txt repeat
the input lines with the predicted tag appended (conlleval's input), after a
tab where a line's columns are tab-separated, else a space.

The tags and the head are the checkpoint's where it has a fine-tuned
token-classification head (config.json id2label) and --do_train is not set,
or train.txt's tags are all among its tags; a dev tag the head lacks counts as
wrong, as conlleval counts it, with a warning. --do_eval or --do_predict
without --do_train needs such a head.
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

_FLAGS = define_flags()


def main(argv):
    del argv
    check_flags(_FLAGS)
    with long_lived_objects():
        from bert_keras.finetuning.tagging import TaggingRun

    # Without --do_train the checkpoint's fine-tuned head is kept, whatever train.txt holds.
    run_steps(functools.partial(TaggingRun, splits=_FLAGS.splits()), _FLAGS)


if __name__ == "__main__":
    restart_with_training_malloc()
    freeze_heap_at_exit()
    run_program(main, retired_flags=CHECKPOINT_FLAGS)
