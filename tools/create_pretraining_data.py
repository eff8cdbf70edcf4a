r"""Makes BERT pretraining records from text: the original's program, streaming.

Same flags, defaults, input format (one sentence per line, blank lines between
documents) and record schema as google-research/bert's
create_pretraining_data.py; the original run_pretraining.py reads the output.
Shards go to `{output_file}-00000`, `-00001`, ..., so `--input_file=OUTPUT_FILE*`
reads them, and missing directories are created; a killed run continues where
it stopped when rerun with the same flags (its progress is a hidden file beside
the output, removed when the run completes), and a second run started on the
same --output_file meanwhile is refused. A finished run's --output_file
given again is made anew: shards the earlier run made beyond the new run's are
deleted (logged), so give each corpus part its own name. An --input_file that
matches the shards or the hidden files beside them is refused. --do_lower_case must
suit the vocabulary (true for an uncased one): the summary warns when over 5%
of the text's tokens are [UNK]. See bert_keras/data/
pretraining_corpus.py and pretraining_instances.py for how it works and where
it departs from the original.

Example:
    python -m tools.create_pretraining_data --input_file=corpus/*.txt \
        --output_file=/tmp/tf_examples.tfrecord --vocab_file=vocab.txt
"""

import contextlib
import os
import sys

if __name__ == "__main__":
    # This process runs TensorFlow ops (the tokenizer), never a Keras model,
    # yet importing TensorFlow and tensorflow-text imports Keras. Keras'
    # tensorflow backend keeps it from importing JAX or torch; TensorFlow
    # Lite's utilities import JAX where installed and Keras imports
    # scikit-learn for its wrappers: neither is used here, and both cost
    # memory and start-up time (`python -m benchmarks.create_pretraining_data`
    # measures the whole program). Imports of this module (tests) keep them.
    os.environ["KERAS_BACKEND"] = "tensorflow"
    sys.modules.setdefault("jax", None)
    sys.modules.setdefault("sklearn", None)
    # Those imports make hundreds of thousands of objects that live as long
    # as the process, before any worker has work.
    from bert_keras.training.garbage_collection import freeze_heap_at_exit
    from bert_keras.training.garbage_collection import long_lived_objects

    freeze_heap_at_exit()
    with long_lived_objects():
        import bert_keras.text.tokenizer  # noqa: F401  (TensorFlow, tensorflow-text, Keras)

import tensorflow as tf
from absl import app
from absl import flags
from absl import logging

from bert_keras.data.pretraining_corpus import check_output_files
from bert_keras.data.pretraining_corpus import create_pretraining_data
from bert_keras.data.pretraining_corpus import output_file_names
from bert_keras.data.pretraining_corpus import summary_lines
from bert_keras.data.pretraining_instances import InstanceOptions
from bert_keras.training.output_lock import OutputDirectoryError
from bert_keras.training.output_lock import OutputLockedError
from bert_keras.training.output_lock import output_file_lock
from bert_keras.training.usage_errors import run_program

_INPUT_FILE = flags.DEFINE_string(
    "input_file", None, "Input text files (comma separated, globs allowed)."
)
_OUTPUT_FILE = flags.DEFINE_string(
    "output_file",
    None,
    "Output TFRecord paths (comma separated); shards get -00000... (an earlier run's under "
    "the same names are replaced, extra ones deleted).",
)
_VOCAB_FILE = flags.DEFINE_string(
    "vocab_file", None, "The vocabulary file the BERT model was trained on."
)
_DO_LOWER_CASE = flags.DEFINE_bool(
    "do_lower_case", True, "Lower-case the input: true for uncased vocabularies, false for cased."
)
_DO_WHOLE_WORD_MASK = flags.DEFINE_bool(
    "do_whole_word_mask", False, "Mask whole words, not WordPieces."
)
_MAX_SEQ_LENGTH = flags.DEFINE_integer("max_seq_length", 128, "Maximum sequence length.")
_MAX_PREDICTIONS = flags.DEFINE_integer(
    "max_predictions_per_seq", 20, "Maximum masked LM predictions per sequence."
)
_RANDOM_SEED = flags.DEFINE_integer("random_seed", 12345, "Random seed for data generation.")
_DUPE_FACTOR = flags.DEFINE_integer(
    "dupe_factor", 10, "Passes over the input, each with other masks."
)
_MASKED_LM_PROB = flags.DEFINE_float("masked_lm_prob", 0.15, "Masked LM probability.")
_SHORT_SEQ_PROB = flags.DEFINE_float(
    "short_seq_prob", 0.1, "Probability of a shorter target length."
)
_COMPRESSION = flags.DEFINE_enum(
    "compression", "none", ["none", "gzip"], "Compression of the output."
)
_NUM_WORKERS = flags.DEFINE_integer("num_workers", None, "Worker processes (default: all cores).")
_INPUT_MB_PER_SHARD = flags.DEFINE_float(
    "input_mb_per_shard",
    1.0,
    "Input text per output shard; random next segments come from the same shard.",
)


@contextlib.contextmanager
def _outputs_locked(output_file):
    """`output_file_lock` on each of the comma-separated outputs, once they are checked.

    They are taken in one order, so of two runs sharing an output, the
    second is refused at the first name they share.
    """
    names = output_file_names(output_file)
    if names:  # else create_pretraining_data names the problem
        check_output_files(names)
    with contextlib.ExitStack() as locks:
        for name in sorted(set(map(os.path.abspath, names))):
            locks.enter_context(output_file_lock(name))
        yield


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    options = InstanceOptions(
        max_seq_length=_MAX_SEQ_LENGTH.value,
        max_predictions_per_seq=_MAX_PREDICTIONS.value,
        masked_lm_prob=_MASKED_LM_PROB.value,
        short_seq_prob=_SHORT_SEQ_PROB.value,
        do_whole_word_mask=_DO_WHOLE_WORD_MASK.value,
        dupe_factor=_DUPE_FACTOR.value,
        random_seed=_RANDOM_SEED.value,
    )
    if _NUM_WORKERS.value is not None and _NUM_WORKERS.value < 1:
        sys.exit(
            f"create_pretraining_data: --num_workers is {_NUM_WORKERS.value} but must be at least 1."
        )
    try:
        # One run per output name: two would write each other's shards.
        with _outputs_locked(_OUTPUT_FILE.value):
            summary = create_pretraining_data(
                _INPUT_FILE.value,
                _OUTPUT_FILE.value,
                _VOCAB_FILE.value,
                options,
                do_lower_case=_DO_LOWER_CASE.value,
                compression="GZIP" if _COMPRESSION.value == "gzip" else "",
                num_workers=_NUM_WORKERS.value,
                input_mb_per_shard=_INPUT_MB_PER_SHARD.value,
            )
    except OutputDirectoryError as error:  # from the lock, made beside the output
        sys.exit(f"create_pretraining_data: --output_file: {error}")
    except (FileNotFoundError, IsADirectoryError, ValueError, OutputLockedError) as error:
        sys.exit(f"create_pretraining_data: {error}")
    except (OSError, tf.errors.OpError) as error:  # a full disk, say: a rerun resumes
        sys.exit(
            f"create_pretraining_data: --output_file: {_OUTPUT_FILE.value} cannot be written: "
            + str(error).splitlines()[0]
        )
    for line in summary_lines(summary):
        logging.info(line)
        print(line)


if __name__ == "__main__":
    # Marked here, not on import, so tests that import this module parse other flags freely.
    flags.mark_flags_as_required(["input_file", "output_file", "vocab_file"])
    run_program(main)
