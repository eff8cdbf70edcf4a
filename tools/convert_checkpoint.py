r"""Converts a BERT checkpoint between formats.

Reads a Hugging Face directory (config.json + safetensors), an original
google-research release (bert_config.json + bert_model.ckpt.*), a keras-hub
BERT preset (config.json + model.weights.h5), a `bert_keras` directory or a
`.keras` file of a BertBackbone or of a task model (whose head, vocabulary and
packed length are kept, as its `save_to_preset` writes them).
Writes the project's format by default (config.json, model.safetensors with
the heads, bert_keras.json and the tokenizer files; transformers loads it),
with --output_format=original the google-research release's
bert_config.json, bert_model.ckpt.* and vocab.txt, or with
--output_format=keras_hub a keras-hub preset (`keras_hub.models.BertBackbone`,
`BertTokenizer` and, with a classifier head, `BertTextClassifier` load it).
Both compute GELU's tanh form only: a checkpoint whose config.json says
"hidden_act": "gelu" (the exact erf form: Hugging Face's bert-base-uncased,
MiniLM and most others) is refused there and stays in the project's format.

Example (bert_base_uncased is what the first command writes, from Google's
release, so its GELU is the tanh form):
    python -m tools.convert_checkpoint \
        --source uncased_L-12_H-768_A-12 --output_dir bert_base_uncased
    python -m tools.convert_checkpoint --output_format=original \
        --source bert_base_uncased --output_dir uncased_L-12_H-768_A-12
    python -m tools.convert_checkpoint --output_format=keras_hub \
        --source bert_base_uncased --output_dir bert_base_en_uncased_keras_hub
    python -m tools.convert_checkpoint --drop_heads=masked_lm,next_sentence \
        --source bert_base_uncased --output_dir bert_base_uncased_backbone
"""

import os
import sys

from absl import app
from absl import flags

from bert_keras.atomic_files import file_in_the_way
from bert_keras.checkpoints import FORMATS
from bert_keras.checkpoints import HEAD_NAMES
from bert_keras.checkpoints import OUTPUT_FORMATS
from bert_keras.models.checkpoint_conversion import OutputDirectoryError
from bert_keras.models.checkpoint_conversion import convert_checkpoint
from bert_keras.training.garbage_collection import freeze_heap_at_exit
from bert_keras.training.usage_errors import run_program

_SOURCE = flags.DEFINE_string(
    "source",
    None,
    "Checkpoint directory, or a BertBackbone's or task model's .keras file, to read.",
)
_OUTPUT_DIR = flags.DEFINE_string(
    "output_dir", None, "Directory to write; must not exist or be empty, unless --overwrite."
)
_FORMAT = flags.DEFINE_enum(
    "format", "auto", ("auto",) + FORMATS, "Format of --source; auto detects it by its files."
)
_OUTPUT_FORMAT = flags.DEFINE_enum(
    "output_format",
    "bert_keras",
    OUTPUT_FORMATS,
    "bert_keras (Hugging Face compatible), original or keras_hub (a keras-hub preset).",
)
_OVERWRITE = flags.DEFINE_bool("overwrite", False, "Replace a non-empty --output_dir.")
_DROP_HEADS = flags.DEFINE_list(
    "drop_heads",
    [],
    f"Heads to leave out, comma-separated, of {', '.join(HEAD_NAMES)} "
    "(e.g. masked_lm,next_sentence: a release's pretraining heads).",
)
flags.register_validator(
    "drop_heads",
    lambda names: set(names) <= set(HEAD_NAMES),
    message=f"names a head that does not exist; the heads are {', '.join(HEAD_NAMES)}.",
)


def output_dir_problem(output_dir, overwrite):
    """Why --output_dir cannot be written, naming the flag; None when it can.

    Example:
    >>> output_dir_problem("/", overwrite=False)
    '--output_dir: / exists and is not empty; choose another, or pass --overwrite to replace it.'
    """
    if not output_dir:
        return "--output_dir is empty; name the directory to write."
    blocking = file_in_the_way(output_dir)
    if blocking == os.path.abspath(output_dir):
        return f"--output_dir: {output_dir} is a file; name a directory to write."
    if blocking:
        return f"--output_dir: {blocking} is a file, so {output_dir} cannot be made."
    if os.path.isdir(output_dir) and os.listdir(output_dir) and not overwrite:
        return (
            f"--output_dir: {output_dir} exists and is not empty; choose another, or pass "
            "--overwrite to replace it."
        )
    return None


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    problem = output_dir_problem(_OUTPUT_DIR.value, _OVERWRITE.value)
    if problem:
        sys.exit(f"convert_checkpoint: {problem}")
    try:
        checkpoint = convert_checkpoint(
            _SOURCE.value,
            _OUTPUT_DIR.value,
            format=_FORMAT.value,
            overwrite=_OVERWRITE.value,
            output_format=_OUTPUT_FORMAT.value,
            drop_heads=_DROP_HEADS.value,
        )
    except OutputDirectoryError as error:
        sys.exit(f"convert_checkpoint: --output_dir: {error}")
    except (OSError, ValueError) as error:
        sys.exit(f"convert_checkpoint: {error}")
    heads = sorted(checkpoint.head_weights) or "none"
    print(
        f"Wrote {_OUTPUT_DIR.value} from the {checkpoint.format} checkpoint "
        f"{_SOURCE.value} (heads: {heads})."
    )


if __name__ == "__main__":
    freeze_heap_at_exit()
    # Marked here, not on import, so tests that import this module parse other flags freely.
    flags.mark_flags_as_required(["source", "output_dir"])
    run_program(main)
