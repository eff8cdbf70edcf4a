"""Loads any supported checkpoint directory; saves the project's own format.

Formats, recognised by what a directory holds:

- "bert_keras" (the project's own): a Hugging Face directory plus
  `bert_keras.json` with the exact `BertBackbone` config, so settings
  config.json cannot express (dtype policy, name) survive. Preferred when
  present.
- "huggingface": config.json + model.safetensors (or a sharded index).
- "original": the google-research release, bert_config.json + a TF checkpoint.
- "keras": a `.keras` file of a `BertBackbone`, loaded with `safe_mode=True`.

Loading is strict: a missing, unexpected or wrongly shaped tensor is an error
that names every one. The only tensors skipped are training state (Adam
slots, global_step), transformers' `position_ids` buffer and its tied
decoder; head tensors are returned in `Checkpoint.head_weights` for task
models and logged at debug level when only a backbone is loaded.
"""

import contextlib
import dataclasses
import glob
import json
import os
import re
import shutil
import tempfile

import keras
import numpy as np
from absl import logging

from bert_keras.checkpoints import huggingface
from bert_keras.checkpoints import original
from bert_keras.models.bert_backbone import BertBackbone

OWN_CONFIG_FILE = "bert_keras.json"
FORMATS = ("bert_keras", "huggingface", "original", "keras")
OUTPUT_FORMATS = ("bert_keras", "original")
HEAD_NAMES = ("masked_lm", "next_sentence", "classifier", "token_classifier", "question_answering")
POOLER_PATHS = ("pooler_dense/kernel", "pooler_dense/bias")

LAYOUTS = {
    # name: (checkpoint tensors -> our array, (our array, count) -> checkpoint tensors)
    "same": (lambda parts: parts[0], lambda array, count: [array]),
    "transposed": (lambda parts: parts[0].T, lambda array, count: [array.T]),
    "concatenated": (
        lambda parts: np.concatenate(parts, axis=-1),
        lambda array, count: np.split(array, count, axis=-1),
    ),
    "transposed_concatenated": (
        lambda parts: np.concatenate([part.T for part in parts], axis=-1),
        lambda array, count: [part.T for part in np.split(array, count, axis=-1)],
    ),
}


@dataclasses.dataclass
class Checkpoint:
    """Everything a checkpoint directory holds, in `bert_keras` terms.

    Attributes:
        backbone_config: `BertBackbone` constructor arguments.
        backbone_weights: dict `BertBackbone` weight path (e.g.
            "transformer_layer_0/intermediate_dense/kernel") -> numpy array.
            Lacks `POOLER_PATHS` only for classes built without a pooler
            (`BertForMaskedLM`, `BertForTokenClassification`, ...).
        head_weights: dict head name -> dict weight path -> numpy array, for
            the heads the checkpoint holds: "masked_lm" (the `MaskedLMHead`
            paths `transform_dense/{kernel,bias}`,
            `transform_layer_norm/{gamma,beta}`, `output_bias` `[vocab]`; its
            output kernel is the tied token embedding), "next_sentence"
            (`kernel` `[hidden, 2]`, `bias` `[2]`), "classifier" and
            "token_classifier" (`kernel` `[hidden, labels]`, `bias`
            `[labels]`), "question_answering" (`kernel` `[hidden, 2]`,
            `bias` `[2]`, start then end logits). Kernels are `[in, out]`.
        vocabulary_file: path of vocab.txt, or None.
        tokenizer_config: dict, e.g. `{"do_lower_case": True}` (Hugging
            Face's tokenizer_config.json when there is one).
        format: one of `FORMATS`.
        directory: where it was read from.
        sources: dict weight path (backbone, or "head/path") -> the
            checkpoint tensor names it came from, for error messages.
        extra_config: the format's own config dict (e.g. config.json's
            id2label), untouched.
        label_names: the names of the classifier or token-classifier head's
            outputs, in order (config.json's id2label), or None.

    Example:
    >>> import tempfile
    >>> directory = tempfile.mkdtemp() + "/tiny"
    >>> BertBackbone.from_preset("bert_tiny").save_to_preset(directory)
    >>> checkpoint = load_checkpoint(directory)
    >>> checkpoint.format, checkpoint.backbone_config["hidden_dim"]
    ('bert_keras', 128)
    >>> checkpoint.backbone_weights["pooler_dense/kernel"].shape
    (128, 128)
    """

    backbone_config: dict
    backbone_weights: dict
    head_weights: dict = dataclasses.field(default_factory=dict)
    vocabulary_file: str = None
    tokenizer_config: dict = dataclasses.field(default_factory=dict)
    format: str = None
    directory: str = None
    sources: dict = dataclasses.field(default_factory=dict)
    extra_config: dict = dataclasses.field(default_factory=dict)
    label_names: list = None


def detect_format(path):
    """Names the checkpoint format at `path` (a directory or a .keras file).

    Raises:
        FileNotFoundError: `path` does not exist.
        ValueError: nothing recognised (the message lists what was looked
            for and what is there), or only pickled PyTorch weights.

    Example:
    >>> import tempfile
    >>> directory = tempfile.mkdtemp() + "/tiny"
    >>> BertBackbone.from_preset("bert_tiny").save_to_preset(directory)
    >>> detect_format(directory)
    'bert_keras'
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"Checkpoint path {path} does not exist.")
    if os.path.isfile(path):
        if path.endswith(".keras"):
            return "keras"
        raise ValueError(f"{path} is a file; expected a checkpoint directory or a .keras file.")
    if huggingface.is_checkpoint(path):
        return (
            "bert_keras" if os.path.isfile(os.path.join(path, OWN_CONFIG_FILE)) else "huggingface"
        )
    if original.is_checkpoint(path):
        return "original"
    if _keras_files(path):
        return "keras"
    if huggingface.has_pickled_weights(path):
        raise ValueError(huggingface.pickled_weights_message(path))
    raise ValueError(
        f"No checkpoint recognised in {path}. Looked for: {OWN_CONFIG_FILE} with "
        f"{huggingface.CONFIG_FILE} and {huggingface.WEIGHTS_FILE} (bert_keras); "
        f"{huggingface.CONFIG_FILE} with {huggingface.WEIGHTS_FILE} or "
        f"{huggingface.WEIGHTS_INDEX_FILE} (Hugging Face); {original.CONFIG_FILE} "
        "with a *.ckpt.index (original BERT); a *.keras file. "
        f"Found: {sorted(os.listdir(path))[:20]}."
    )


def _keras_files(directory):
    return sorted(glob.glob(os.path.join(glob.escape(directory), "*.keras")))


def load_checkpoint(path, format="auto"):
    """Reads a checkpoint directory (or .keras file) into a `Checkpoint`.

    Args:
        path: the directory (or .keras file).
        format: "auto" (by the directory's contents) or one of `FORMATS`.

    Raises:
        ValueError: unsupported config, or missing, unexpected or wrongly
            shaped head tensors (backbone shapes are checked by
            `set_backbone_weights`).

    Example:
    >>> import tempfile
    >>> directory = tempfile.mkdtemp() + "/tiny"
    >>> BertBackbone.from_preset("bert_tiny").save_to_preset(directory)
    >>> sorted(load_checkpoint(directory, format="huggingface").head_weights)
    []
    """
    path = os.fspath(path)
    detected = detect_format(path)
    if format == "auto":
        format = detected
    elif format not in FORMATS:
        raise ValueError(
            f"Unknown checkpoint format {format!r}; expected 'auto' or one of {FORMATS}."
        )
    elif format != detected and (format, detected) != ("huggingface", "bert_keras"):
        # A bert_keras directory is also a Hugging Face one, not the reverse.
        raise ValueError(f"{path} holds a {detected!r} checkpoint, not {format!r}.")
    loaders = {
        "bert_keras": _load_own,
        "huggingface": _load_huggingface,
        "original": _load_original,
        "keras": _load_keras,
    }
    return loaders[format](path)


def _load_huggingface(directory):
    config, architecture, raw = huggingface.read_config(directory)
    tensor_file = huggingface.TensorFile(directory)
    names = {huggingface.table_name(name): name for name in tensor_file.shapes}
    heads = dict(huggingface.HEAD_TABLES)
    del heads["classifier" if architecture == "BertForTokenClassification" else "token_classifier"]
    checkpoint = _read_tables(
        tensor_file,
        names,
        config,
        huggingface.BACKBONE_TABLE,
        heads,
        ignored=huggingface.IGNORED_TENSORS,
        tied=huggingface.TIED_TENSORS,
        pooler_optional=architecture in huggingface.ARCHITECTURES_WITHOUT_POOLER,
    )
    checkpoint.format, checkpoint.directory, checkpoint.extra_config = "huggingface", directory, raw
    checkpoint.label_names = _label_names(raw.get("id2label"), _num_named_labels(checkpoint))
    checkpoint.vocabulary_file = _existing(directory, "vocab.txt")
    checkpoint.tokenizer_config = _read_json(_existing(directory, "tokenizer_config.json")) or {}
    return checkpoint


def _label_names(id2label, num_labels):
    """id2label's names in id order when it names exactly the head's `num_labels` outputs."""
    if not id2label or num_labels is None or len(id2label) != num_labels:
        return None
    try:
        return [id2label[str(index)] for index in range(num_labels)]
    except KeyError:
        return None


def _load_own(directory):
    checkpoint = _load_huggingface(directory)
    with open(os.path.join(directory, OWN_CONFIG_FILE)) as file:
        checkpoint.backbone_config = json.load(file)["config"]
    checkpoint.format = "bert_keras"
    return checkpoint


def _load_original(directory):
    config = original.read_config(directory)
    tensor_file = original.TensorFile(directory)
    checkpoint = _read_tables(
        tensor_file,
        {name: name for name in tensor_file.shapes},
        config,
        original.BACKBONE_TABLE,
        original.HEAD_TABLES,
        ignored=original.IGNORED_PATTERNS,
    )
    checkpoint.format, checkpoint.directory = "original", directory
    checkpoint.vocabulary_file = _existing(directory, original.VOCABULARY_FILE)
    checkpoint.tokenizer_config = original.tokenizer_config(directory)
    return checkpoint


def _load_keras(path):
    if os.path.isdir(path):
        files = _keras_files(path)
        if len(files) != 1:
            raise ValueError(f"{path} holds {len(files)} .keras files; expected one: {files}.")
        path = files[0]
    model = keras.saving.load_model(path, safe_mode=True)
    if not isinstance(model, BertBackbone):
        raise ValueError(f"{path} holds a {type(model).__name__}; expected a BertBackbone.")
    weights = {variable.path: keras.ops.convert_to_numpy(variable) for variable in model.weights}
    directory = os.path.dirname(path)
    return Checkpoint(
        backbone_config=model.get_config(),
        backbone_weights=weights,
        format="keras",
        directory=directory,
        vocabulary_file=_existing(directory, "vocab.txt"),
    )


def _existing(directory, name):
    path = os.path.join(directory, name)
    return path if os.path.isfile(path) else None


def _read_json(path):
    if path is None:
        return None
    with open(path) as file:
        return json.load(file)


def expand_table(table, num_layers):
    """Writes out a format's table for `num_layers` encoder blocks.

    Rows with "{i}" appear once per block; the others once.

    Example:
    >>> rows = expand_table(huggingface.BACKBONE_TABLE, num_layers=2)
    >>> len(rows), rows[-3][0]
    (31, 'transformer_layer_1/output_layer_norm/beta')
    """
    rows = []
    for path, layout, names in table:
        for index in range(num_layers) if "{i}" in path else [None]:
            rows.append((path.format(i=index), layout, tuple(n.format(i=index) for n in names)))
    return rows


def _read_tables(
    tensor_file,
    names,
    config,
    backbone_table,
    head_tables,
    ignored=(),
    tied=None,
    pooler_optional=False,
):
    """Matches every tensor of `tensor_file` to a table row, or fails listing them."""
    backbone_rows = expand_table(backbone_table, config["num_layers"])
    if pooler_optional and not any(
        name in names for name in _row_names(backbone_rows, POOLER_PATHS)
    ):
        backbone_rows = [row for row in backbone_rows if row[0] not in POOLER_PATHS]
    head_rows = {
        head: rows
        for head, rows in head_tables.items()
        if any(name in names for _, _, row_names in rows for name in row_names)
    }
    _check_names(tensor_file, names, backbone_rows, head_rows, ignored, tied or {})
    _check_tied(tensor_file, names, tied or {})
    checkpoint = Checkpoint(backbone_config=config, backbone_weights={})
    checkpoint.backbone_weights = _convert_rows(
        tensor_file, names, backbone_rows, checkpoint.sources, source_prefix=""
    )
    for head, rows in head_rows.items():
        checkpoint.head_weights[head] = _convert_rows(
            tensor_file, names, rows, checkpoint.sources, source_prefix=head + "/"
        )
    _check_head_shapes(checkpoint)
    return checkpoint


def _row_names(rows, paths):
    return [name for path, _, row_names in rows if path in paths for name in row_names]


def _check_names(tensor_file, names, backbone_rows, head_rows, ignored, tied):
    rows = backbone_rows + [row for head in head_rows.values() for row in head]
    expected = {name for _, _, row_names in rows for name in row_names}
    missing = sorted(expected - set(names))
    unexpected = sorted(
        name
        for name in set(names) - expected
        if name not in tied and not any(re.fullmatch(pattern, name) for pattern in ignored)
    )
    problems = []
    if missing:
        problems.append(f"missing {len(missing)} tensors: {missing}")
    if unexpected:
        shapes = [f"{names[name]} {list(tensor_file.shapes[names[name]])}" for name in unexpected]
        problems.append(f"{len(unexpected)} unexpected tensors: {shapes}")
    if problems:
        raise ValueError(
            f"Checkpoint {tensor_file.directory} does not fit its config: "
            + "; ".join(problems)
            + "."
        )


def _check_tied(tensor_file, names, tied):
    for name, tied_to in tied.items():
        if name in names and tied_to in names:
            if not np.array_equal(tensor_file.read(names[name]), tensor_file.read(names[tied_to])):
                raise ValueError(
                    f"Checkpoint {tensor_file.directory}: {names[name]} differs from "
                    f"{names[tied_to]}; only tied masked-LM decoders are supported."
                )


def _convert_rows(tensor_file, names, rows, sources, source_prefix):
    weights = {}
    for path, layout, row_names in rows:
        parts = [tensor_file.read(names[name]) for name in row_names]
        if len({part.shape for part in parts}) > 1:
            raise ValueError(
                f"Checkpoint {tensor_file.directory}: {list(row_names)} should have one "
                f"shape, found {[list(part.shape) for part in parts]}."
            )
        weights[path] = LAYOUTS[layout][0](parts)
        sources[source_prefix + path] = tuple(names[name] for name in row_names)
    return weights


def _check_head_shapes(checkpoint):
    hidden_dim = checkpoint.backbone_config["hidden_dim"]
    problems = []
    for head, weights in checkpoint.head_weights.items():
        expected_shapes = _head_shapes(head, weights, hidden_dim, checkpoint.backbone_config)
        for path, expected in expected_shapes.items():
            if tuple(weights[path].shape) != expected:
                source = checkpoint.sources[f"{head}/{path}"]
                problems.append(
                    f"{head}/{path} (from {list(source)}): expected {list(expected)}, "
                    f"found {list(weights[path].shape)}"
                )
    if problems:
        raise ValueError("Head tensors with the wrong shape: " + "; ".join(problems) + ".")


def _head_shapes(head, weights, hidden_dim, config):
    if head == "masked_lm":
        return {
            "transform_dense/kernel": (hidden_dim, hidden_dim),
            "transform_dense/bias": (hidden_dim,),
            "transform_layer_norm/gamma": (hidden_dim,),
            "transform_layer_norm/beta": (hidden_dim,),
            "output_bias": (config["vocabulary_size"],),
        }
    outputs = 2 if head == "next_sentence" else weights["bias"].shape[-1]
    return {"kernel": (hidden_dim, outputs), "bias": (outputs,)}


def set_backbone_weights(backbone, checkpoint):
    """Assigns `checkpoint.backbone_weights` to `backbone`, strictly.

    Raises:
        ValueError: listing every missing, unexpected or wrongly shaped weight
            (with the checkpoint tensors it came from).

    Example:
    >>> import tempfile
    >>> directory = tempfile.mkdtemp() + "/tiny"
    >>> BertBackbone.from_preset("bert_tiny").save_to_preset(directory)
    >>> backbone = BertBackbone.from_preset("bert_tiny")
    >>> set_backbone_weights(backbone, load_checkpoint(directory))
    """
    variables = {variable.path: variable for variable in backbone.weights}
    weights = checkpoint.backbone_weights
    missing = sorted(set(variables) - set(weights))
    unexpected = sorted(set(weights) - set(variables))
    wrong_shapes = [
        f"{path} (from {list(checkpoint.sources.get(path, ()))}): expected "
        f"{list(variables[path].shape)}, found {list(weights[path].shape)}"
        for path in sorted(set(variables) & set(weights))
        if tuple(variables[path].shape) != tuple(weights[path].shape)
    ]
    problems = []
    if missing and set(missing) != set(POOLER_PATHS):
        problems.append(f"missing {missing}")
    if unexpected:
        problems.append(f"unexpected {unexpected}")
    if wrong_shapes:
        problems.append("wrong shapes: " + "; ".join(wrong_shapes))
    if problems:
        raise ValueError(
            f"The weights of {checkpoint.directory} do not fit a BertBackbone with "
            f"{_summary(backbone)}: " + "; ".join(problems) + "."
        )
    if missing:
        logging.warning(
            "%s has no pooler; pooler_dense keeps its initial weights.", checkpoint.directory
        )
    for path, value in weights.items():
        variables[path].assign(np.asarray(value, dtype=variables[path].dtype))


def _summary(backbone):
    return (
        f"vocabulary_size={backbone.vocabulary_size}, num_layers={backbone.num_layers}, "
        f"hidden_dim={backbone.hidden_dim}, intermediate_dim={backbone.intermediate_dim}"
    )


def load_backbone(path, format="auto", **overrides):
    """Builds a `BertBackbone` from a checkpoint directory (or .keras file).

    Args:
        path: the directory or file.
        format: "auto" or one of `FORMATS`.
        **overrides: constructor arguments replacing the checkpoint's, e.g.
            `dtype="mixed_bfloat16"` or `dropout=0.0`.

    Example:
    >>> import tempfile
    >>> directory = tempfile.mkdtemp() + "/tiny"
    >>> BertBackbone.from_preset("bert_tiny").save_to_preset(directory)
    >>> load_backbone(directory, dropout=0.0).dropout
    0.0
    """
    checkpoint = load_checkpoint(path, format=format)
    backbone = BertBackbone.from_config({**checkpoint.backbone_config, **overrides})
    set_backbone_weights(backbone, checkpoint)
    for head, weights in checkpoint.head_weights.items():
        logging.debug(
            "Not loaded by the backbone: %s head of %s: %s",
            head,
            path,
            {name: list(value.shape) for name, value in weights.items()},
        )
    return backbone


def save_backbone(backbone, directory, vocabulary_file=None, lowercase=True, overwrite=False):
    """Writes `backbone` in the project's format (a Hugging Face directory).

    See `BertBackbone.save_to_preset`.

    Example:
    >>> import tempfile
    >>> directory = tempfile.mkdtemp() + "/tiny"
    >>> save_backbone(BertBackbone.from_preset("bert_tiny"), directory)
    >>> sorted(os.listdir(directory))
    ['bert_keras.json', 'config.json', 'model.safetensors']
    """
    checkpoint = Checkpoint(
        backbone_config=backbone.get_config(),
        backbone_weights={v.path: keras.ops.convert_to_numpy(v) for v in backbone.weights},
        vocabulary_file=None if vocabulary_file is None else os.fspath(vocabulary_file),
        tokenizer_config={"do_lower_case": lowercase},
    )
    save_checkpoint(checkpoint, directory, overwrite=overwrite)


def save_checkpoint(checkpoint, directory, overwrite=False, format="bert_keras"):
    """Writes a `Checkpoint` in the project's format, or in the original's.

    "bert_keras" writes config.json (the transformers class that holds
    exactly the checkpoint's heads), model.safetensors, bert_keras.json, and
    the tokenizer files: vocab.txt and the source's tokenizer.json,
    tokenizer_config.json and special_tokens_map.json when present, else a
    tokenizer_config.json from `checkpoint.tokenizer_config`. "original"
    writes the google-research release's bert_config.json,
    bert_model.ckpt.* (variables named as modeling.py's scopes) and vocab.txt.
    Everything is written to a temporary sibling directory that is renamed
    into place, so an interrupted save leaves no partial `directory`.

    Args:
        checkpoint: a `Checkpoint`, e.g. from `load_checkpoint`.
        directory: the output directory; must not exist or be empty unless
            `overwrite`.
        overwrite: replace an existing non-empty `directory`.
        format: "bert_keras" or "original".

    Raises:
        FileExistsError: `directory` is not empty and not `overwrite`.
        ValueError: a set of heads no transformers class holds, or (original)
            a head, activation or epsilon the original format lacks.

    Example:
    >>> import tempfile
    >>> directory = tempfile.mkdtemp() + "/tiny"
    >>> BertBackbone.from_preset("bert_tiny").save_to_preset(directory)
    >>> save_checkpoint(load_checkpoint(directory), directory + "_copy")
    >>> detect_format(directory + "_copy")
    'bert_keras'
    >>> save_checkpoint(load_checkpoint(directory), directory + "_tf1", format="original")
    >>> detect_format(directory + "_tf1")
    'original'
    """
    if format == "original":
        _save_original(checkpoint, directory, overwrite)
        return
    if format != "bert_keras":
        raise ValueError(
            f"Unknown output format {format!r}; expected one of {list(OUTPUT_FORMATS)}."
        )
    architecture = _architecture(checkpoint.head_weights)
    tensors = _checkpoint_tensors(checkpoint, huggingface, huggingface.ENCODER_PREFIX)
    config = huggingface.config_json(
        checkpoint.backbone_config, architecture, _num_labels(checkpoint)
    )
    config.update(_label_config(checkpoint.label_names, _num_named_labels(checkpoint)))
    with _atomic_directory(directory, overwrite) as staging:
        huggingface.write_tensors(staging, tensors)
        _write_json(os.path.join(staging, huggingface.CONFIG_FILE), config)
        _write_json(
            os.path.join(staging, OWN_CONFIG_FILE),
            {"class_name": "BertBackbone", "config": checkpoint.backbone_config},
        )
        _write_tokenizer_files(checkpoint, staging)


def _save_original(checkpoint, directory, overwrite):
    unsupported = sorted(set(checkpoint.head_weights) - set(original.HEAD_TABLES))
    if unsupported:
        raise ValueError(
            f"The original format has no variables for the heads {unsupported} "
            f"(it has {sorted(original.HEAD_TABLES)}); keep this model in the bert_keras format."
        )
    config = original.config_json(checkpoint.backbone_config)
    tensors = _checkpoint_tensors(checkpoint, original, "")
    with _atomic_directory(directory, overwrite) as staging:
        original.write_tensors(staging, tensors)
        _write_json(os.path.join(staging, original.CONFIG_FILE), config)
        if checkpoint.vocabulary_file is not None:
            shutil.copyfile(
                checkpoint.vocabulary_file, os.path.join(staging, original.VOCABULARY_FILE)
            )


def _architecture(head_weights):
    heads = tuple(sorted(head_weights, key=HEAD_NAMES.index))
    by_heads = {
        tuple(sorted(key, key=HEAD_NAMES.index)): name
        for key, name in huggingface.ARCHITECTURES.items()
    }
    if heads not in by_heads:
        raise ValueError(
            f"No transformers class holds exactly the heads {list(heads)}; "
            f"supported: {[list(key) for key in by_heads]}."
        )
    return by_heads[heads]


def _label_config(label_names, num_labels):
    """config.json's id2label and label2id for `label_names` (none without them)."""
    if label_names is None:
        return {}
    if len(label_names) != num_labels:
        raise ValueError(
            f"The checkpoint names {len(label_names)} labels ({list(label_names)}) but its "
            f"classifier or token_classifier head has {num_labels or 'no'} outputs."
        )
    return {
        "id2label": {str(index): name for index, name in enumerate(label_names)},
        "label2id": {name: index for index, name in enumerate(label_names)},
    }


def _num_named_labels(checkpoint):
    """Outputs of the head whose labels have names: classifier or token_classifier."""
    for head in ("classifier", "token_classifier"):
        if head in checkpoint.head_weights:
            return int(checkpoint.head_weights[head]["bias"].shape[-1])
    return None


def _num_labels(checkpoint):
    for head in ("classifier", "token_classifier", "question_answering"):
        if head in checkpoint.head_weights:
            return int(checkpoint.head_weights[head]["bias"].shape[-1])
    return None


def _checkpoint_tensors(checkpoint, tables, headed_prefix):
    """Our weights -> a format's tensor names, by the same tables as loading.

    `tables` is the format's module (BACKBONE_TABLE, HEAD_TABLES); backbone
    names get `headed_prefix` when the checkpoint has heads.
    """
    prefix = headed_prefix if checkpoint.head_weights else ""
    rows = expand_table(tables.BACKBONE_TABLE, checkpoint.backbone_config["num_layers"])
    rows = [
        row for row in rows if row[0] in checkpoint.backbone_weights or row[0] not in POOLER_PATHS
    ]
    tensors = _to_checkpoint_names(rows, checkpoint.backbone_weights, prefix)
    for head, weights in checkpoint.head_weights.items():
        tensors.update(_to_checkpoint_names(tables.HEAD_TABLES[head], weights, ""))
    return tensors


def _to_checkpoint_names(rows, weights, prefix):
    tensors = {}
    for path, layout, names in rows:
        parts = LAYOUTS[layout][1](np.asarray(weights[path]), len(names))
        tensors.update({prefix + name: part for name, part in zip(names, parts)})
    return tensors


def _write_tokenizer_files(checkpoint, staging):
    if checkpoint.vocabulary_file is not None:
        shutil.copyfile(checkpoint.vocabulary_file, os.path.join(staging, "vocab.txt"))
    if checkpoint.directory is not None and checkpoint.format in ("huggingface", "bert_keras"):
        for name in huggingface.TOKENIZER_FILES[1:]:
            if os.path.isfile(os.path.join(checkpoint.directory, name)):
                shutil.copyfile(
                    os.path.join(checkpoint.directory, name), os.path.join(staging, name)
                )
    config_path = os.path.join(staging, "tokenizer_config.json")
    if checkpoint.vocabulary_file is not None and not os.path.exists(config_path):
        _write_json(
            config_path,
            {
                "tokenizer_class": "BertTokenizer",
                "do_lower_case": checkpoint.tokenizer_config.get("do_lower_case", True),
                "model_max_length": checkpoint.backbone_config["max_sequence_length"],
            },
        )


def _write_json(path, value):
    with open(path, "w") as file:
        json.dump(value, file, indent=2, sort_keys=True)
        file.write("\n")


@contextlib.contextmanager
def _atomic_directory(directory, overwrite):
    """Yields a staging directory that replaces `directory` on success only."""
    directory = os.path.abspath(os.fspath(directory))
    check_output_directory(directory, overwrite)
    parent = os.path.dirname(directory)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(directory)}.partial-", dir=parent)
    try:
        yield staging
        os.chmod(staging, 0o755)
        _replace_directory(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _replace_directory(staging, directory):
    if not os.path.exists(directory):
        os.rename(staging, directory)
        return
    if not os.listdir(directory):
        os.rmdir(directory)
        os.rename(staging, directory)
        return
    old = staging + "-old"
    os.rename(directory, old)
    os.rename(staging, directory)
    shutil.rmtree(old)


def check_output_directory(directory, overwrite=False):
    """Refuses an output path that is a file, or a non-empty directory.

    Raises:
        FileExistsError: naming `directory`.

    Example:
    >>> import tempfile
    >>> check_output_directory(tempfile.mkdtemp())  # empty: fine
    """
    if os.path.isfile(directory):
        raise FileExistsError(f"Output path {directory} is a file; expected a directory.")
    if os.path.isdir(directory) and os.listdir(directory) and not overwrite:
        raise FileExistsError(
            f"Output directory {directory} exists and is not empty; choose another or overwrite it."
        )


def convert_checkpoint(
    source, output_dir, format="auto", overwrite=False, output_format="bert_keras"
):
    """Reads any supported checkpoint and writes it in the project's format (or the original's).

    The backbone weights are checked against a `BertBackbone` built from the
    config before anything is written; heads are carried over.

    Args:
        source: checkpoint directory (or .keras file).
        output_dir: where to write; must not exist or be empty unless
            `overwrite`.
        format: the source's format, "auto" or one of `FORMATS`.
        overwrite: replace a non-empty `output_dir`.
        output_format: "bert_keras" (Hugging Face compatible) or "original"
            (the google-research release's TF checkpoint).

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
    checkpoint = load_checkpoint(source, format=format)
    set_backbone_weights(BertBackbone.from_config(checkpoint.backbone_config), checkpoint)
    save_checkpoint(checkpoint, output_dir, overwrite=overwrite, format=output_format)
    return checkpoint
