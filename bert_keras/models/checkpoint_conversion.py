"""Converting a checkpoint between formats, checked against the model it describes."""

import os
import tempfile

from absl import logging

from bert_keras.atomic_files import PARTIAL_MARKER
from bert_keras.atomic_files import check_output_directory
from bert_keras.checkpoints import detect_format
from bert_keras.checkpoints import keras_file_checkpoint
from bert_keras.checkpoints import keras_hub
from bert_keras.checkpoints import load_keras_file
from bert_keras.checkpoints import read_checkpoint
from bert_keras.checkpoints import vocabulary_file
from bert_keras.checkpoints import write_checkpoint
from bert_keras.checkpoints.vocabulary import read_vocabulary
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_task import BertTask
from bert_keras.models.checkpoint_weights import apply_checkpoint
from bert_keras.models.checkpoint_weights import refuse_quantized


class OutputDirectoryError(OSError):
    """`convert_checkpoint`'s output directory cannot be written; the message says why.

    Example:
    >>> str(OutputDirectoryError("/proc/out cannot be written: ..."))
    '/proc/out cannot be written: ...'
    """


def convert_checkpoint(
    source, output_dir, format="auto", overwrite=False, output_format="bert_keras", drop_heads=()
):
    """Reads any supported checkpoint and writes it in the project's format, the original's or keras-hub's.

    The backbone weights are checked against a `BertBackbone` built from the
    config before anything is written; heads are carried over. A task
    model's `.keras` file gives what its `save_to_preset` writes: the
    backbone, the head and the preprocessor's vocabulary, tokenizer settings
    and packed length. A quantized model (a `.keras` source saved after
    `quantize()`) is refused, as `save_to_preset` refuses it: a checkpoint
    holds float weights.
    A source with no vocabulary, or an empty one, is converted with a
    warning: a model from `output_dir` then takes token ids, not text.

    Args:
        source: checkpoint directory, or a `BertBackbone`'s or task model's
            .keras file.
        output_dir: where to write; must not exist or be empty unless
            `overwrite`.
        format: the source's format, "auto" or one of `FORMATS`.
        overwrite: replace a non-empty `output_dir`.
        output_format: "bert_keras" (Hugging Face compatible), "original"
            (the google-research release's TF checkpoint) or "keras_hub"
            (a keras-hub preset directory).
        drop_heads: names of heads (see `bert_keras.checkpoints.HEAD_NAMES`)
            to leave out, e.g. a release's pretraining heads
            `("masked_lm", "next_sentence")`; heads the source lacks are
            skipped.

    Returns:
        The `Checkpoint` that was written.

    Raises:
        FileExistsError: `output_dir` is a file or a non-empty directory
            (without `overwrite`).
        OutputDirectoryError: `output_dir` cannot be written, naming it
            and the reason.
        ValueError: a checkpoint that cannot be read or written in
            `output_format`, or a quantized one; an `output_dir` that holds
            `source` (which `overwrite` would delete); a `drop_heads` name
            that is not a head.

    Example:
    >>> import tempfile
    >>> directory = tempfile.mkdtemp() + "/tiny"
    >>> BertBackbone.from_preset("bert_tiny").save_to_preset(directory)
    >>> convert_checkpoint(directory, directory + "_converted").format
    'bert_keras'
    """
    check_output_directory(os.fspath(output_dir), overwrite)
    _refuse_replacing_the_source(source, output_dir, overwrite)
    with tempfile.TemporaryDirectory() as scratch:
        checkpoint = _read_source(source, format, scratch).without_heads(drop_heads)
        backbone = BertBackbone.from_config(checkpoint.backbone_config)
        _refuse_quantized(backbone, source)
        apply_checkpoint(backbone, checkpoint)
        _warn_without_vocabulary(checkpoint, source, output_dir)
        try:
            write_checkpoint(checkpoint, output_dir, overwrite=overwrite, format=output_format)
        except OSError as error:
            if not _is_about(error, output_dir):
                raise
            raise OutputDirectoryError(
                f"{output_dir} cannot be written: {_reason(error)}."
            ) from error
    if output_format == "keras_hub":  # written without them, with a warning
        checkpoint = checkpoint.without_heads(keras_hub.unsupported_heads(checkpoint))
    if checkpoint.vocabulary_file is not None and not os.path.exists(checkpoint.vocabulary_file):
        checkpoint.vocabulary_file = vocabulary_file(output_dir)  # a task model's was in scratch
    return checkpoint


def _read_source(source, format, scratch):
    """`source`'s `Checkpoint`; a task model's .keras file gives what its `save_to_preset` writes."""
    if format not in ("auto", "keras") or detect_format(source) != "keras":
        return read_checkpoint(source, format=format)
    model, path = load_keras_file(source)
    if not isinstance(model, (BertTask, BertBackbone)):
        raise ValueError(
            f"{path} holds a {type(model).__name__}, neither a BertBackbone nor a bert_keras task "
            "model (BertClassifier, ...)."
        )
    if not isinstance(model, BertTask):
        return keras_file_checkpoint(model, path)
    _refuse_quantized(model, source)
    checkpoint = model.preset_checkpoint(scratch)
    checkpoint.format = "keras"
    return checkpoint


def _refuse_replacing_the_source(source, output_dir, overwrite):
    """Refuses to replace a directory that holds `source` (converting in place is fine)."""
    source, output_dir = os.path.realpath(source), os.path.realpath(output_dir)
    if (
        overwrite
        and source != output_dir
        and os.path.commonpath([source, output_dir]) == output_dir
    ):
        raise ValueError(
            f"--output_dir {output_dir} holds the checkpoint being converted ({source}), which "
            "--overwrite would delete; choose another output directory."
        )


def _refuse_quantized(backbone, source):
    """Raises `save_to_preset`'s error for a quantized backbone, naming `source`."""
    try:
        refuse_quantized(backbone)
    except ValueError as error:
        raise ValueError(f"Cannot convert {source}: {error}") from None


def _warn_without_vocabulary(checkpoint, source, output_dir):
    """Warns where `source` has no vocabulary or an empty one, so `output_dir` takes no text."""
    if checkpoint.vocabulary_file is None:
        logging.warning(
            "%s has no vocabulary (vocab.txt or tokenizer.json), so %s will have none: a model "
            "from it takes token ids, not text.",
            source,
            output_dir,
        )
    elif not read_vocabulary(checkpoint.vocabulary_file):
        logging.warning(
            "%s holds no tokens, so %s will have an empty vocabulary: a model from it takes "
            "token ids, not text.",
            checkpoint.vocabulary_file,
            output_dir,
        )


def _is_about(error, output_dir):
    """Whether an OSError of writing names a path on the way to `output_dir` or beside it."""
    output = os.path.abspath(output_dir)
    parent = os.path.dirname(output)
    paths = [os.path.abspath(os.fspath(p)) for p in (error.filename, error.filename2) if p]
    return any(
        os.path.commonpath([path, output]) == path or os.path.dirname(path) == parent
        for path in paths
    )


def _reason(error):
    """The error's reason and path; the staging directory it names as the folder that holds it."""
    path = os.fspath(error.filename)
    name = os.path.basename(path)
    if PARTIAL_MARKER in name:
        return f"{error.strerror}, making a staging directory in {os.path.dirname(path)}"
    return f"{error.strerror}: {path}"
