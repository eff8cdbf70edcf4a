"""`BertBackbone` arguments read from a format's config file, each checked to be of its type."""

import math
import numbers

# The backbone's sizes: whole numbers, which fix its weights' shapes.
SIZE_ARGUMENTS = (
    "vocabulary_size",
    "num_layers",
    "num_heads",
    "hidden_dim",
    "intermediate_dim",
    "max_sequence_length",
    "num_segments",
)
PROBABILITY_ARGUMENTS = ("dropout", "attention_dropout")


def config_arguments(raw, path, table):
    """`BertBackbone` arguments from a config file's JSON value, by a format's key table.

    Args:
        raw: the file's JSON value.
        path: the file, for errors.
        table: `(key in the file, BertBackbone argument, default)` triples.

    Returns:
        dict argument -> the file's value, or the default where the key is absent.

    Raises:
        ValueError: `raw` is not a JSON object, or a value is not of its
            argument's type, naming the file and the key.

    Example:
    >>> table = [("hidden_size", "hidden_dim", 768), ("hidden_dropout_prob", "dropout", 0.1)]
    >>> config_arguments({"hidden_size": 384}, "config.json", table)
    {'hidden_dim': 384, 'dropout': 0.1}
    >>> config_arguments({"hidden_size": "384"}, "config.json", table)
    Traceback (most recent call last):
    ...
    ValueError: config.json: hidden_size is '384' but must be a whole number, at least 1.
    """
    if not isinstance(raw, dict):
        raise ValueError(f"{path} holds a JSON {type(raw).__name__}, not an object of config keys.")
    arguments = {}
    for key, argument, default in table:
        if key in raw:
            _check_value(raw[key], argument, f"{path}: {key}")
        arguments[argument] = raw.get(key, default)
    return arguments


def check_backbone_arguments(arguments):
    """Raises a ValueError naming the first `BertBackbone` argument that is not of its type.

    Sizes are whole numbers of at least 1, dropout rates in [0, 1) (or
    None where the argument allows it), the epsilon a positive number;
    other arguments are not looked at.

    Example:
    >>> check_backbone_arguments({"num_heads": 4, "dropout": 0.1, "attention_dropout": None})
    >>> check_backbone_arguments({"num_heads": 0})
    Traceback (most recent call last):
    ...
    ValueError: num_heads is 0 but must be a whole number, at least 1.
    """
    for argument, value in arguments.items():
        if value is not None or argument != "attention_dropout":
            _check_value(value, argument, argument)


def _check_value(value, argument, where):
    is_number = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if argument in SIZE_ARGUMENTS:
        if not (is_number and isinstance(value, numbers.Integral) and value >= 1):
            raise ValueError(f"{where} is {value!r} but must be a whole number, at least 1.")
    elif argument in PROBABILITY_ARGUMENTS:
        if not (is_number and 0 <= value < 1):
            raise ValueError(f"{where} is {value!r} but must be a number in [0, 1).")
    elif argument == "layer_norm_epsilon":
        if not (is_number and 0 < value and math.isfinite(value)):
            raise ValueError(f"{where} is {value!r} but must be a positive number.")
