"""Fine-tunes a BERT checkpoint on a GLUE task or a generic CSV/TSV classification set.

Flags follow the original run_classifier.py, so its command lines carry over
without --vocab_file, --bert_config_file and --do_lower_case, which come with
the checkpoint directory:

    python -m tasks.classify --task_name=SST-2 --data_dir=glue/SST-2 \\
        --init_checkpoint=/path/to/checkpoint_dir --output_dir=/tmp/sst2 \\
        --do_train --do_eval --max_seq_length=128 --train_batch_size=32 \\
        --learning_rate=2e-5 --num_train_epochs=3

`--init_checkpoint` is any directory the loader reads (Hugging Face, the
original release, bert_keras's own); its vocab.txt and casing come with it.
`--task_name=csv` reads train/dev/test .csv or .tsv files with a header naming
`text`, optional `text_pair` and `label` (a test file may leave it out); the
classes are the train file's labels, in the order of the checkpoint's head
(config.json id2label) where it names the same classes (ignoring case), or
without a train file the checkpoint's (a 1-output head: a regression). The
files --do_train, --do_eval and --do_predict read are checked before the model
is built; scoring without --do_train needs a checkpoint whose classifier head
fits the data.
Metrics go to OUTPUT_DIR/eval_results.json, predictions to
OUTPUT_DIR/predictions_{split}.tsv.
"""

import functools

from absl import flags

from bert_keras.finetuning.flags import CHECKPOINT_FLAGS
from bert_keras.finetuning.flags import check_flags
from bert_keras.finetuning.flags import define_flags
from bert_keras.finetuning.flags import run_steps
from bert_keras.training.garbage_collection import freeze_heap_at_exit
from bert_keras.training.garbage_collection import long_lived_objects
from bert_keras.training.host_memory import restart_with_training_malloc
from bert_keras.training.usage_errors import run_program

_TASK_NAME = flags.DEFINE_string("task_name", None, "GLUE task (e.g. SST-2, MNLI) or 'csv'.")
_FLAGS = define_flags()


def main(argv):
    del argv
    check_flags(_FLAGS, required=[_TASK_NAME])
    with long_lived_objects():
        from bert_keras.finetuning.classification import ClassificationRun

    # The files the steps read, checked before the model is built, not after training.
    splits = _FLAGS.splits()
    run_steps(functools.partial(ClassificationRun, _TASK_NAME.value, splits=splits), _FLAGS)


if __name__ == "__main__":
    restart_with_training_malloc()
    freeze_heap_at_exit()
    run_program(main, retired_flags=CHECKPOINT_FLAGS)
