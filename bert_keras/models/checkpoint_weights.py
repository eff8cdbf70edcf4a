"""The one way weights move between a `Checkpoint` and a model, both directions.

`apply_checkpoint` puts a checkpoint's backbone (and named heads) onto a
`BertBackbone` or a task model, strictly; `model_checkpoint` takes them off
again for `bert_keras.checkpoints.write_checkpoint`. `from_preset`, the
fine-tuning and pretraining runs and the converter all go through here.
Model classes are handed in, as keras-hub's preset loaders take theirs, so
this module imports none.
"""

import keras
import numpy as np
from absl import logging

from bert_keras.checkpoints import Checkpoint
from bert_keras.checkpoints import read_checkpoint
from bert_keras.checkpoints.checkpoint import POOLER_PATHS


def apply_checkpoint(model, checkpoint, heads=None, skip_mismatched_heads=False):
    """Assigns a checkpoint's backbone, and the heads named in `heads`, to `model`.

    The backbone is strict: every missing, unexpected or wrongly shaped
    weight is named in one error (a checkpoint of a class built without a
    pooler leaves the pooler as it is, with a warning where the model's
    `reads_pooled_output`, as a backbone's does). Each requested head
    the checkpoint holds must fit its layer in the same way, unless
    `skip_mismatched_heads` (a new task head of another size keeps its fresh
    weights); a head the checkpoint lacks keeps its fresh weights.

    Args:
        model: a `BertBackbone`, or a model with a `backbone` attribute.
        checkpoint: a `bert_keras.checkpoints.Checkpoint`.
        heads: dict checkpoint head name (see `Checkpoint.head_weights`) ->
            the name of the model's layer that takes it.
        skip_mismatched_heads: log, instead of raising, when a head's
            tensors do not fit its layer.

    Returns:
        The names of the heads that were loaded, sorted.

    Raises:
        ValueError: naming every weight that does not fit.

    Example:
    >>> import tempfile
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> directory = tempfile.mkdtemp() + "/tiny"
    >>> BertBackbone(9, 1, 2, 8, 16).save_to_preset(directory)
    >>> apply_checkpoint(BertBackbone(9, 1, 2, 8, 16), read_checkpoint(directory))
    []
    >>> apply_checkpoint(BertBackbone(9, 1, 2, 8, 32), read_checkpoint(directory))
    Traceback (most recent call last):
    ...
    ValueError: The weights of ... wrong shapes: transformer_layer_0/intermediate_dense/bias ...
    """
    backbone = getattr(model, "backbone", model)
    # Every tensor is checked before any is assigned: a misfit changes nothing.
    assignments = _backbone_assignments(backbone, checkpoint)
    if not set(POOLER_PATHS) <= set(checkpoint.backbone_weights):
        log = logging.warning if getattr(model, "reads_pooled_output", True) else logging.info
        log("%s has no pooler; pooler_dense keeps its initial weights.", _source(checkpoint))
    loaded = []
    for head, layer_name in (heads or {}).items():
        if head not in checkpoint.head_weights:
            logging.info(
                "%s has no %s head; %s keeps its initial weights.",
                _source(checkpoint),
                head,
                layer_name,
            )
            continue
        layer = model.get_layer(layer_name)
        head_assignments = _head_assignments(layer, head, checkpoint, skip_mismatched_heads)
        if head_assignments is not None:
            assignments += head_assignments
            loaded.append(head)
    for variable, value in assignments:
        variable.assign(np.asarray(value, dtype=variable.dtype))
    _log_unused_heads(model, backbone, checkpoint, heads or {})
    return sorted(loaded)


def _log_unused_heads(model, backbone, checkpoint, heads):
    taker = "backbone" if backbone is model else type(model).__name__
    for head in sorted(set(checkpoint.head_weights) - set(heads)):
        shapes = {path: list(value.shape) for path, value in checkpoint.head_weights[head].items()}
        logging.debug(
            "Not loaded by the %s: %s head of %s: %s", taker, head, _source(checkpoint), shapes
        )


def refuse_quantized(model):
    """Raises a ValueError where `model` has a quantized layer: a checkpoint holds float weights.

    Example:
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> backbone = BertBackbone(9, 1, 2, 8, 16, name="tiny")
    >>> refuse_quantized(backbone)
    >>> backbone.quantize("int8")
    >>> refuse_quantized(backbone)
    Traceback (most recent call last):
    ...
    ValueError: tiny is quantized (7 layers, e.g. embeddings/segment_embedding) but a checkpoint...
    """
    quantized = [layer.path for layer in model._flatten_layers() if layer.quantization_mode]
    if quantized:
        raise ValueError(
            f"{model.name} is quantized ({len(quantized)} layers, e.g. {quantized[0]}) but a "
            "checkpoint holds float weights: write it before quantize(), or save the quantized "
            "model with model.save('model.keras')."
        )


def model_checkpoint(model, heads=None, backbone_config=None, **fields):
    """A `Checkpoint` of `model`'s backbone and the heads named in `heads`.

    Args:
        model: a `BertBackbone`, or a model with a `backbone` attribute.
        heads: dict checkpoint head name -> the name of the model's layer
            that holds it.
        backbone_config: the config to record; the backbone's own when None.
        **fields: other `Checkpoint` fields (vocabulary_file,
            tokenizer_settings, label_names, ...).

    Example:
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> checkpoint = model_checkpoint(BertBackbone(9, 1, 2, 8, 16))
    >>> checkpoint.backbone_weights["pooler_dense/kernel"].shape, checkpoint.head_weights
    ((8, 8), {})
    """
    refuse_quantized(model)
    backbone = getattr(model, "backbone", model)
    return Checkpoint(
        backbone_config=backbone_config or backbone.get_config(),
        backbone_weights={
            path: keras.ops.convert_to_numpy(variable)
            for path, variable in _backbone_variables(backbone).items()
        },
        head_weights={
            head: _layer_weights(model.get_layer(layer_name))
            for head, layer_name in (heads or {}).items()
        },
        **fields,
    )


def exported_backbone_config(backbone):
    """`backbone`'s config as an exported checkpoint records it: float32, trainable.

    A run's precision policy and frozen backbone are its settings, not the
    checkpoint's: its weights are float32, and whoever loads them (a later
    run, `from_preset`, transformers) computes and trains as they ask.

    Example:
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> backbone = BertBackbone(9, 1, 2, 8, 16, dtype="mixed_bfloat16")
    >>> backbone.trainable = False
    >>> config = exported_backbone_config(backbone)
    >>> config["dtype"], config["trainable"]
    ('float32', True)
    """
    return {**backbone.get_config(), "dtype": "float32", "trainable": True}


def load_backbone(backbone_class, path, format="auto", **overrides):
    """Builds a backbone from a checkpoint directory (or .keras file).

    Args:
        backbone_class: `BertBackbone` (or a subclass).
        path: the directory or file.
        format: "auto" or one of `bert_keras.checkpoints.FORMATS`.
        **overrides: constructor arguments replacing the checkpoint's, e.g.
            `dtype="mixed_bfloat16"` or `dropout=0.0`.

    Example:
    >>> import tempfile
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> directory = tempfile.mkdtemp() + "/tiny"
    >>> BertBackbone.from_preset("bert_tiny").save_to_preset(directory)
    >>> load_backbone(BertBackbone, directory, dropout=0.0).dropout
    0.0
    """
    checkpoint = read_checkpoint(path, format=format)
    backbone = backbone_class.from_config({**checkpoint.backbone_config, **overrides})
    apply_checkpoint(backbone, checkpoint)
    return backbone


def _source(checkpoint):
    return checkpoint.directory or "The checkpoint"


def _backbone_assignments(backbone, checkpoint):
    """(variable, value) for every backbone weight, or a ValueError naming every misfit."""
    variables = _backbone_variables(backbone)
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
    return [(variables[path], value) for path, value in weights.items()]


def _summary(backbone):
    return (
        f"vocabulary_size={backbone.vocabulary_size}, num_layers={backbone.num_layers}, "
        f"hidden_dim={backbone.hidden_dim}, intermediate_dim={backbone.intermediate_dim}"
    )


def _backbone_variables(backbone):
    """Weight path (as the checkpoint tables name it) -> variable, whatever
    `keras.name_scope` the backbone was built in."""
    scope = backbone.path.removesuffix(backbone.name)
    return {variable.path.removeprefix(scope): variable for variable in backbone.weights}


def _layer_variables(layer):
    """Weight path inside `layer` (as the checkpoint tables name it) -> variable."""
    prefix = layer.path + "/"
    return {variable.path.removeprefix(prefix): variable for variable in layer.weights}


def _layer_weights(layer):
    """Weight path inside `layer` -> numpy array."""
    return {
        path: keras.ops.convert_to_numpy(variable)
        for path, variable in _layer_variables(layer).items()
    }


def _head_assignments(layer, head, checkpoint, skip_mismatched):
    """(variable, value) for a head's weights, or None when they do not fit and may be skipped."""
    weights = checkpoint.head_weights[head]
    variables = _layer_variables(layer)
    problems = [f"missing {path}" for path in sorted(set(variables) - set(weights))]
    problems += [f"unexpected {path}" for path in sorted(set(weights) - set(variables))]
    problems += [
        f"{path}: expected {list(variables[path].shape)}, found {list(np.shape(value))}"
        for path, value in sorted(weights.items())
        if path in variables and tuple(variables[path].shape) != tuple(np.shape(value))
    ]
    if not problems:
        logging.info("Loading the %s head of %s.", head, _source(checkpoint))
        return [(variables[path], value) for path, value in weights.items()]
    message = (
        f"The {head} head of {_source(checkpoint)} does not fit layer {layer.name}: "
        + "; ".join(problems)
        + "."
    )
    if not skip_mismatched:
        raise ValueError(message)
    logging.info("%s It keeps its initial weights.", message)
    return None
