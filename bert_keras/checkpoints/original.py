"""The original google-research/bert release: a TF1 checkpoint + bert_config.json.

A directory such as `uncased_L-12_H-768_A-12/` holds `bert_config.json`,
`bert_model.ckpt.index`, `bert_model.ckpt.data-*` and `vocab.txt`. Variable
names follow the scopes of the original `modeling.py`
(`bert/encoder/layer_3/attention/self/query/kernel`); dense kernels are
already `[in, out]` like Keras', only the next-sentence and fine-tuned
output weights are stored `[labels, hidden]`.

The tables name each variable as the checkpoint does, next to the weight path
of `BertBackbone` (or of a head) and the layout between them; see
`bert_keras.checkpoints.huggingface` for the layouts.
"""

import glob
import os

import numpy as np

from bert_keras.checkpoints.checkpoint import read_json
from bert_keras.checkpoints.config_arguments import config_arguments

CONFIG_FILE = "bert_config.json"
VOCABULARY_FILE = "vocab.txt"
DEFAULT_CHECKPOINT = "bert_model.ckpt"

_BLOCK = "transformer_layer_{i}/"
_LAYER = "bert/encoder/layer_{i}/"
BACKBONE_TABLE = (
    # BertBackbone weight path                        layout   checkpoint variable(s)
    ("embeddings/token_embedding/embeddings", "same", ("bert/embeddings/word_embeddings",)),
    ("embeddings/segment_embedding/embeddings", "same", ("bert/embeddings/token_type_embeddings",)),
    ("embeddings/position_embedding/embeddings", "same", ("bert/embeddings/position_embeddings",)),
    ("embeddings/layer_norm/gamma", "same", ("bert/embeddings/LayerNorm/gamma",)),
    ("embeddings/layer_norm/beta", "same", ("bert/embeddings/LayerNorm/beta",)),
    (
        _BLOCK + "self_attention/query_key_value/kernel",
        "concatenated",
        tuple(_LAYER + f"attention/self/{part}/kernel" for part in ("query", "key", "value")),
    ),
    (
        _BLOCK + "self_attention/query_key_value/bias",
        "concatenated",
        tuple(_LAYER + f"attention/self/{part}/bias" for part in ("query", "key", "value")),
    ),
    (
        _BLOCK + "self_attention/attention_output/kernel",
        "same",
        (_LAYER + "attention/output/dense/kernel",),
    ),
    (
        _BLOCK + "self_attention/attention_output/bias",
        "same",
        (_LAYER + "attention/output/dense/bias",),
    ),
    (_BLOCK + "attention_layer_norm/gamma", "same", (_LAYER + "attention/output/LayerNorm/gamma",)),
    (_BLOCK + "attention_layer_norm/beta", "same", (_LAYER + "attention/output/LayerNorm/beta",)),
    (_BLOCK + "intermediate_dense/kernel", "same", (_LAYER + "intermediate/dense/kernel",)),
    (_BLOCK + "intermediate_dense/bias", "same", (_LAYER + "intermediate/dense/bias",)),
    (_BLOCK + "output_dense/kernel", "same", (_LAYER + "output/dense/kernel",)),
    (_BLOCK + "output_dense/bias", "same", (_LAYER + "output/dense/bias",)),
    (_BLOCK + "output_layer_norm/gamma", "same", (_LAYER + "output/LayerNorm/gamma",)),
    (_BLOCK + "output_layer_norm/beta", "same", (_LAYER + "output/LayerNorm/beta",)),
    ("pooler_dense/kernel", "same", ("bert/pooler/dense/kernel",)),
    ("pooler_dense/bias", "same", ("bert/pooler/dense/bias",)),
)

HEAD_TABLES = {
    # run_pretraining.py
    "masked_lm": (
        ("transform_dense/kernel", "same", ("cls/predictions/transform/dense/kernel",)),
        ("transform_dense/bias", "same", ("cls/predictions/transform/dense/bias",)),
        ("transform_layer_norm/gamma", "same", ("cls/predictions/transform/LayerNorm/gamma",)),
        ("transform_layer_norm/beta", "same", ("cls/predictions/transform/LayerNorm/beta",)),
        ("output_bias", "same", ("cls/predictions/output_bias",)),
    ),
    "next_sentence": (
        ("kernel", "transposed", ("cls/seq_relationship/output_weights",)),
        ("bias", "same", ("cls/seq_relationship/output_bias",)),
    ),
    # run_classifier.py
    "classifier": (
        ("kernel", "transposed", ("output_weights",)),
        ("bias", "same", ("output_bias",)),
    ),
    # run_squad.py
    "question_answering": (
        ("kernel", "transposed", ("cls/squad/output_weights",)),
        ("bias", "same", ("cls/squad/output_bias",)),
    ),
}

# Training state, not weights: Adam's moments and the step counter.
IGNORED_PATTERNS = (r".*/adam_[mv]", r"global_step")

CONFIG_TABLE = (
    # bert_config.json key, BertBackbone argument, modeling.BertConfig default
    ("vocab_size", "vocabulary_size", None),
    ("num_hidden_layers", "num_layers", 12),
    ("num_attention_heads", "num_heads", 12),
    ("hidden_size", "hidden_dim", 768),
    ("intermediate_size", "intermediate_dim", 3072),
    ("max_position_embeddings", "max_sequence_length", 512),
    ("type_vocab_size", "num_segments", 16),
    ("hidden_dropout_prob", "dropout", 0.1),
)
ATTENTION_DROPOUT = (("attention_probs_dropout_prob", "attention_dropout", 0.1),)
# modeling.py's "gelu" computes the tanh approximation.
ACTIVATIONS = {"gelu": "gelu_approximate", "relu": "relu", "tanh": "tanh", "linear": "linear"}
# modeling.py hard-codes the layer norm epsilon.
LAYER_NORM_EPSILON = 1e-12


def is_checkpoint(directory):
    """Whether `directory` holds bert_config.json and a TF checkpoint index.

    Example:
    >>> is_checkpoint("/nonexistent")
    False
    """
    return os.path.isfile(os.path.join(directory, CONFIG_FILE)) and bool(
        glob.glob(os.path.join(glob.escape(directory), "*.index"))
    )


def checkpoint_prefix(directory):
    """The checkpoint prefix in `directory` (`.../bert_model.ckpt` when present).

    Raises:
        ValueError: several checkpoints and none named bert_model.ckpt.

    Example:
    >>> import tempfile, os
    >>> directory = tempfile.mkdtemp()
    >>> open(os.path.join(directory, "model.ckpt-100.index"), "w").close()
    >>> os.path.basename(checkpoint_prefix(directory))
    'model.ckpt-100'
    """
    indexes = sorted(glob.glob(os.path.join(glob.escape(directory), "*.index")))
    prefixes = [index[: -len(".index")] for index in indexes]
    default = os.path.join(directory, DEFAULT_CHECKPOINT)
    if default in prefixes or len(prefixes) == 1:
        return default if default in prefixes else prefixes[0]
    raise ValueError(
        f"{directory} holds {len(prefixes)} checkpoints "
        f"({[os.path.basename(p) for p in prefixes]}) and none is named "
        f"{DEFAULT_CHECKPOINT}; pass the directory of one checkpoint."
    )


def read_config(directory):
    """Reads bert_config.json into `BertBackbone` constructor arguments.

    Raises:
        ValueError: an activation modeling.py does not define, or no
            vocab_size.

    Example:
    >>> import json, tempfile, os
    >>> directory = tempfile.mkdtemp()
    >>> with open(os.path.join(directory, "bert_config.json"), "w") as f:
    ...     json.dump({"vocab_size": 100, "hidden_act": "gelu"}, f)
    >>> config = read_config(directory)
    >>> config["activation"], config["layer_norm_epsilon"]
    ('gelu_approximate', 1e-12)
    """
    path = os.path.join(directory, CONFIG_FILE)
    raw = read_json(path)
    config = config_arguments(raw, path, CONFIG_TABLE)
    if config["vocabulary_size"] is None:
        raise ValueError(f"{path} has no vocab_size.")
    attention_dropout = config_arguments(raw, path, ATTENTION_DROPOUT)["attention_dropout"]
    config["attention_dropout"] = (
        None if attention_dropout == config["dropout"] else attention_dropout
    )
    hidden_act = raw.get("hidden_act", "gelu")
    if hidden_act not in ACTIVATIONS:
        raise ValueError(
            f"Unsupported hidden_act {hidden_act!r} in {path}; the original "
            f"modeling.py defines {sorted(ACTIVATIONS)}."
        )
    config["activation"] = ACTIVATIONS[hidden_act]
    config["layer_norm_epsilon"] = LAYER_NORM_EPSILON
    return config


def tokenizer_casing(directory):
    """What the release's directory name says about casing.

    The original release has no tokenizer config: `do_lower_case` is a flag
    of its scripts, and Google names uncased models `uncased_L-..` and cased
    ones `cased_L-..`. Returns `{"lowercase": bool}` when the name says
    "uncased" or "cased", else {}. A relative name (".") counts as the
    directory it stands for. Its vocabulary says more:
    `bert_keras.checkpoints.read_tokenizer_settings` weighs both.

    Example:
    >>> tokenizer_casing("/models/uncased_L-2_H-128_A-2")
    {'lowercase': True}
    >>> tokenizer_casing("/models/cased_L-2_H-128_A-2/"), tokenizer_casing("/models/bert_base")
    ({'lowercase': False}, {})
    """
    name = os.path.basename(os.path.abspath(directory)).lower()
    if "uncased" in name:
        return {"lowercase": True}
    if "cased" in name:
        return {"lowercase": False}
    return {}


def config_json(backbone_config):
    """bert_config.json for `BertBackbone` arguments, refusing what modeling.py can't compute.

    Raises:
        ValueError: an activation or layer-norm epsilon the original
            modeling.py does not have (it computes "gelu" as the tanh form and
            hard-codes 1e-12), naming the setting.

    Example:
    >>> config = config_json({"vocabulary_size": 100, "num_layers": 2, "num_heads": 2,
    ...     "hidden_dim": 8, "intermediate_dim": 32, "max_sequence_length": 64,
    ...     "num_segments": 2, "dropout": 0.1, "attention_dropout": None,
    ...     "activation": "gelu_approximate", "layer_norm_epsilon": 1e-12})
    >>> config["hidden_act"], config["attention_probs_dropout_prob"]
    ('gelu', 0.1)
    """
    by_activation = {ours: theirs for theirs, ours in ACTIVATIONS.items()}
    activation = backbone_config["activation"]
    if activation not in by_activation:
        raise ValueError(
            f"The original modeling.py cannot compute activation {activation!r} (its 'gelu' is "
            f"the tanh form, ours 'gelu_approximate'); keep this model in the Hugging Face format."
        )
    if backbone_config["layer_norm_epsilon"] != LAYER_NORM_EPSILON:
        raise ValueError(
            f"The original modeling.py hard-codes layer_norm_epsilon {LAYER_NORM_EPSILON}; this "
            f"model uses {backbone_config['layer_norm_epsilon']}."
        )
    config = {theirs: backbone_config[ours] for theirs, ours, _ in CONFIG_TABLE}
    attention_dropout = backbone_config.get("attention_dropout")
    config["attention_probs_dropout_prob"] = (
        config["hidden_dropout_prob"] if attention_dropout is None else attention_dropout
    )
    config["hidden_act"] = by_activation[activation]
    config["initializer_range"] = 0.02
    return config


def write_tensors(directory, tensors):
    """Writes `tensors` ({variable name: array}) as `directory`/bert_model.ckpt.

    Floating-point tensors are written as float32, as Google's releases hold
    them: the original's `init_from_checkpoint` restores no other dtype
    into its float32 variables (a float16 Hugging Face checkpoint, say).

    Example:
    >>> import tempfile, numpy as np
    >>> directory = tempfile.mkdtemp()
    >>> write_tensors(directory, {"bert/pooler/dense/bias": np.zeros(4, "float32")})
    >>> TensorFile(directory).shapes
    {'bert/pooler/dense/bias': (4,)}
    """
    import tensorflow as tf

    names = sorted(tensors)
    tf.raw_ops.SaveV2(
        prefix=os.path.join(directory, DEFAULT_CHECKPOINT),
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[_as_stored(tensors[name]) for name in names],
    )


def _as_stored(value):
    value = np.asarray(value)
    return value.astype("float32") if np.issubdtype(value.dtype, np.floating) else value


class TensorFile:
    """Lazy access to the variables of a TF checkpoint, by name.

    Attributes:
        shapes: dict variable name -> shape tuple, for every variable.

    Example:
    >>> import tempfile, os, numpy as np, tensorflow as tf
    >>> directory = tempfile.mkdtemp()
    >>> tf.raw_ops.SaveV2(prefix=os.path.join(directory, "bert_model.ckpt"),
    ...     tensor_names=["bert/pooler/dense/bias"], shape_and_slices=[""],
    ...     tensors=[np.zeros(4, "float32")])
    >>> TensorFile(directory).shapes
    {'bert/pooler/dense/bias': (4,)}
    """

    def __init__(self, directory):
        import tensorflow as tf

        self.directory = directory
        self._prefix = checkpoint_prefix(directory)
        # What TensorFlow raises for a missing, cut or damaged index or data file.
        self._read_errors = (tf.errors.OpError, IndexError)
        try:
            self._reader = tf.train.load_checkpoint(self._prefix)
            shapes = self._reader.get_variable_to_shape_map()
        except self._read_errors as error:
            raise self._unreadable(error) from None
        self.shapes = {name: tuple(shape) for name, shape in shapes.items()}

    def read(self, name):
        """Returns variable `name` as a numpy array."""
        try:
            return self._reader.get_tensor(name)
        except self._read_errors as error:
            raise self._unreadable(error, f"variable {name} of ") from None

    def _unreadable(self, error, what=""):
        """A ValueError naming the checkpoint's files, for a TensorFlow read error."""
        files = sorted(glob.glob(glob.escape(self._prefix) + ".*"))
        listed = ", ".join(f"{os.path.basename(f)} ({os.path.getsize(f):,} bytes)" for f in files)
        reason = getattr(error, "message", None) or str(error) or type(error).__name__
        return ValueError(
            f"Cannot read {what}the TF checkpoint {self._prefix}: {reason}. Its files: {listed}. "
            "A download or copy cut short leaves an index or data file missing or short: "
            "fetch the checkpoint again."
        )
