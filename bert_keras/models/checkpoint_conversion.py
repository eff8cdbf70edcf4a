"""Converting a checkpoint between formats, checked against the model it describes."""

import os

from bert_keras.atomic_files import check_output_directory
from bert_keras.checkpoints import read_checkpoint
from bert_keras.checkpoints import write_checkpoint
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.checkpoint_weights import apply_checkpoint


def convert_checkpoint(
    source, output_dir, format="auto", overwrite=False, output_format="bert_keras"
):
    """Reads any supported checkpoint and writes it in the project's format, the original's or keras-hub's.

    The backbone weights are checked against a `BertBackbone` built from the
    config before anything is written; heads are carried over.

    Args:
        source: checkpoint directory (or .keras file).
        output_dir: where to write; must not exist or be empty unless
            `overwrite`.
        format: the source's format, "auto" or one of `FORMATS`.
        overwrite: replace a non-empty `output_dir`.
        output_format: "bert_keras" (Hugging Face compatible), "original"
            (the google-research release's TF checkpoint) or "keras_hub"
            (a keras-hub preset directory).

    Returns:
        The `Checkpoint` that was written.

    Example:
    >>> import tempfile
    >>> directory = tempfile.mkdtemp() + "/tiny"
    >>> BertBackbone.from_preset("bert_tiny").save_to_preset(directory)
    >>> convert_checkpoint(directory, directory + "_converted").format
    'bert_keras'
    """
    check_output_directory(os.fspath(output_dir), overwrite)
    checkpoint = read_checkpoint(source, format=format)
    apply_checkpoint(BertBackbone.from_config(checkpoint.backbone_config), checkpoint)
    write_checkpoint(checkpoint, output_dir, overwrite=overwrite, format=output_format)
    return checkpoint
