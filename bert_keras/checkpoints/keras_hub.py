"""A keras-hub BERT preset directory: config.json + model.weights.h5.

The layout `save_to_preset` of keras-hub 0.32 writes: `config.json` (the
registered class "keras_hub>BertBackbone" and its constructor arguments),
`model.weights.h5`, `tokenizer.json` (a "keras_hub>BertTokenizer" config) with
its vocabulary in `assets/tokenizer/vocabulary.txt`, and `metadata.json`. A task
preset adds `task.json` and `task.weights.h5`; the classifier head of a
"keras_hub>BertTextClassifier" is read as the "classifier" head, other tasks'
heads are left unread.

Weights files are HDF5, read and written with h5py as plain arrays: no
keras-hub model is built and nothing is unpickled. Keras names each layer in
them by its class in snake case, numbered from the second of a class on
(`layers/transformer_encoder`, `layers/transformer_encoder_1`, ...), and its
variables `vars/0`, `vars/1` in creation order (kernel then bias, gamma then
beta). The tables below name every tensor as "<file>/<path in the file>", so
an error names both. Attention weights are stored per head (query, key and
value kernels `[hidden, heads, head_dim]`, the output kernel `[heads,
head_dim, hidden]`); `TensorFile` gives them with the heads merged, as Dense
weights, and `write_tensors` splits them again, so the shared layouts of
`bert_keras.checkpoints.name_tables` apply.

keras-hub's BERT hard-codes the tanh GELU ("gelu_approximate"), a layer-norm
epsilon of 1e-12 and one dropout rate for hidden and attention
probabilities; a checkpoint with anything else is refused when written. Its
tokenizer maps words over 100 bytes to [UNK].
"""

import datetime
import json
import os
import re

import h5py
import numpy as np
from absl import logging

from bert_keras.checkpoints.checkpoint import HUGGING_FACE_MAX_CHARS_PER_WORD
from bert_keras.checkpoints.checkpoint import POOLER_PATHS
from bert_keras.checkpoints.checkpoint import read_json
from bert_keras.checkpoints.checkpoint import tokenizer_settings
from bert_keras.checkpoints.config_arguments import config_arguments
from bert_keras.checkpoints.name_tables import checkpoint_tensors
from bert_keras.checkpoints.name_tables import read_tables
from bert_keras.checkpoints.vocabulary import read_vocabulary
from bert_keras.checkpoints.vocabulary import write_vocabulary

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"
SHARDED_WEIGHTS_FILE = "model.weights.json"
TASK_CONFIG_FILE = "task.json"
TASK_WEIGHTS_FILE = "task.weights.h5"
TOKENIZER_CONFIG_FILE = "tokenizer.json"
PREPROCESSOR_CONFIG_FILE = "preprocessor.json"
METADATA_FILE = "metadata.json"
VOCABULARY_FILE = "vocabulary.txt"  # in assets/<tokenizer config's stem>/

BACKBONE_CLASS = "keras_hub>BertBackbone"
TOKENIZER_CLASS = "keras_hub>BertTokenizer"
CLASSIFIER_CLASS = "keras_hub>BertTextClassifier"
PREPROCESSOR_CLASS = "keras_hub>BertTextClassifierPreprocessor"

# What keras-hub's BertBackbone computes and has no argument for.
ACTIVATION = "gelu_approximate"
LAYER_NORM_EPSILON = 1e-12
# keras-hub's WordPieceTokenizer sends words over 100 bytes to [UNK].
MAX_CHARS_PER_WORD = HUGGING_FACE_MAX_CHARS_PER_WORD

_BLOCK = "transformer_layer_{i}/"
_ENCODER = WEIGHTS_FILE + "/layers/{encoder}/"
_ATTENTION = _ENCODER + "_self_attention_layer/"
BACKBONE_TABLE = (
    # BertBackbone weight path                 layout   file/tensor(s)
    (
        "embeddings/token_embedding/embeddings",
        "same",
        (WEIGHTS_FILE + "/layers/reversible_embedding/vars/0",),
    ),
    (
        "embeddings/segment_embedding/embeddings",
        "same",
        (WEIGHTS_FILE + "/layers/embedding/vars/0",),
    ),
    (
        "embeddings/position_embedding/embeddings",
        "same",
        (WEIGHTS_FILE + "/layers/position_embedding/vars/0",),
    ),
    ("embeddings/layer_norm/gamma", "same", (WEIGHTS_FILE + "/layers/layer_normalization/vars/0",)),
    ("embeddings/layer_norm/beta", "same", (WEIGHTS_FILE + "/layers/layer_normalization/vars/1",)),
    (
        _BLOCK + "self_attention/query_key_value/kernel",
        "concatenated",
        tuple(_ATTENTION + f"{part}_dense/vars/0" for part in ("query", "key", "value")),
    ),
    (
        _BLOCK + "self_attention/query_key_value/bias",
        "concatenated",
        tuple(_ATTENTION + f"{part}_dense/vars/1" for part in ("query", "key", "value")),
    ),
    (
        _BLOCK + "self_attention/attention_output/kernel",
        "same",
        (_ATTENTION + "output_dense/vars/0",),
    ),
    (
        _BLOCK + "self_attention/attention_output/bias",
        "same",
        (_ATTENTION + "output_dense/vars/1",),
    ),
    (
        _BLOCK + "attention_layer_norm/gamma",
        "same",
        (_ENCODER + "_self_attention_layer_norm/vars/0",),
    ),
    (
        _BLOCK + "attention_layer_norm/beta",
        "same",
        (_ENCODER + "_self_attention_layer_norm/vars/1",),
    ),
    (
        _BLOCK + "intermediate_dense/kernel",
        "same",
        (_ENCODER + "_feedforward_intermediate_dense/vars/0",),
    ),
    (
        _BLOCK + "intermediate_dense/bias",
        "same",
        (_ENCODER + "_feedforward_intermediate_dense/vars/1",),
    ),
    (_BLOCK + "output_dense/kernel", "same", (_ENCODER + "_feedforward_output_dense/vars/0",)),
    (_BLOCK + "output_dense/bias", "same", (_ENCODER + "_feedforward_output_dense/vars/1",)),
    (_BLOCK + "output_layer_norm/gamma", "same", (_ENCODER + "_feedforward_layer_norm/vars/0",)),
    (_BLOCK + "output_layer_norm/beta", "same", (_ENCODER + "_feedforward_layer_norm/vars/1",)),
    ("pooler_dense/kernel", "same", (WEIGHTS_FILE + "/layers/dense/vars/0",)),
    ("pooler_dense/bias", "same", (WEIGHTS_FILE + "/layers/dense/vars/1",)),
)

HEAD_TABLES = {
    # BertTextClassifier's "logits" Dense, the only layer with weights in task.weights.h5.
    "classifier": (
        ("kernel", "same", (TASK_WEIGHTS_FILE + "/layers/dense/vars/0",)),
        ("bias", "same", (TASK_WEIGHTS_FILE + "/layers/dense/vars/1",)),
    ),
}
# Training state in task.weights.h5, not weights: the optimizer's variables.
IGNORED_PATTERNS = (re.escape(TASK_WEIGHTS_FILE) + r"/optimizer/.*",)

# Stored per head: (query|key|value)_dense kernels [hidden, heads, head_dim] and
# biases [heads, head_dim]; output_dense kernel [heads, head_dim, hidden].
_PER_HEAD_INPUT = re.compile(r".*/_self_attention_layer/(query|key|value)_dense/vars/[01]")
_PER_HEAD_OUTPUT = re.compile(r".*/_self_attention_layer/output_dense/vars/0")

# BertBackbone arguments of config.json -> ours; keras-hub's defaults.
CONFIG_TABLE = (
    ("vocabulary_size", None),
    ("num_layers", None),
    ("num_heads", None),
    ("hidden_dim", None),
    ("intermediate_dim", None),
    ("max_sequence_length", 512),
    ("num_segments", 2),
    ("dropout", 0.1),
)
# Keys of a Keras layer config that carry no architecture.
_LAYER_KEYS = ("name", "trainable", "dtype")
# What keras-hub 0.32's metadata.json lists as the tasks of a BertBackbone.
_BACKBONE_TASKS = ["MaskedLM", "TextClassifier", "TextEmbedder"]


def encoder_name(index):
    """The name Keras gives encoder block `index` in a weights file.

    Example:
    >>> encoder_name(0), encoder_name(3)
    ('transformer_encoder', 'transformer_encoder_3')
    """
    return "transformer_encoder" if index == 0 else f"transformer_encoder_{index}"


def backbone_table(num_layers):
    """`BACKBONE_TABLE` written out for `num_layers` encoder blocks.

    Example:
    >>> rows = backbone_table(2)
    >>> len(rows), rows[-3]
    (31, ('transformer_layer_1/output_layer_norm/beta', 'same', \
('model.weights.h5/layers/transformer_encoder_1/_feedforward_layer_norm/vars/1',)))
    """
    rows = []
    for path, layout, names in BACKBONE_TABLE:
        for index in range(num_layers) if "{i}" in path else [None]:
            block = None if index is None else encoder_name(index)
            rows.append(
                (path.format(i=index), layout, tuple(n.format(encoder=block) for n in names))
            )
    return tuple(rows)


class _Tables:
    """A format's tables as `name_tables` takes them, for one number of blocks."""

    def __init__(self, num_layers):
        self.BACKBONE_TABLE = backbone_table(num_layers)
        self.HEAD_TABLES = HEAD_TABLES


def is_checkpoint(directory):
    """Whether `directory` holds a keras-hub preset's config.json.

    A keras-hub config.json names its registered class; a Hugging Face one
    does not. The weights are checked when read, so a preset without them
    gets an error that says so.

    Example:
    >>> is_checkpoint("/nonexistent")
    False
    """
    raw = _read_json_or_none(os.path.join(directory, CONFIG_FILE))
    return isinstance(raw, dict) and str(raw.get("registered_name", "")).startswith("keras_hub>")


def read_config(directory):
    """Reads config.json into `(backbone_config, raw_config)`.

    Raises:
        ValueError: another class than keras-hub's BertBackbone, or
            arguments it has no meaning for here, naming the file.

    Example:
    >>> import json, os, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> with open(os.path.join(directory, "config.json"), "w") as f:
    ...     json.dump({"registered_name": "keras_hub>BertBackbone", "config": {
    ...         "vocabulary_size": 30, "num_layers": 2, "num_heads": 2,
    ...         "hidden_dim": 8, "intermediate_dim": 16}}, f)
    >>> config, _ = read_config(directory)
    >>> config["activation"], config["layer_norm_epsilon"], config["max_sequence_length"]
    ('gelu_approximate', 1e-12, 512)
    """
    path = os.path.join(directory, CONFIG_FILE)
    raw = read_json(path)
    held = raw.get("registered_name") if isinstance(raw, dict) else type(raw).__name__
    if held != BACKBONE_CLASS:
        raise ValueError(f"{path} holds a {held!r}; bert_keras reads {BACKBONE_CLASS!r}.")
    arguments = raw.get("config") or {}
    if not isinstance(arguments, dict):
        raise ValueError(f'{path}: its "config" is not a JSON object of BertBackbone arguments.')
    known = {name for name, _ in CONFIG_TABLE} | set(_LAYER_KEYS)
    unknown = sorted(set(arguments) - known)
    missing = sorted(
        name for name, default in CONFIG_TABLE if default is None and name not in arguments
    )
    if unknown or missing:
        raise ValueError(
            f"{path}: BertBackbone arguments bert_keras does not know: {unknown}; "
            f"missing: {missing}."
        )
    config = config_arguments(
        arguments, path, [(name, name, default) for name, default in CONFIG_TABLE]
    )
    config.update(
        attention_dropout=None, activation=ACTIVATION, layer_norm_epsilon=LAYER_NORM_EPSILON
    )
    return config, raw


def config_json(backbone_config):
    """config.json's dict for `BertBackbone` arguments, refusing what keras-hub can't compute.

    Raises:
        ValueError: an activation other than the tanh GELU, a layer-norm
            epsilon other than 1e-12, or an attention dropout other than the
            dropout, naming the setting.

    Example:
    >>> config = config_json({"vocabulary_size": 30, "num_layers": 2, "num_heads": 2,
    ...     "hidden_dim": 8, "intermediate_dim": 16, "max_sequence_length": 64,
    ...     "num_segments": 2, "dropout": 0.1, "attention_dropout": None,
    ...     "activation": "gelu_approximate", "layer_norm_epsilon": 1e-12})
    >>> config["registered_name"], config["config"]["max_sequence_length"]
    ('keras_hub>BertBackbone', 64)
    >>> config_json({"activation": "gelu", "layer_norm_epsilon": 1e-12})
    Traceback (most recent call last):
    ...
    ValueError: keras-hub's BertBackbone hard-codes the tanh GELU ...; this checkpoint \
uses activation 'gelu'...
    """
    activation = backbone_config.get("activation", ACTIVATION)
    if activation != ACTIVATION:
        exact = " (the exact erf GELU)" if activation == "gelu" else ""
        raise ValueError(
            f"keras-hub's BertBackbone hard-codes the tanh GELU ({ACTIVATION!r}); this "
            f"checkpoint uses activation {activation!r}{exact}, so keras-hub would compute "
            "other outputs. Keep it in the bert_keras format."
        )
    epsilon = backbone_config.get("layer_norm_epsilon", LAYER_NORM_EPSILON)
    if epsilon != LAYER_NORM_EPSILON:
        raise ValueError(
            f"keras-hub's BertBackbone hard-codes layer_norm_epsilon {LAYER_NORM_EPSILON}; "
            f"this checkpoint uses {epsilon}."
        )
    attention_dropout = backbone_config.get("attention_dropout")
    if attention_dropout is not None and attention_dropout != backbone_config["dropout"]:
        raise ValueError(
            "keras-hub's BertBackbone uses its dropout for attention too; this checkpoint has "
            f"attention_dropout {attention_dropout} and dropout {backbone_config['dropout']}."
        )
    arguments = {"name": "bert_backbone", "trainable": True, "dtype": _dtype_policy("float32")}
    arguments.update({name: backbone_config[name] for name, _ in CONFIG_TABLE})
    return _serialized("keras_hub.src.models.bert.bert_backbone", "BertBackbone", arguments)


def read_tokenizer_settings(directory):
    """The `BertTokenizer` arguments of a keras-hub tokenizer.json, or None without one.

    Raises:
        ValueError: a setting bert_keras' tokenizer does not have, naming it.

    Example:
    >>> import json, os, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> with open(os.path.join(directory, "tokenizer.json"), "w") as f:
    ...     json.dump({"registered_name": "keras_hub>BertTokenizer",
    ...                "config": {"lowercase": True, "strip_accents": False}}, f)
    >>> settings = read_tokenizer_settings(directory)
    >>> settings["lowercase"], settings["strip_accents"], settings["max_input_chars_per_word"]
    (True, False, 100)
    """
    path = os.path.join(directory, TOKENIZER_CONFIG_FILE)
    raw = _read_json_or_none(path)
    if not is_tokenizer_config(raw):
        return None
    if raw["registered_name"] != TOKENIZER_CLASS:
        raise ValueError(
            f"{path} holds a {raw['registered_name']!r}; expected {TOKENIZER_CLASS!r}."
        )
    config = raw.get("config") or {}
    expected = {
        "split": True,
        "suffix_indicator": "##",
        "oov_token": "[UNK]",
        "special_tokens": None,
        "special_tokens_in_strings": False,
    }
    unsupported = [
        f"{name} is {config[name]!r}, expected {value!r}"
        for name, value in expected.items()
        if name in config and config[name] != value
    ]
    if unsupported:
        raise ValueError(
            f"{path}: tokenizer settings bert_keras' BertTokenizer does not have: "
            + "; ".join(unsupported)
            + "."
        )
    return tokenizer_settings(
        lowercase=config.get("lowercase", False),
        strip_accents=bool(config.get("strip_accents", False)),
        tokenize_chinese_chars=config.get("split_on_cjk", True),
        max_input_chars_per_word=MAX_CHARS_PER_WORD,
    )


def is_tokenizer_config(raw):
    """Whether a parsed tokenizer.json is a keras-hub layer config (not a Hugging Face one).

    Example:
    >>> is_tokenizer_config({"registered_name": "keras_hub>BertTokenizer"})
    True
    >>> is_tokenizer_config({"model": {"type": "WordPiece"}})
    False
    """
    return isinstance(raw, dict) and str(raw.get("registered_name", "")).startswith("keras_hub>")


def vocabulary_file(directory):
    """The path of the preset's vocabulary.txt, or None.

    keras-hub keeps a tokenizer's assets under `assets/` + its config file's
    stem (`assets/tokenizer/` for tokenizer.json).

    Example:
    >>> vocabulary_file("/nonexistent") is None
    True
    """
    raw = _read_json_or_none(os.path.join(directory, TOKENIZER_CONFIG_FILE)) or {}
    config_file = (raw.get("config") or {}).get("config_file") or TOKENIZER_CONFIG_FILE
    path = os.path.join(directory, "assets", config_file.split(".")[0], VOCABULARY_FILE)
    return path if os.path.isfile(path) else None


def read_preset(directory):
    """Reads a keras-hub BERT preset directory into a `Checkpoint`.

    Reads the backbone, and the classifier head of a BertTextClassifier
    task preset; the vocabulary is assets/tokenizer/vocabulary.txt and the
    tokenizer settings are tokenizer.json's.

    Raises:
        ValueError: a class or setting bert_keras does not compute, a
            missing weights file, or missing, unexpected or wrongly shaped
            tensors (named "<file>/<path in the file>").

    Example:
    >>> import os, tempfile
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> from bert_keras.models.checkpoint_weights import model_checkpoint
    >>> directory = os.path.join(tempfile.mkdtemp(), "preset")
    >>> os.makedirs(directory)
    >>> write_preset(model_checkpoint(BertBackbone(9, 2, 2, 8, 16)), directory)
    >>> checkpoint = read_preset(directory)
    >>> checkpoint.backbone_config["num_layers"], checkpoint.sources["pooler_dense/bias"]
    (2, ('model.weights.h5/layers/dense/vars/1',))
    """
    config, raw = read_config(directory)
    files = [WEIGHTS_FILE]
    heads = {}
    task = _read_json_or_none(os.path.join(directory, TASK_CONFIG_FILE))
    if task is not None and task.get("registered_name") == CLASSIFIER_CLASS:
        _check_classifier_task(task, os.path.join(directory, TASK_CONFIG_FILE))
        # keras-hub always saves a classifier's head: without it the copy is partial.
        files.append(TASK_WEIGHTS_FILE)
        heads = HEAD_TABLES
    tensor_file = TensorFile(directory, files)
    checkpoint = read_tables(
        tensor_file,
        {name: name for name in tensor_file.shapes},
        config,
        backbone_table(config["num_layers"]),
        heads,
        ignored=IGNORED_PATTERNS,
        config_file=(os.path.join(directory, CONFIG_FILE), raw.get("config") or {}),
        config_table=[(name, name, default) for name, default in CONFIG_TABLE],
    )
    if heads and "classifier" not in checkpoint.head_weights:
        raise ValueError(
            f"{os.path.join(directory, TASK_WEIGHTS_FILE)} has no classifier tensors "
            f"({[name for _, _, names in HEAD_TABLES['classifier'] for name in names]})."
        )
    if heads:
        num_classes = task["config"].get("num_classes")
        if num_classes != checkpoint.num_labels():
            raise ValueError(
                f"{os.path.join(directory, TASK_CONFIG_FILE)} says num_classes {num_classes} "
                f"but its classifier has {checkpoint.num_labels()} outputs."
            )
    checkpoint.format, checkpoint.directory, checkpoint.extra_config = "keras_hub", directory, raw
    checkpoint.vocabulary_file = vocabulary_file(directory)
    settings = read_tokenizer_settings(directory)
    if settings is not None:
        checkpoint.tokenizer_settings = settings
    return checkpoint


def _check_classifier_task(task, path):
    activation = task.get("config", {}).get("activation")
    if activation not in (None, "linear"):
        raise ValueError(
            f"{path}: the classifier's activation is {activation!r}; bert_keras' BertClassifier "
            "outputs logits (keras-hub's activation None or 'linear')."
        )


def unsupported_heads(checkpoint):
    """The checkpoint's heads a keras-hub preset cannot hold, which `write_preset` leaves out.

    Example:
    >>> from bert_keras.checkpoints.checkpoint import Checkpoint
    >>> unsupported_heads(Checkpoint({}, {}, {"classifier": {}, "masked_lm": {}}))
    ['masked_lm']
    """
    return sorted(set(checkpoint.head_weights) - set(HEAD_TABLES))


def write_preset(checkpoint, directory):
    """Writes a `Checkpoint` into `directory` (which exists) as a keras-hub preset.

    Writes config.json, model.weights.h5 and metadata.json; with a vocabulary,
    tokenizer.json and assets/tokenizer/vocabulary.txt; with a classifier
    head, task.json, task.weights.h5 and (with a vocabulary) the
    preprocessor.json of a BertTextClassifier. Weights are written as
    float32. `bert_keras.checkpoints.write_checkpoint` calls this inside an
    atomic directory.

    Heads other than a classifier (a release's pretraining heads) are left
    out, with a warning.

    Raises:
        ValueError: what keras-hub cannot represent: a setting of
            `config_json`, or a checkpoint without the pooler, naming it.

    Example:
    >>> import os, tempfile
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> from bert_keras.models.checkpoint_weights import model_checkpoint
    >>> directory = tempfile.mkdtemp()
    >>> write_preset(model_checkpoint(BertBackbone(9, 1, 2, 8, 16)), directory)
    >>> sorted(os.listdir(directory))
    ['config.json', 'metadata.json', 'model.weights.h5']
    """
    if not set(POOLER_PATHS) <= set(checkpoint.backbone_weights):
        raise ValueError(
            "keras-hub's BertBackbone always has a pooler, and this checkpoint has none (its "
            "class was built without one); keep it in the bert_keras format."
        )
    unsupported = unsupported_heads(checkpoint)
    if unsupported:
        logging.warning(
            "keras-hub presets hold no %s head (a BertTextClassifier task holds a 'classifier' "
            "head only): writing the checkpoint without it; the bert_keras format keeps it.",
            unsupported,
        )
        checkpoint = checkpoint.without_heads(unsupported)
    backbone_config = checkpoint.backbone_config
    config = config_json(backbone_config)
    tensors = checkpoint_tensors(checkpoint, _Tables(backbone_config["num_layers"]), "")
    write_tensors(directory, tensors, backbone_config["num_heads"])
    _write_json(os.path.join(directory, CONFIG_FILE), config)
    num_parameters = sum(
        int(np.prod(value.shape)) for value in checkpoint.backbone_weights.values()
    )
    _write_json(
        os.path.join(directory, METADATA_FILE),
        {
            "keras_version": _keras_version(),
            "parameter_count": num_parameters,
            "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S"),
            "tasks": _BACKBONE_TASKS,
        },
    )
    tokenizer = None
    if checkpoint.vocabulary_file is not None:
        tokenizer = _tokenizer_config(checkpoint.tokenizer_settings)
        _write_json(os.path.join(directory, TOKENIZER_CONFIG_FILE), tokenizer)
        assets = os.path.join(directory, "assets", "tokenizer")
        os.makedirs(assets)
        write_vocabulary(
            read_vocabulary(checkpoint.vocabulary_file), os.path.join(assets, VOCABULARY_FILE)
        )
    if "classifier" in checkpoint.head_weights:
        preprocessor = None
        if tokenizer is not None:
            preprocessor = _preprocessor_config(tokenizer, backbone_config)
            _write_json(os.path.join(directory, PREPROCESSOR_CONFIG_FILE), preprocessor)
        task = _serialized(
            "keras_hub.src.models.bert.bert_text_classifier",
            "BertTextClassifier",
            {
                "backbone": config,
                "preprocessor": preprocessor,
                "name": "bert_text_classifier",
                "num_classes": checkpoint.num_labels(),
                "activation": "linear",
                "dropout": backbone_config["dropout"],
            },
        )
        _write_json(os.path.join(directory, TASK_CONFIG_FILE), task)


def _tokenizer_config(settings):
    lowercase = settings["lowercase"]
    strip_accents = settings["strip_accents"]
    arguments = {
        "name": "bert_tokenizer",
        "trainable": True,
        "dtype": _dtype_policy("int32"),
        "config_file": TOKENIZER_CONFIG_FILE,
        "vocabulary": None,
        "sequence_length": None,
        "lowercase": bool(lowercase),
        # Ours follows the casing when None, as the original; keras-hub's is a bool.
        "strip_accents": bool(lowercase if strip_accents is None else strip_accents),
        "split": True,
        "split_on_cjk": bool(settings["tokenize_chinese_chars"]),
        "suffix_indicator": "##",
        "oov_token": "[UNK]",
        "special_tokens": None,
        "special_tokens_in_strings": False,
    }
    return _serialized("keras_hub.src.models.bert.bert_tokenizer", "BertTokenizer", arguments)


def _preprocessor_config(tokenizer, backbone_config):
    arguments = {
        "name": "bert_text_classifier_preprocessor",
        "trainable": True,
        "dtype": _dtype_policy("float32"),
        "tokenizer": tokenizer,
        "config_file": PREPROCESSOR_CONFIG_FILE,
        # keras-hub's default, or the longest the position embeddings allow.
        "sequence_length": min(512, backbone_config["max_sequence_length"]),
        "truncate": "round_robin",
    }
    return _serialized(
        "keras_hub.src.models.bert.bert_text_classifier_preprocessor",
        "BertTextClassifierPreprocessor",
        arguments,
    )


def _serialized(module, class_name, arguments):
    """A Keras-serialized object as keras-hub's json files hold it."""
    return {
        "module": module,
        "class_name": class_name,
        "config": arguments,
        "registered_name": f"keras_hub>{class_name}",
    }


def _dtype_policy(name):
    return {
        "module": "keras",
        "class_name": "DTypePolicy",
        "config": {"name": name},
        "registered_name": None,
    }


def _keras_version():
    import keras

    return keras.version()


class TensorFile:
    """Lazy access to the tensors of a preset's weights files, as "<file>/<path>".

    Attention tensors come with their heads merged (see the module's
    docstring); `shapes` gives them as stored.

    Attributes:
        shapes: dict tensor name -> shape tuple as stored, for every tensor.

    Raises:
        ValueError: a weights file that is missing (sharded weights
            included) or not HDF5, naming it.

    Example:
    >>> import os, tempfile, numpy as np
    >>> directory = tempfile.mkdtemp()
    >>> write_tensors(directory, {
    ...     "model.weights.h5/layers/transformer_encoder/_self_attention_layer/"
    ...     "query_dense/vars/0": np.zeros((8, 8), "float32")}, num_heads=2)
    >>> tensor_file = TensorFile(directory)
    >>> list(tensor_file.shapes.values()), tensor_file.read(next(iter(tensor_file.shapes))).shape
    ([(8, 2, 4)], (8, 8))
    """

    def __init__(self, directory, files=(WEIGHTS_FILE,)):
        self.directory = directory
        self.shapes = {}
        for file_name in files:
            path = os.path.join(directory, file_name)
            if not os.path.isfile(path):
                sharded = os.path.isfile(os.path.join(directory, SHARDED_WEIGHTS_FILE))
                raise ValueError(
                    f"{path} is missing"
                    + (
                        f"; the preset's weights are sharded ({SHARDED_WEIGHTS_FILE}), which "
                        "bert_keras does not read: save it again with max_shard_size=None."
                        if sharded and file_name == WEIGHTS_FILE
                        else "."
                    )
                )
            with _open_h5(path) as weights:
                weights.visititems(
                    lambda name, item, file_name=file_name: self._add(file_name, name, item)
                )

    def _add(self, file_name, name, item):
        if isinstance(item, h5py.Dataset):
            self.shapes[f"{file_name}/{name}"] = tuple(item.shape)

    def read(self, name):
        """Returns tensor `name` as a numpy array, attention heads merged."""
        file_name, path = name.split("/", 1)
        with _open_h5(os.path.join(self.directory, file_name)) as weights:
            dataset = weights[path]
            if dataset.attrs.get("dtype") == "bfloat16":
                # Keras stores bfloat16 raw, marked by this attribute.
                import ml_dtypes

                array = np.array(dataset, dtype=ml_dtypes.bfloat16).astype("float32")
            else:
                array = np.asarray(dataset[()])
        if _PER_HEAD_INPUT.fullmatch(name) and array.ndim in (2, 3):
            return array.reshape(array.shape[:-2] + (-1,))  # [hidden, heads * head_dim]
        if _PER_HEAD_OUTPUT.fullmatch(name) and array.ndim == 3:
            return array.reshape(-1, array.shape[-1])  # [heads * head_dim, hidden]
        return array


def write_tensors(directory, tensors, num_heads):
    """Writes `tensors` ("<file>/<path>" -> array) into the weights files, split per head.

    Example:
    >>> import tempfile, numpy as np
    >>> directory = tempfile.mkdtemp()
    >>> write_tensors(directory, {"task.weights.h5/layers/dense/vars/1": np.zeros(3)}, 2)
    >>> TensorFile(directory, ["task.weights.h5"]).shapes
    {'task.weights.h5/layers/dense/vars/1': (3,)}
    """
    by_file = {}
    for name, value in tensors.items():
        file_name, path = name.split("/", 1)
        value = np.asarray(value, dtype="float32")
        if _PER_HEAD_INPUT.fullmatch(name):
            value = value.reshape(value.shape[:-1] + (num_heads, -1))
        elif _PER_HEAD_OUTPUT.fullmatch(name):
            value = value.reshape(num_heads, -1, value.shape[-1])
        by_file.setdefault(file_name, {})[path] = value
    for file_name, values in by_file.items():
        with h5py.File(os.path.join(directory, file_name), "w") as weights:
            for path, value in sorted(values.items()):
                weights.create_dataset(path, data=value)


def _open_h5(path):
    try:
        return h5py.File(path, "r")
    except OSError as error:
        raise ValueError(f"{path} is not a readable HDF5 weights file: {error}") from error


def _read_json_or_none(path):
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def _write_json(path, value):
    with open(path, "w", encoding="utf-8") as file:
        json.dump(value, file, indent=4)
        file.write("\n")
