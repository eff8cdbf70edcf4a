"""Writes a `Checkpoint` in the project's format, the original release's or keras-hub's.

All go through `bert_keras.atomic_files.atomic_directory`: an interrupted
write leaves no partial directory.
"""

import json
import os
import shutil

from absl import logging

from bert_keras.atomic_files import atomic_directory
from bert_keras.checkpoints import huggingface
from bert_keras.checkpoints import keras_hub
from bert_keras.checkpoints import original
from bert_keras.checkpoints.checkpoint import HEAD_NAMES
from bert_keras.checkpoints.checkpoint import OWN_CONFIG_FILE
from bert_keras.checkpoints.name_tables import checkpoint_tensors
from bert_keras.checkpoints.vocabulary import TOKENIZER_JSON
from bert_keras.checkpoints.vocabulary import check_vocabulary_fits
from bert_keras.checkpoints.vocabulary import read_vocabulary
from bert_keras.checkpoints.vocabulary import write_vocabulary

OUTPUT_FORMATS = ("bert_keras", "original", "keras_hub")
# sentence-transformers' settings, its max_seq_length among them: where
# `BertSentenceEncoder.from_preset` reads the length it cuts texts at.
SENTENCE_TRANSFORMERS_CONFIG = "sentence_bert_config.json"


def write_checkpoint(checkpoint, directory, overwrite=False, format="bert_keras"):
    """Writes a `Checkpoint` in the project's format, the original's or keras-hub's.

    "bert_keras" writes config.json (the transformers class that holds
    exactly the checkpoint's heads, and id2label for named labels),
    model.safetensors, bert_keras.json (the exact backbone config and the
    tokenizer settings), and the tokenizer files: vocab.txt and the source's
    tokenizer.json (unless its vocabulary is another, with a warning),
    tokenizer_config.json and special_tokens_map.json when present, else a
    tokenizer_config.json from the tokenizer settings.
    "original" writes the google-research release's bert_config.json,
    bert_model.ckpt.* (variables named as modeling.py's scopes) and vocab.txt.
    "keras_hub" writes a keras-hub BERT preset that
    `keras_hub.models.BertBackbone.from_preset` and `BertTokenizer.from_preset`
    load (`BertTextClassifier.from_preset` too with a classifier head); see
    `bert_keras.checkpoints.keras_hub`. Both add a bert_keras.json with what
    their own files cannot say (the tokenizer settings, the label names, the
    task config), which reading the directory back restores. Every format
    copies the source directory's sentence_bert_config.json, so a
    `BertSentenceEncoder` loaded from the output cuts texts where the
    source's did.

    Args:
        checkpoint: a `Checkpoint`, e.g. from `read_checkpoint`.
        directory: the output directory; must not exist or be empty unless
            `overwrite`.
        overwrite: replace an existing non-empty `directory`.
        format: one of `OUTPUT_FORMATS`: "bert_keras", "original" or "keras_hub".

    Raises:
        FileExistsError: `directory` is not empty and not `overwrite`.
        ValueError: a set of heads no transformers class holds, label names
            that do not fit the head, or (original, keras_hub) a head,
            activation, epsilon or dropout the format lacks, naming it; a
            vocabulary of more tokens than the word embeddings.

    Example:
    >>> import tempfile
    >>> from bert_keras.checkpoints.reading import detect_format, read_checkpoint
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> directory = tempfile.mkdtemp() + "/tiny"
    >>> BertBackbone.from_preset("bert_tiny").save_to_preset(directory)
    >>> write_checkpoint(read_checkpoint(directory), directory + "_tf1", format="original")
    >>> detect_format(directory + "_tf1")
    'original'
    """
    check_vocabulary_fits(checkpoint.vocabulary_file, checkpoint.backbone_config)
    if format == "original":
        _write_original(checkpoint, directory, overwrite)
    elif format == "bert_keras":
        _write_own(checkpoint, directory, overwrite)
    elif format == "keras_hub":
        _write_keras_hub(checkpoint, directory, overwrite)
    else:
        raise ValueError(
            f"Unknown output format {format!r}; expected one of {list(OUTPUT_FORMATS)}."
        )


def _write_own(checkpoint, directory, overwrite):
    architecture = _architecture(checkpoint)
    tensors = checkpoint_tensors(checkpoint, huggingface, huggingface.ENCODER_PREFIX)
    config = huggingface.config_json(
        checkpoint.backbone_config, architecture, checkpoint.num_labels()
    )
    config.update(_label_config(checkpoint.label_names, checkpoint.num_named_labels()))
    own_config = {
        "class_name": "BertBackbone",
        "config": checkpoint.backbone_config,
        "tokenizer": checkpoint.tokenizer_settings,
    }
    if checkpoint.task_config:
        own_config["task"] = checkpoint.task_config
    with atomic_directory(directory, overwrite) as staging:
        huggingface.write_tensors(staging, tensors)
        _write_json(os.path.join(staging, huggingface.CONFIG_FILE), config)
        _write_json(os.path.join(staging, OWN_CONFIG_FILE), own_config)
        _write_tokenizer_files(checkpoint, staging)
        _copy_sentence_transformers_config(checkpoint, staging)


def _write_original(checkpoint, directory, overwrite):
    unsupported = sorted(set(checkpoint.head_weights) - set(original.HEAD_TABLES))
    if unsupported:
        raise ValueError(
            f"The original format has no variables for the heads {unsupported} "
            f"(it has {sorted(original.HEAD_TABLES)}); keep this model in the bert_keras format."
        )
    config = original.config_json(checkpoint.backbone_config)
    tensors = checkpoint_tensors(checkpoint, original, "")
    with atomic_directory(directory, overwrite) as staging:
        original.write_tensors(staging, tensors)
        _write_json(os.path.join(staging, original.CONFIG_FILE), config)
        _write_json(os.path.join(staging, OWN_CONFIG_FILE), _settings_beside(checkpoint))
        if checkpoint.vocabulary_file is not None:
            write_vocabulary(
                read_vocabulary(checkpoint.vocabulary_file),
                os.path.join(staging, original.VOCABULARY_FILE),
            )
        _copy_sentence_transformers_config(checkpoint, staging)


def _write_keras_hub(checkpoint, directory, overwrite):
    with atomic_directory(directory, overwrite) as staging:
        keras_hub.write_preset(checkpoint, staging)
        _write_json(os.path.join(staging, OWN_CONFIG_FILE), _settings_beside(checkpoint))
        _copy_sentence_transformers_config(checkpoint, staging)


def _settings_beside(checkpoint):
    """bert_keras.json for a format that cannot hold the tokenizer settings, labels or task."""
    settings = {"tokenizer": checkpoint.tokenizer_settings}
    if checkpoint.label_names is not None:
        _label_config(checkpoint.label_names, checkpoint.num_named_labels())  # they fit the head
        settings["label_names"] = list(checkpoint.label_names)
    if checkpoint.task_config:
        settings["task"] = checkpoint.task_config
    return settings


def _architecture(checkpoint):
    """The transformers class of `checkpoint`'s heads (a classifier of choices: multiple choice)."""
    heads = tuple(sorted(checkpoint.head_weights, key=HEAD_NAMES.index))
    by_heads = {
        tuple(sorted(key, key=HEAD_NAMES.index)): name
        for key, name in huggingface.ARCHITECTURES.items()
    }
    if heads not in by_heads:
        raise ValueError(
            f"No transformers class holds exactly the heads {list(heads)}; "
            f"supported: {[list(key) for key in by_heads]}."
        )
    if heads == ("classifier",) and _scores_choices(checkpoint):
        return huggingface.MULTIPLE_CHOICE_ARCHITECTURE
    return by_heads[heads]


def _scores_choices(checkpoint):
    """Whether its classifier scores choices: a multiple-choice export, or transformers' class."""
    if (checkpoint.task_config or {}).get("task") == "multiple_choice":
        return True
    architectures = (checkpoint.extra_config or {}).get("architectures")
    return architectures == [huggingface.MULTIPLE_CHOICE_ARCHITECTURE]


def _label_config(label_names, num_labels):
    """config.json's id2label and label2id for `label_names` (none without them)."""
    if label_names is None:
        return {}
    if len(label_names) != num_labels:
        raise ValueError(
            f"The checkpoint names {len(label_names)} labels ({list(label_names)}) but its "
            f"classifier or token_classifier head has {num_labels or 'no'} outputs."
        )
    _check_label_names(list(label_names))
    return {
        "id2label": {str(index): name for index, name in enumerate(label_names)},
        "label2id": {name: index for index, name in enumerate(label_names)},
    }


def _check_label_names(names):
    """Refuses repeated or empty names: label2id would lose or garble them.

    A name is a string, or an int as run_glue.py names a csv task's integer
    classes.
    """
    named = all(
        (isinstance(name, str) and name.strip())
        or (isinstance(name, int) and not isinstance(name, bool))
        for name in names
    )
    if not named or len(set(map(str, names))) != len(names):
        raise ValueError(
            f"The label names {names} must be distinct, non-empty strings (or integer classes)."
        )


def _write_tokenizer_files(checkpoint, staging):
    tokens = None
    if checkpoint.vocabulary_file is not None:
        tokens = read_vocabulary(checkpoint.vocabulary_file)
        write_vocabulary(tokens, os.path.join(staging, "vocab.txt"))
    if checkpoint.directory is not None and checkpoint.format in ("huggingface", "bert_keras"):
        for name in huggingface.TOKENIZER_FILES[1:]:
            source = os.path.join(checkpoint.directory, name)
            if os.path.isfile(source) and not _other_vocabulary(source, tokens, checkpoint):
                shutil.copyfile(source, os.path.join(staging, name))
    config_path = os.path.join(staging, "tokenizer_config.json")
    if checkpoint.vocabulary_file is not None and not os.path.exists(config_path):
        settings = checkpoint.tokenizer_settings
        _write_json(
            config_path,
            {
                "tokenizer_class": "BertTokenizer",
                "do_lower_case": settings["lowercase"],
                "strip_accents": settings["strip_accents"],
                "tokenize_chinese_chars": settings["tokenize_chinese_chars"],
                "model_max_length": checkpoint.backbone_config["max_sequence_length"],
            },
        )


def _other_vocabulary(path, tokens, checkpoint):
    """Whether `path` is a tokenizer.json whose WordPiece tokens are not `tokens`; warns where so.

    A vocab.txt edited by hand (a new word in an [unused] slot, as the
    original's README suggests) leaves the tokenizer.json beside it stale:
    copied, transformers would tokenize with it and bert_keras with the
    vocab.txt. It is left out, and transformers builds its tokenizer from
    the vocab.txt written.
    """
    if tokens is None or os.path.basename(path) != TOKENIZER_JSON:
        return False
    if path == checkpoint.vocabulary_file:
        return False
    try:
        theirs = read_vocabulary(path)
    except ValueError:  # not a WordPiece tokenizer.json: no vocabulary to disagree with
        return False
    if theirs == tokens:
        return False
    first = next(
        (index for index, (ours, its) in enumerate(zip(tokens, theirs)) if ours != its),
        min(len(tokens), len(theirs)),
    )
    logging.warning(
        "%s and %s hold other vocabularies (%d and %d tokens; id %d is %r and %r): %s is not "
        "written, so that transformers tokenizes with the vocab.txt that bert_keras reads.",
        checkpoint.vocabulary_file,
        path,
        len(tokens),
        len(theirs),
        first,
        tokens[first] if first < len(tokens) else None,
        theirs[first] if first < len(theirs) else None,
        os.path.basename(path),
    )
    return True


def _copy_sentence_transformers_config(checkpoint, staging):
    """Copies the source directory's sentence_bert_config.json, where it has one."""
    if checkpoint.directory is None:
        return
    source = os.path.join(checkpoint.directory, SENTENCE_TRANSFORMERS_CONFIG)
    if os.path.isfile(source):
        shutil.copyfile(source, os.path.join(staging, SENTENCE_TRANSFORMERS_CONFIG))


def _write_json(path, value):
    with open(path, "w", encoding="utf-8") as file:
        json.dump(value, file, indent=2, sort_keys=True)
        file.write("\n")
