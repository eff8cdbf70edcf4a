r"""Exports a fine-tuned or pretrained BERT as a SavedModel that stock TF Serving loads.

Raw text in, answers out (labels, tags per word, answer spans, choices or
features, by the model's task): the tokenizer runs in the graph. A BERT4Rec
run's OUTPUT_DIR exports too: item histories in, the top-k next items out. Writes
EXPORT_BASE/<version>/ (the next free version unless --version), atomically;
point TF Serving's --model_base_path at EXPORT_BASE. The model is traced on
Keras' TensorFlow backend whatever backend trained it.

Example:
    python -m tools.export_saved_model --model=/runs/sst2/export \
        --export_base=/models/sst2 --sequence_length=128
"""

import os
import sys

from absl import app
from absl import flags

from bert_keras.training.garbage_collection import freeze_heap_at_exit
from bert_keras.training.garbage_collection import long_lived_objects
from bert_keras.training.usage_errors import run_program

_MODEL = flags.DEFINE_string(
    "model",
    None,
    "Checkpoint directory (OUTPUT_DIR/export of tasks.classify, tasks.tag, tasks.squad, "
    "tasks.multiple_choice or tasks.pretrain; a Hugging Face or original release), .keras file, "
    "or the OUTPUT_DIR of tasks.recommend.",
)
_EXPORT_BASE = flags.DEFINE_string(
    "export_base", None, "The model's directory; versions are written below it."
)
_VERSION = flags.DEFINE_integer("version", None, "Version number; the next free one if unset.")
_SEQUENCE_LENGTH = flags.DEFINE_integer(
    "sequence_length",
    None,
    "Longest packed text: classifiers truncate longer ones, taggers and question answerers "
    "split them into windows.",
)
_TEXT_PAIR = flags.DEFINE_bool(
    "text_pair",
    None,
    "The classifier takes sentence pairs (signatures get text_pair); by default what the "
    "checkpoint recorded (tasks.classify records it).",
)
_OVERWRITE = flags.DEFINE_bool("overwrite", False, "Replace an existing version directory.")
_TOP_K = flags.DEFINE_integer(
    "top_k", None, "Items a recommender returns per history (10, or its number of items if fewer)."
)
_NULL_SCORE_DIFF_THRESHOLD = flags.DEFINE_float(
    "null_score_diff_threshold",
    None,
    'SQuAD 2.0 question answerers: answer "" when the null score beats the best span by more '
    "than this (tasks.squad's flag; 0.0 if unset).",
)
_LABEL_NAMES = flags.DEFINE_list(
    "label_names",
    None,
    "A classifier's or tagger's class names in order, comma-separated (B-PER,I-PER,O,...); by "
    "default the checkpoint's. A .keras file records none: without them it answers class numbers.",
)

# tasks.squad's flags that shape a question answerer's answers: its checkpoints
# record the first two (training settings), not the last two (prediction's).
_RECORDED_DEFAULT = "by default what the checkpoint recorded, else tasks.squad's default"
_QUESTION_ANSWERING = {
    name: flags.DEFINE_integer(
        name,
        None,
        f"Question answerers: tasks.squad's --{name} ({help_text}); {default}.",
    )
    for name, help_text, default in (
        ("doc_stride", "tokens between context windows' starts", _RECORDED_DEFAULT),
        ("max_query_length", "most question tokens kept", _RECORDED_DEFAULT),
        ("n_best_size", "candidates kept per window", "tasks.squad's default if unset"),
        ("max_answer_length", "longest answer, in tokens", "tasks.squad's default if unset"),
    )
}


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if _VERSION.value is not None and _VERSION.value < 1:
        sys.exit(f"export_saved_model: --version is {_VERSION.value} but must be at least 1.")
    os.environ["KERAS_BACKEND"] = "tensorflow"
    with long_lived_objects():
        import tensorflow as tf

        from bert_keras.export.saved_model import export_saved_model

    try:
        directory = export_saved_model(
            _MODEL.value,
            _EXPORT_BASE.value,
            version=_VERSION.value,
            sequence_length=_SEQUENCE_LENGTH.value,
            text_pair=_TEXT_PAIR.value,
            overwrite=_OVERWRITE.value,
            top_k=_TOP_K.value,
            null_score_diff_threshold=_NULL_SCORE_DIFF_THRESHOLD.value,
            label_names=_LABEL_NAMES.value,
            **{name: flag.value for name, flag in _QUESTION_ANSWERING.items()},
        )
    except FileExistsError as error:
        if _VERSION.value is None:
            sys.exit(f"export_saved_model: {error}")
        version = os.path.join(_EXPORT_BASE.value, str(_VERSION.value))
        sys.exit(
            f"export_saved_model: {version} exists: choose another --version (unset, the next "
            "free one), or pass --overwrite to replace it."
        )
    except (FileNotFoundError, ValueError) as error:
        sys.exit(f"export_saved_model: {error}")
    except (OSError, tf.errors.OpError) as error:  # a full disk, say: nothing is left half written
        sys.exit(
            f"export_saved_model: --export_base: {_EXPORT_BASE.value} cannot be written: "
            + str(error).splitlines()[0]
        )
    print(f"Wrote {directory}")


if __name__ == "__main__":
    freeze_heap_at_exit()
    flags.mark_flags_as_required(["model", "export_base"])
    run_program(main)
