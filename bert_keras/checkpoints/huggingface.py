"""The Hugging Face `transformers` BERT checkpoint: config.json + safetensors.

A directory as `BertModel.save_pretrained(directory)` writes it: `config.json`
and `model.safetensors` (or `model.safetensors.index.json` and its shards),
usually with `vocab.txt`, `tokenizer.json` and `tokenizer_config.json`.
Headed models (`BertForPreTraining`, `BertForSequenceClassification`, ...)
prefix the encoder's tensors with `bert.`; their heads live under `cls.`,
`classifier.` and `qa_outputs.`.

The tables below name each tensor as the checkpoint does, next to the weight
path of `BertBackbone` (or of a head) and the layout that turns one into the
other; `bert_keras.checkpoints.name_tables` reads them in both directions, so
loading and saving share one mapping. Layouts: "same"; "transposed" (torch
`Linear.weight` is `[out, in]`, Keras kernels `[in, out]`); "concatenated" and
"transposed_concatenated" (query, key and value joined on the output axis).

Pickled files (`pytorch_model.bin`) are never opened: unpickling runs code.
"""

import json
import os
import re

import numpy as np
from safetensors import SafetensorError
from safetensors import safe_open

from bert_keras.checkpoints.checkpoint import read_json
from bert_keras.checkpoints.config_arguments import config_arguments

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX_FILE = "model.safetensors.index.json"
PICKLED_FILES = ("pytorch_model.bin", "pytorch_model.bin.index.json")
TOKENIZER_FILES = (
    "vocab.txt",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)
ENCODER_PREFIX = "bert."

_BLOCK = "transformer_layer_{i}/"
_LAYER = "encoder.layer.{i}."
BACKBONE_TABLE = (
    # BertBackbone weight path                        layout   checkpoint tensor(s)
    ("embeddings/token_embedding/embeddings", "same", ("embeddings.word_embeddings.weight",)),
    (
        "embeddings/segment_embedding/embeddings",
        "same",
        ("embeddings.token_type_embeddings.weight",),
    ),
    (
        "embeddings/position_embedding/embeddings",
        "same",
        ("embeddings.position_embeddings.weight",),
    ),
    ("embeddings/layer_norm/gamma", "same", ("embeddings.LayerNorm.weight",)),
    ("embeddings/layer_norm/beta", "same", ("embeddings.LayerNorm.bias",)),
    (
        _BLOCK + "self_attention/query_key_value/kernel",
        "transposed_concatenated",
        tuple(_LAYER + f"attention.self.{part}.weight" for part in ("query", "key", "value")),
    ),
    (
        _BLOCK + "self_attention/query_key_value/bias",
        "concatenated",
        tuple(_LAYER + f"attention.self.{part}.bias" for part in ("query", "key", "value")),
    ),
    (
        _BLOCK + "self_attention/attention_output/kernel",
        "transposed",
        (_LAYER + "attention.output.dense.weight",),
    ),
    (
        _BLOCK + "self_attention/attention_output/bias",
        "same",
        (_LAYER + "attention.output.dense.bias",),
    ),
    (
        _BLOCK + "attention_layer_norm/gamma",
        "same",
        (_LAYER + "attention.output.LayerNorm.weight",),
    ),
    (_BLOCK + "attention_layer_norm/beta", "same", (_LAYER + "attention.output.LayerNorm.bias",)),
    (_BLOCK + "intermediate_dense/kernel", "transposed", (_LAYER + "intermediate.dense.weight",)),
    (_BLOCK + "intermediate_dense/bias", "same", (_LAYER + "intermediate.dense.bias",)),
    (_BLOCK + "output_dense/kernel", "transposed", (_LAYER + "output.dense.weight",)),
    (_BLOCK + "output_dense/bias", "same", (_LAYER + "output.dense.bias",)),
    (_BLOCK + "output_layer_norm/gamma", "same", (_LAYER + "output.LayerNorm.weight",)),
    (_BLOCK + "output_layer_norm/beta", "same", (_LAYER + "output.LayerNorm.bias",)),
    ("pooler_dense/kernel", "transposed", ("pooler.dense.weight",)),
    ("pooler_dense/bias", "same", ("pooler.dense.bias",)),
)

HEAD_TABLES = {
    # head name: ((head weight path, layout, checkpoint tensor(s)), ...)
    "masked_lm": (
        ("transform_dense/kernel", "transposed", ("cls.predictions.transform.dense.weight",)),
        ("transform_dense/bias", "same", ("cls.predictions.transform.dense.bias",)),
        ("transform_layer_norm/gamma", "same", ("cls.predictions.transform.LayerNorm.weight",)),
        ("transform_layer_norm/beta", "same", ("cls.predictions.transform.LayerNorm.bias",)),
        ("output_bias", "same", ("cls.predictions.bias",)),
    ),
    "next_sentence": (
        ("kernel", "transposed", ("cls.seq_relationship.weight",)),
        ("bias", "same", ("cls.seq_relationship.bias",)),
    ),
    "classifier": (
        ("kernel", "transposed", ("classifier.weight",)),
        ("bias", "same", ("classifier.bias",)),
    ),
    "question_answering": (
        ("kernel", "transposed", ("qa_outputs.weight",)),
        ("bias", "same", ("qa_outputs.bias",)),
    ),
}
# Sequence and token classification both name their head `classifier.*`.
HEAD_TABLES["token_classifier"] = HEAD_TABLES["classifier"]

# The transformers class that holds exactly these heads, both ways.
ARCHITECTURES = {
    (): "BertModel",
    ("masked_lm", "next_sentence"): "BertForPreTraining",
    ("masked_lm",): "BertForMaskedLM",
    ("next_sentence",): "BertForNextSentencePrediction",
    ("classifier",): "BertForSequenceClassification",
    ("token_classifier",): "BertForTokenClassification",
    ("question_answering",): "BertForQuestionAnswering",
}
# Its classifier head scores each choice (one output), as a multiple-choice task model's does.
MULTIPLE_CHOICE_ARCHITECTURE = "BertForMultipleChoice"
# Tensors a checkpoint may hold that carry no weights: a constant buffer, and
# the masked-LM decoder that transformers ties to the word embeddings.
IGNORED_TENSORS = (r"embeddings\.position_ids",)  # patterns, matched whole
TIED_TENSORS = {
    "cls.predictions.decoder.weight": "embeddings.word_embeddings.weight",
    "cls.predictions.decoder.bias": "cls.predictions.bias",
}

# Names older checkpoints use (e.g. bert-base-uncased) -> the names above;
# transformers renames them the same way when it loads.
LEGACY_NAMES = ((r"LayerNorm\.gamma$", "LayerNorm.weight"), (r"LayerNorm\.beta$", "LayerNorm.bias"))


def table_name(name):
    """The name `name` has in the tables: without "bert.", legacy names renamed.

    Example:
    >>> table_name("bert.embeddings.LayerNorm.gamma")
    'embeddings.LayerNorm.weight'
    """
    if name.startswith(ENCODER_PREFIX):
        name = name[len(ENCODER_PREFIX) :]
    for pattern, replacement in LEGACY_NAMES:
        name = re.sub(pattern, replacement, name)
    return name


CONFIG_TABLE = (
    # config.json key, BertBackbone argument, transformers' BertConfig default
    ("vocab_size", "vocabulary_size", 30522),
    ("num_hidden_layers", "num_layers", 12),
    ("num_attention_heads", "num_heads", 12),
    ("hidden_size", "hidden_dim", 768),
    ("intermediate_size", "intermediate_dim", 3072),
    ("max_position_embeddings", "max_sequence_length", 512),
    ("type_vocab_size", "num_segments", 2),
    ("hidden_dropout_prob", "dropout", 0.1),
    ("layer_norm_eps", "layer_norm_epsilon", 1e-12),
)
ATTENTION_DROPOUT = (("attention_probs_dropout_prob", "attention_dropout", 0.1),)
# Our activation name -> the name transformers writes; read back with aliases.
ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_approximate": "gelu_new",
    "relu": "relu",
    "silu": "silu",
    "tanh": "tanh",
    "linear": "linear",
}
ACTIVATION_ALIASES = {"gelu_pytorch_tanh": "gelu_approximate", "swish": "silu"}


def is_checkpoint(directory):
    """Whether `directory` holds config.json and safetensors weights.

    Example:
    >>> is_checkpoint("/nonexistent")
    False
    """
    return os.path.isfile(os.path.join(directory, CONFIG_FILE)) and (
        os.path.isfile(os.path.join(directory, WEIGHTS_FILE))
        or os.path.isfile(os.path.join(directory, WEIGHTS_INDEX_FILE))
    )


def has_pickled_weights(directory):
    """Whether `directory` holds weights only as a pickle (`pytorch_model.bin`).

    Example:
    >>> has_pickled_weights("/nonexistent")
    False
    """
    return any(os.path.isfile(os.path.join(directory, name)) for name in PICKLED_FILES)


def pickled_weights_message(directory):
    """The refusal to unpickle, with the commands that convert to safetensors.

    Example:
    >>> "safetensors" in pickled_weights_message("/tmp/model")
    True
    """
    return (
        f"{directory} holds its weights only as pytorch_model.bin, a pickle; "
        "bert_keras never unpickles files because loading a pickle can run "
        "arbitrary code. Convert it to safetensors once, in an environment you "
        "trust:\n"
        "    from transformers import BertModel  # or the headed class\n"
        f"    BertModel.from_pretrained({directory!r}).save_pretrained(\n"
        f"        {directory!r}, safe_serialization=True)\n"
        "or, without transformers:\n"
        "    import torch, safetensors.torch\n"
        "    state = torch.load('pytorch_model.bin', weights_only=True)\n"
        "    safetensors.torch.save_file(\n"
        "        {k: v.contiguous() for k, v in state.items()}, 'model.safetensors')"
    )


def read_config(directory):
    """Reads config.json into `(backbone_config, architecture, raw_config)`.

    `backbone_config` holds `BertBackbone` constructor arguments;
    `architecture` is the transformers class named in "architectures" (or
    None).

    Raises:
        ValueError: the config asks for something `BertBackbone` does not
            compute (another model type, relative positions, a decoder, an
            unknown activation).

    Example:
    >>> import json, tempfile, os
    >>> directory = tempfile.mkdtemp()
    >>> with open(os.path.join(directory, "config.json"), "w") as f:
    ...     json.dump({"model_type": "bert", "hidden_act": "gelu_new"}, f)
    >>> config, architecture, _ = read_config(directory)
    >>> config["activation"], config["hidden_dim"], architecture
    ('gelu_approximate', 768, None)
    """
    path = os.path.join(directory, CONFIG_FILE)
    raw = read_json(path)
    config = config_arguments(raw, path, CONFIG_TABLE)
    _check_supported(raw, path)
    attention_dropout = config_arguments(raw, path, ATTENTION_DROPOUT)["attention_dropout"]
    config["attention_dropout"] = (
        None if attention_dropout == config["dropout"] else attention_dropout
    )
    config["activation"] = _read_activation(raw.get("hidden_act", "gelu"), path)
    architectures = raw.get("architectures") or [None]
    return config, architectures[0], raw


def _check_supported(raw, path):
    problems = []
    if raw.get("model_type", "bert") != "bert":
        problems.append(f"model_type is {raw['model_type']!r}, expected 'bert'")
    if raw.get("position_embedding_type", "absolute") != "absolute":
        problems.append(
            f"position_embedding_type is {raw['position_embedding_type']!r}; "
            "only 'absolute' (learned positions) is supported"
        )
    for flag in ("is_decoder", "add_cross_attention"):
        if raw.get(flag):
            problems.append(f"{flag} is true; BertBackbone is an encoder only")
    if problems:
        raise ValueError(f"Unsupported BERT config {path}: " + "; ".join(problems) + ".")


def _read_activation(hidden_act, path):
    names = {theirs: ours for ours, theirs in ACTIVATIONS.items()}
    names.update(ACTIVATION_ALIASES)
    if not isinstance(hidden_act, str) or hidden_act not in names:
        raise ValueError(
            f"Unsupported hidden_act {hidden_act!r} in {path}; expected one of {sorted(names)}."
        )
    return names[hidden_act]


def config_json(backbone_config, architecture="BertModel", num_labels=None):
    """The config.json dict for a `BertBackbone` config (and its heads).

    Example:
    >>> from bert_keras.models.presets import backbone_preset_config
    >>> config = config_json({**backbone_preset_config("bert_tiny"),
    ...                       "activation": "gelu_approximate"})
    >>> config["hidden_act"], config["hidden_size"], config["architectures"]
    ('gelu_new', 128, ['BertModel'])
    """
    config = {"architectures": [architecture], "model_type": "bert"}
    for theirs, ours, default in CONFIG_TABLE:
        config[theirs] = backbone_config.get(ours, default)
    attention_dropout = backbone_config.get("attention_dropout")
    config["attention_probs_dropout_prob"] = (
        config["hidden_dropout_prob"] if attention_dropout is None else attention_dropout
    )
    config["hidden_act"] = ACTIVATIONS[backbone_config.get("activation", "gelu_approximate")]
    config.update(
        {
            "position_embedding_type": "absolute",
            "initializer_range": 0.02,
            "pad_token_id": 0,
            "dtype": "float32",
        }
    )
    if num_labels is not None:
        config["num_labels"] = num_labels
    return config


class TensorFile:
    """Lazy access to the tensors of a safetensors checkpoint, by name.

    Attributes:
        shapes: dict tensor name -> shape tuple, for every tensor.

    Example:
    >>> import tempfile, os, numpy as np
    >>> from safetensors.numpy import save_file
    >>> directory = tempfile.mkdtemp()
    >>> save_file({"pooler.dense.bias": np.zeros(4, "float32")},
    ...           os.path.join(directory, "model.safetensors"))
    >>> TensorFile(directory).shapes
    {'pooler.dense.bias': (4,)}
    """

    def __init__(self, directory):
        self.directory = directory
        self._files = _tensor_files(directory)  # tensor name -> file path
        self.shapes = {}
        for path in sorted(set(self._files.values())):
            with _opened_tensors(path) as file:
                for name in file.keys():
                    self.shapes[name] = tuple(file.get_slice(name).get_shape())

    def read(self, name):
        """Returns tensor `name` as a numpy array (bfloat16 widened to float32)."""
        path = self._files[name]
        with safe_open(path, framework="numpy") as file:
            if file.get_slice(name).get_dtype() == "BF16":
                return _read_bfloat16(path, name)
            return file.get_tensor(name)


def _tensor_files(directory):
    """Tensor name -> file: model.safetensors where there is one (as transformers), else shards."""
    index_path = os.path.join(directory, WEIGHTS_INDEX_FILE)
    path = os.path.join(directory, WEIGHTS_FILE)
    if os.path.isfile(path) or not os.path.isfile(index_path):
        with _opened_tensors(path) as file:
            return {name: path for name in file.keys()}
    weight_map = _weight_map(index_path)
    return {name: os.path.join(directory, shard) for name, shard in weight_map.items()}


def _weight_map(index_path):
    """A sharded checkpoint index's tensor name -> shard file; a ValueError naming the file."""
    index = read_json(index_path)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(
        isinstance(shard, str) for shard in weight_map.values()
    ):
        raise ValueError(
            f"{index_path} has no weight_map (a JSON object of tensor name -> shard file name)."
        )
    return weight_map


def _opened_tensors(path):
    """`safe_open(path)`, its errors (a cut or corrupt file) made ValueErrors naming the file."""
    try:
        return safe_open(path, framework="numpy")
    except SafetensorError as error:
        raise ValueError(f"{path} is not a readable safetensors file: {error}.") from None


def _read_bfloat16(path, name):
    # numpy has no bfloat16, so safetensors' numpy reader refuses it; ml_dtypes
    # (a dependency of JAX and TensorFlow) reads the raw little-endian bytes.
    import ml_dtypes

    with open(path, "rb") as file:
        header_size = int.from_bytes(file.read(8), "little")
        entry = json.loads(file.read(header_size))[name]
        begin, end = entry["data_offsets"]
        file.seek(8 + header_size + begin)
        data = file.read(end - begin)
    array = np.frombuffer(data, dtype=ml_dtypes.bfloat16).reshape(entry["shape"])
    return array.astype("float32")


def write_tensors(directory, tensors):
    """Writes `tensors` (name -> numpy array) to `directory/model.safetensors`.

    Example:
    >>> import tempfile, numpy as np
    >>> directory = tempfile.mkdtemp()
    >>> write_tensors(directory, {"pooler.dense.bias": np.zeros(4, "float32")})
    >>> TensorFile(directory).shapes
    {'pooler.dense.bias': (4,)}
    """
    from safetensors.numpy import save_file

    tensors = {name: np.ascontiguousarray(value) for name, value in tensors.items()}
    path = os.path.join(directory, WEIGHTS_FILE)
    try:
        save_file(tensors, path, metadata={"format": "pt"})
    except SafetensorError as error:  # a full disk, say
        raise OSError(f"{path} cannot be written: {error}") from None
    _set_mode_from_umask(path)


def _set_mode_from_umask(path):
    """Gives `path` the permissions a new file gets (safetensors makes it its owner's alone)."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)
