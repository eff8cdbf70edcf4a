"""The engine behind the per-format name tables, in both directions.

Each format module (`huggingface`, `original`) has a `BACKBONE_TABLE` and
`HEAD_TABLES` of rows `(our weight path, layout, checkpoint tensor names)`,
with "{i}" standing for an encoder block's index. Reading matches every
tensor of a checkpoint to a row, strictly: a missing, unexpected or
misshapen tensor is an error that names every one. Writing runs the same
rows backwards, so loading and saving share one mapping.
"""

import difflib
import re

import numpy as np

from bert_keras.checkpoints.checkpoint import POOLER_PATHS
from bert_keras.checkpoints.checkpoint import Checkpoint

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


# The sizes a backbone's weights show: (BertBackbone argument, weight path, axis).
SIZE_AXES = (
    ("vocabulary_size", "embeddings/token_embedding/embeddings", 0),
    ("hidden_dim", "embeddings/token_embedding/embeddings", 1),
    ("num_segments", "embeddings/segment_embedding/embeddings", 0),
    ("max_sequence_length", "embeddings/position_embedding/embeddings", 0),
    ("intermediate_dim", "transformer_layer_0/intermediate_dense/kernel", 1),
)


def expand_table(table, num_layers):
    """Writes out a format's table for `num_layers` encoder blocks.

    Rows with "{i}" appear once per block; the others once.

    Example:
    >>> from bert_keras.checkpoints import huggingface
    >>> rows = expand_table(huggingface.BACKBONE_TABLE, num_layers=2)
    >>> len(rows), rows[-3][0]
    (31, 'transformer_layer_1/output_layer_norm/beta')
    """
    rows = []
    for path, layout, names in table:
        for index in range(num_layers) if "{i}" in path else [None]:
            rows.append((path.format(i=index), layout, tuple(n.format(i=index) for n in names)))
    return rows


def read_tables(
    tensor_file,
    names,
    config,
    backbone_table,
    head_tables,
    ignored=(),
    tied=None,
    config_file=None,
    config_table=(),
):
    """Reads every tensor of `tensor_file` through the tables into a `Checkpoint`.

    The pooler may be absent as a whole: transformers' token-level classes
    and `add_pooling_layer=False` save none (`BertBackbone.from_preset`
    warns that it keeps its initial weights).

    Args:
        tensor_file: the format's reader (`shapes`, `read(name)`, `directory`).
        names: dict table name -> the tensor's name in the file.
        config: the `BertBackbone` config read from the directory.
        backbone_table: the format's `BACKBONE_TABLE`.
        head_tables: the format's `HEAD_TABLES` that may occur.
        ignored: patterns (matched whole) of tensors that carry no weights.
        tied: dict tensor -> the tensor it must equal (tied decoders).
        config_file: `(path, JSON object)` of the file `config` was read
            from, to name its keys in errors (see `check_config_sizes`).
        config_table: its `(key, BertBackbone argument, default)` triples.

    Raises:
        ValueError: naming every missing or unexpected tensor, untied tied
            tensors, a config size the weights contradict, and head tensors
            of the wrong shape.
    """
    tied = tied or {}
    if config_file is not None:
        _check_layer_count(config, names, backbone_table, *config_file, config_table)
    backbone_rows = expand_table(backbone_table, config["num_layers"])
    if not any(name in names for name in _row_names(backbone_rows, POOLER_PATHS)):
        backbone_rows = [row for row in backbone_rows if row[0] not in POOLER_PATHS]
    head_rows = {
        head: rows
        for head, rows in head_tables.items()
        if any(name in names for _, _, row_names in rows for name in row_names)
    }
    _check_names(tensor_file, names, backbone_rows, head_rows, ignored, tied)
    _check_tied(tensor_file, names, tied)
    checkpoint = Checkpoint(backbone_config=config, backbone_weights={})
    checkpoint.backbone_weights = _convert_rows(
        tensor_file, names, backbone_rows, checkpoint.sources, source_prefix=""
    )
    if config_file is not None:
        check_config_sizes(checkpoint, *config_file, config_table)
    for head, rows in head_rows.items():
        checkpoint.head_weights[head] = _convert_rows(
            tensor_file, names, rows, checkpoint.sources, source_prefix=head + "/"
        )
    _check_head_shapes(checkpoint)
    return checkpoint


def check_config_sizes(checkpoint, path, raw, table):
    """Refuses a config whose sizes its backbone's weights contradict, naming the config key.

    A missing or misspelt key leaves a default (transformers' hidden_size
    768, say) that the weights do not have; this names the key, the weights'
    size and a key of the file that looks like a misspelling of it, where a
    model's long list of misfit tensors would not.

    Args:
        checkpoint: a `Checkpoint` with its backbone weights and sources.
        path: the config file, for the message.
        raw: its JSON object.
        table: its `(key, BertBackbone argument, default)` triples.

    Raises:
        ValueError: naming each key whose size the weights contradict, and
            a hidden size that the heads do not divide.

    Example:
    >>> import numpy as np
    >>> checkpoint = Checkpoint(
    ...     backbone_config={"vocabulary_size": 9, "hidden_dim": 768},
    ...     backbone_weights={"embeddings/token_embedding/embeddings": np.zeros((9, 4))},
    ...     sources={"embeddings/token_embedding/embeddings": ("word_embeddings",)})
    >>> table = [("vocab_size", "vocabulary_size", 30522), ("hidden_size", "hidden_dim", 768)]
    >>> check_config_sizes(checkpoint, "config.json", {"vocab_size": 9, "hiden_size": 4}, table)
    Traceback (most recent call last):
    ...
    ValueError: config.json: no hidden_size, so 768 (the default), but the weights say 4 \
(in word_embeddings); 'hiden_size' may be a misspelt hidden_size.
    """
    keys = {argument: key for key, argument, _ in table}
    problems = []
    for argument, weight_path, axis in SIZE_AXES:
        weight = checkpoint.backbone_weights.get(weight_path)
        if argument not in keys or weight is None:
            continue
        value, found = checkpoint.backbone_config[argument], weight.shape[axis]
        if value == found:
            continue
        source = ", ".join(checkpoint.sources.get(weight_path, (weight_path,)))
        problems.append(
            _contradiction(
                keys[argument], value, raw, table, f"the weights say {found} (in {source})"
            )
        )
    config = checkpoint.backbone_config
    hidden, heads = config.get("hidden_dim"), config.get("num_heads")
    if {"hidden_dim", "num_heads"} <= set(keys) and hidden and heads and hidden % heads:
        problems.append(
            f"{keys['hidden_dim']} {hidden} is not a multiple of {keys['num_heads']} {heads} "
            "(each attention head takes an equal part of the hidden vector)"
        )
    if problems:
        raise ValueError(f"{path}: " + ". ".join(problems) + ".")


def _contradiction(key, value, raw, table, weights_say):
    """How config key `key` (`value`, or its default when absent) contradicts the weights.

    An absent key may be misspelt: a key of `raw` that `table` does not know
    and that looks like it is named.
    """
    unknown = [name for name in raw if name not in {row[0] for row in table}]
    said = f"{key} is {value}" if key in raw else f"no {key}, so {value} (the default)"
    problem = f"{said}, but {weights_say}"
    if key not in raw:
        for near in difflib.get_close_matches(key, unknown, n=1, cutoff=0.8):
            problem += f"; {near!r} may be a misspelt {key}"
    return problem


def _check_layer_count(config, names, backbone_table, path, raw, table):
    """Refuses a config whose number of layers the weights' blocks 0..N-1 contradict, naming its key."""
    template = next((row[2][0] for row in backbone_table if "{i}" in row[0]), None)
    key = next((key for key, argument, _ in table if argument == "num_layers"), None)
    if template is None or key is None:
        return
    pattern = re.escape(template).replace(re.escape("{i}"), r"(\d+)")
    indices = {int(match[1]) for name in names if (match := re.fullmatch(pattern, name))}
    if indices == set(range(len(indices))) and len(indices) != config["num_layers"]:
        weights_say = f"the weights hold {len(indices)} layers"
        if indices:
            weights_say += f" ({template.format(i=0)} to {template.format(i=len(indices) - 1)})"
        problem = _contradiction(key, config["num_layers"], raw, table, weights_say)
        raise ValueError(f"{path}: {problem}.")


def checkpoint_tensors(checkpoint, tables, headed_prefix):
    """A `Checkpoint`'s arrays under a format's tensor names, by the tables that read them.

    Args:
        checkpoint: the `Checkpoint`.
        tables: the format's module (its `BACKBONE_TABLE`, `HEAD_TABLES`).
        headed_prefix: put before backbone names when the checkpoint has
            heads (transformers' "bert.").

    Example:
    >>> from bert_keras.checkpoints import huggingface
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> from bert_keras.models.checkpoint_weights import model_checkpoint
    >>> checkpoint = model_checkpoint(BertBackbone(9, 1, 2, 8, 16))
    >>> tensors = checkpoint_tensors(checkpoint, huggingface, "bert.")
    >>> len(tensors), tensors["encoder.layer.0.attention.self.query.weight"].shape
    (23, (8, 8))
    """
    prefix = headed_prefix if checkpoint.head_weights else ""
    rows = expand_table(tables.BACKBONE_TABLE, checkpoint.backbone_config["num_layers"])
    # Only the pooler may be absent (classes built without one).
    rows = [
        row for row in rows if row[0] in checkpoint.backbone_weights or row[0] not in POOLER_PATHS
    ]
    tensors = _to_checkpoint_names(rows, checkpoint.backbone_weights, prefix)
    for head, weights in checkpoint.head_weights.items():
        tensors.update(_to_checkpoint_names(tables.HEAD_TABLES[head], weights, ""))
    return tensors


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
        _check_floating(tensor_file, [names[name] for name in row_names], parts)
        if len({part.shape for part in parts}) > 1:
            raise ValueError(
                f"Checkpoint {tensor_file.directory}: {list(row_names)} should have one "
                f"shape, found {[list(part.shape) for part in parts]}."
            )
        weights[path] = LAYOUTS[layout][0](parts)
        sources[source_prefix + path] = tuple(names[name] for name in row_names)
    return weights


def _check_floating(tensor_file, tensor_names, parts):
    """Refuses a weight of integers or booleans: a broken file, which casting would hide."""
    for name, part in zip(tensor_names, parts):
        if not np.issubdtype(part.dtype, np.floating):
            raise ValueError(
                f"Checkpoint {tensor_file.directory}: {name} holds {part.dtype} values, but a "
                "weight is floating point (float32, float16 or bfloat16)."
            )


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


def _to_checkpoint_names(rows, weights, prefix):
    tensors = {}
    for path, layout, names in rows:
        parts = LAYOUTS[layout][1](np.asarray(weights[path]), len(names))
        tensors.update({prefix + name: part for name, part in zip(names, parts)})
    return tensors
