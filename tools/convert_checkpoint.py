r"""Converts a BERT checkpoint between formats.

Reads a Hugging Face directory (config.json + safetensors), an original
google-research release (bert_config.json + bert_model.ckpt.*), a keras-hub
BERT preset (config.json + model.weights.h5), a `bert_keras` directory or a
`.keras` file. Writes the project's format by default (config.json,
model.safetensors with the heads, bert_keras.json and the tokenizer files;
transformers loads it), with --output_format=original the google-research
release's bert_config.json, bert_model.ckpt.* and vocab.txt, or with
--output_format=keras_hub a keras-hub preset (`keras_hub.models.BertBackbone`,
`BertTokenizer` and, with a classifier head, `BertTextClassifier` load it).

Example:
    python -m tools.convert_checkpoint \
        --source uncased_L-12_H-768_A-12 --output_dir bert_base_uncased
    python -m tools.convert_checkpoint --output_format=original \
        --source bert_base_uncased --output_dir uncased_L-12_H-768_A-12
    python -m tools.convert_checkpoint --output_format=keras_hub \
        --source bert_base_uncased --output_dir bert_base_en_uncased_keras_hub
"""

import sys

from absl import app
from absl import flags

from bert_keras.checkpoints import FORMATS
from bert_keras.checkpoints import OUTPUT_FORMATS
from bert_keras.models.checkpoint_conversion import convert_checkpoint
from bert_keras.training.garbage_collection import freeze_heap_at_exit

_SOURCE = flags.DEFINE_string("source", None, "Checkpoint directory (or .keras file) to read.")
_OUTPUT_DIR = flags.DEFINE_string(
    "output_dir", None, "Directory to write; must not exist or be empty."
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


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    try:
        checkpoint = convert_checkpoint(
            _SOURCE.value,
            _OUTPUT_DIR.value,
            format=_FORMAT.value,
            overwrite=_OVERWRITE.value,
            output_format=_OUTPUT_FORMAT.value,
        )
    except (FileNotFoundError, FileExistsError, ValueError) as error:
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
    app.run(main)
