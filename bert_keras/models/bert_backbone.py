"""The BERT encoder as a Functional Keras model."""

import os

import keras
from keras import ops

from bert_keras.checkpoints import tokenizer_settings
from bert_keras.checkpoints import write_checkpoint
from bert_keras.checkpoints.checkpoint import HUGGING_FACE_MAX_CHARS_PER_WORD
from bert_keras.checkpoints.config_arguments import check_backbone_arguments
from bert_keras.layers.activations import get_activation
from bert_keras.layers.bert_embeddings import BertEmbeddings
from bert_keras.layers.dense import Dense
from bert_keras.layers.initializers import bert_kernel_initializer
from bert_keras.layers.position_embedding import check_sequence_length
from bert_keras.layers.transformer_encoder import TransformerEncoder
from bert_keras.models.checkpoint_weights import exported_backbone_config
from bert_keras.models.checkpoint_weights import load_backbone
from bert_keras.models.checkpoint_weights import model_checkpoint
from bert_keras.models.input_checks import check_matching_shapes
from bert_keras.models.input_checks import check_sequence_widths
from bert_keras.models.input_checks import check_token_ids
from bert_keras.models.layout_map import check_distributed_widths
from bert_keras.models.presets import backbone_preset_config
from bert_keras.training.garbage_collection import QuantizeCollectingOnce
from bert_keras.training.replica_build import BuildsFromOneReplica

INPUT_NAMES = ("token_ids", "segment_ids", "padding_mask")


@keras.saving.register_keras_serializable(package="bert_keras")
class BertBackbone(QuantizeCollectingOnce, BuildsFromOneReplica, keras.Model):
    """BERT (Devlin et al. 2019): embeddings, post-LN encoder blocks, pooler.

    A Functional model. It takes a dict of int tensors `[batch, seq]`
    (any `seq` up to `max_sequence_length`):
    `token_ids`, `segment_ids` and `padding_mask` (1 for real tokens), and
    returns a dict with `sequence_output` `[batch, seq, hidden_dim]` and
    `pooled_output` `[batch, hidden_dim]` (dense + tanh on the [CLS] vector).

    Args:
        vocabulary_size: number of token ids.
        num_layers: number of encoder blocks (L).
        num_heads: attention heads per block (A); must divide `hidden_dim`.
        hidden_dim: hidden size (H).
        intermediate_dim: feed-forward width (BERT: 4H).
        max_sequence_length: number of learned positions.
        num_segments: number of segment (token type) ids.
        dropout: dropout rate of embeddings, attention outputs and
            feed-forward outputs.
        attention_dropout: dropout rate on attention probabilities; defaults
            to `dropout`.
        activation: feed-forward activation; the original BERT computes
            "gelu_approximate" (tanh form), Hugging Face's "gelu" is the exact
            "gelu".
        layer_norm_epsilon: layer norm epsilon (BERT: 1e-12).
        dtype: dtype policy, e.g. "float32" or "mixed_bfloat16".
        **kwargs: standard `keras.Model` arguments (`name`, `trainable`).

    Example:
    >>> import numpy as np
    >>> backbone = BertBackbone(vocabulary_size=100, num_layers=2, num_heads=2,
    ...                         hidden_dim=16, intermediate_dim=32)
    >>> outputs = backbone({
    ...     "token_ids": np.array([[2, 7, 8, 3, 0]]),
    ...     "segment_ids": np.zeros((1, 5), "int32"),
    ...     "padding_mask": np.array([[1, 1, 1, 1, 0]]),
    ... })
    >>> tuple(outputs["sequence_output"].shape), tuple(outputs["pooled_output"].shape)
    ((1, 5, 16), (1, 16))
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        max_sequence_length=512,
        num_segments=2,
        dropout=0.1,
        attention_dropout=None,
        activation="gelu_approximate",
        layer_norm_epsilon=1e-12,
        dtype=None,
        **kwargs,
    ):
        check_backbone_arguments(
            {
                "vocabulary_size": vocabulary_size,
                "num_layers": num_layers,
                "num_heads": num_heads,
                "hidden_dim": hidden_dim,
                "intermediate_dim": intermediate_dim,
                "max_sequence_length": max_sequence_length,
                "num_segments": num_segments,
                "dropout": dropout,
                "attention_dropout": attention_dropout,
                "layer_norm_epsilon": layer_norm_epsilon,
            }
        )
        check_distributed_widths({"hidden_dim": hidden_dim, "intermediate_dim": intermediate_dim})
        _check_architecture(hidden_dim, num_heads, activation)
        _check_model_arguments(kwargs)

        # === Layers ===
        embeddings = BertEmbeddings(
            vocabulary_size,
            hidden_dim,
            max_sequence_length=max_sequence_length,
            num_segments=num_segments,
            dropout=dropout,
            layer_norm_epsilon=layer_norm_epsilon,
            dtype=dtype,
            name="embeddings",
        )
        encoder_blocks = build_encoder_blocks(
            num_layers,
            num_heads,
            intermediate_dim,
            activation=activation,
            dropout=dropout,
            attention_dropout=attention_dropout,
            layer_norm_epsilon=layer_norm_epsilon,
            dtype=dtype,
        )
        pooler_dense = Dense(
            hidden_dim,
            activation="tanh",
            kernel_initializer=bert_kernel_initializer(),
            dtype=dtype,
            name="pooler_dense",
        )

        # === Functional graph ===
        inputs = {
            name: keras.Input(shape=(None,), dtype="int32", name=name) for name in INPUT_NAMES
        }
        sequence_output = _encode(embeddings, encoder_blocks, inputs)  # [batch, seq, hidden_dim]
        pooled_output = pooler_dense(sequence_output[:, 0, :])  # [batch, hidden_dim]
        super().__init__(
            inputs=inputs,
            outputs={
                "sequence_output": sequence_output,
                "pooled_output": pooled_output,
            },
            **kwargs,
        )
        if dtype is not None:
            self.dtype_policy = keras.dtype_policies.get(dtype)

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.max_sequence_length = max_sequence_length
        self.num_segments = num_segments
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.embeddings = embeddings
        self.encoder_blocks = encoder_blocks
        self.pooler_dense = pooler_dense

    @property
    def token_embedding(self):
        """The word-embedding layer, which masked-LM heads tie to."""
        return self.embeddings.token_embedding

    def __call__(self, inputs, *args, **kwargs):
        # Checked here, before Keras wraps errors raised inside `call`.
        self._check_inputs(inputs)
        return super().__call__(inputs, *args, **kwargs)

    def fit(self, x=None, *args, **kwargs):
        """`keras.Model.fit`, array inputs checked first (`check_array_ids`)."""
        self.check_array_ids(x)
        validation_data = kwargs.get("validation_data")
        if isinstance(validation_data, tuple) and validation_data:
            self.check_array_ids(validation_data[0], "validation_data[0]")
        return super().fit(x, *args, **kwargs)

    def evaluate(self, x=None, *args, **kwargs):
        """`keras.Model.evaluate`, array inputs checked first (`check_array_ids`)."""
        self.check_array_ids(x)
        return super().evaluate(x, *args, **kwargs)

    def predict(self, x, *args, **kwargs):
        """`keras.Model.predict`, array inputs checked first (`check_array_ids`)."""
        self.check_array_ids(x)
        return super().predict(x, *args, **kwargs)

    def train_on_batch(self, x, *args, **kwargs):
        """`keras.Model.train_on_batch`, array inputs checked first (`check_array_ids`)."""
        self.check_array_ids(x)
        return super().train_on_batch(x, *args, **kwargs)

    def test_on_batch(self, x, *args, **kwargs):
        """`keras.Model.test_on_batch`, array inputs checked first (`check_array_ids`)."""
        self.check_array_ids(x)
        return super().test_on_batch(x, *args, **kwargs)

    def predict_on_batch(self, x):
        """`keras.Model.predict_on_batch`, array inputs checked first (`check_array_ids`)."""
        self.check_array_ids(x)
        return super().predict_on_batch(x)

    def check_array_ids(self, inputs, name="x"):
        """Raises a ValueError where array `inputs` are too long or hold ids out of range.

        Keras' loops call the model on traced inputs, where the checks of
        `__call__` cannot read the ids (jax would gather NaN for an id past
        the table) and a too-long input fails mid-loop (on jax, leaving the
        variables without their values, so every later call fails too).
        `fit`, `evaluate`, `predict` and the `*_on_batch` methods therefore
        check numpy arrays and lists first; datasets pass unchecked.

        Args:
            inputs: the backbone's input dict (anything else passes).
            name: what `inputs` is called in the error.

        Example:
        >>> import numpy as np
        >>> backbone = BertBackbone(vocabulary_size=10, num_layers=1, num_heads=2,
        ...                         hidden_dim=8, intermediate_dim=16)
        >>> backbone.check_array_ids({"token_ids": np.array([[2, 10, 3]])})
        Traceback (most recent call last):
        ...
        ValueError: x['token_ids'] holds the id 10 (at index (0, 1)); ids run from 0 to 9 (vocabulary_size 10).
        """
        check_sequence_widths(inputs, self.max_sequence_length, name)
        check_matching_shapes(inputs, name)
        check_token_ids(inputs, self.vocabulary_size, self.num_segments, name)

    def sequence_output_at(self, inputs, positions):
        """The encoder's output at `positions` only, computed for less.

        Equals `self(inputs)["sequence_output"]` gathered at `positions`, but
        the last encoder block computes only those rows (its attention still
        reads every position). Task models that read few positions (the
        pretraining heads read [CLS] and the masked positions) call this on
        their symbolic inputs to skip most of the last block's work.

        Args:
            inputs: the backbone's input dict.
            positions: int tensor `[batch, n]`.

        Returns:
            float tensor `[batch, n, hidden_dim]`.

        Example:
        >>> import numpy as np
        >>> from keras import ops
        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=2, num_heads=2,
        ...                         hidden_dim=8, intermediate_dim=16)
        >>> inputs = {"token_ids": np.array([[2, 7, 8, 3]]), "segment_ids": np.zeros((1, 4)),
        ...           "padding_mask": np.ones((1, 4))}
        >>> full = ops.convert_to_numpy(backbone(inputs)["sequence_output"])
        >>> rows = ops.convert_to_numpy(backbone.sequence_output_at(inputs, np.array([[3, 0]])))
        >>> bool(np.allclose(rows, full[:, [3, 0]], atol=1e-6))
        True
        """
        self._check_inputs(inputs)
        return _encode(self.embeddings, self.encoder_blocks, inputs, output_positions=positions)

    def pooled_output(self, inputs):
        """`self(inputs)["pooled_output"]`, the last encoder block computing [CLS] only.

        The pooled output reads the last block's [CLS] row alone, so its
        feed-forward net and every projection but keys and values run on one
        row (`sequence_output_at`). Task models that read only the pooled
        output (classifiers, multiple choice) call this on their symbolic
        inputs.

        Args:
            inputs: the backbone's input dict.

        Returns:
            float tensor `[batch, hidden_dim]`.

        Example:
        >>> import numpy as np
        >>> from keras import ops
        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=2, num_heads=2,
        ...                         hidden_dim=8, intermediate_dim=16)
        >>> inputs = {"token_ids": np.array([[2, 7, 8, 3]]), "segment_ids": np.zeros((1, 4)),
        ...           "padding_mask": np.ones((1, 4))}
        >>> full = ops.convert_to_numpy(backbone(inputs)["pooled_output"])
        >>> pooled = ops.convert_to_numpy(backbone.pooled_output(inputs))
        >>> bool(np.allclose(pooled, full, atol=1e-6))
        True
        """
        cls_position = ops.zeros_like(inputs["padding_mask"][:, :1], dtype="int32")
        return self.pooler_dense(self.sequence_output_at(inputs, cls_position)[:, 0, :])

    def encoder_layer_outputs(self, inputs):
        """Every encoder block's output, first to last, for feature-based use (§5.3).

        The paper's feature-based approach feeds, e.g., the concatenation of
        the last four layers' vectors to a task network instead of
        fine-tuning. Element `i` is block `i`'s sequence output; the last one
        equals `self(inputs)["sequence_output"]`. (transformers'
        `output_hidden_states=True` gives the same list after the embedding
        output, its `hidden_states[1:]`.) The backbone's own outputs and
        config stay as they are; call this on symbolic inputs (see
        `bert_keras.models.bert_task.backbone_inputs`) to build a feature
        model from the same layers and weights.

        Args:
            inputs: the backbone's input dict.

        Returns:
            A list of `num_layers` float tensors `[batch, seq, hidden_dim]`.

        Example:
        >>> import numpy as np
        >>> from keras import ops
        >>> backbone = BertBackbone(vocabulary_size=50, num_layers=4, num_heads=2,
        ...                         hidden_dim=8, intermediate_dim=16)
        >>> inputs = {"token_ids": np.array([[2, 7, 8, 3]]), "segment_ids": np.zeros((1, 4)),
        ...           "padding_mask": np.ones((1, 4))}
        >>> layers = backbone.encoder_layer_outputs(inputs)
        >>> features = ops.concatenate(layers[-4:], axis=-1)  # the last four layers
        >>> len(layers), tuple(features.shape)
        (4, (1, 4, 32))
        >>> last = ops.convert_to_numpy(backbone(inputs)["sequence_output"])
        >>> bool(np.allclose(ops.convert_to_numpy(layers[-1]), last, atol=1e-6))
        True
        """
        self._check_inputs(inputs)
        sequence = self.embeddings(inputs["token_ids"], inputs["segment_ids"])
        return encoder_block_outputs(self.encoder_blocks, sequence, inputs["padding_mask"])

    def _check_inputs(self, inputs):
        if not isinstance(inputs, dict) or set(inputs) != set(INPUT_NAMES):
            received = sorted(inputs) if isinstance(inputs, dict) else type(inputs).__name__
            raise ValueError(
                f"BertBackbone expects a dict with exactly the keys {list(INPUT_NAMES)}; "
                f"received {received}."
            )
        for name in INPUT_NAMES:
            check_sequence_length(inputs[name], self.max_sequence_length, name)
        check_matching_shapes(inputs, "inputs")
        check_token_ids(inputs, self.vocabulary_size, self.num_segments, "inputs")

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": serialized_dtype_policy(self),
            "vocabulary_size": self.vocabulary_size,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "max_sequence_length": self.max_sequence_length,
            "num_segments": self.num_segments,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "activation": self.activation,
            "layer_norm_epsilon": self.layer_norm_epsilon,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**with_dtype_policy(config))

    @classmethod
    def from_preset(cls, preset, **kwargs):
        """Builds a backbone from a preset name or a checkpoint directory.

        Args:
            preset: one of `bert_keras.models.presets.BACKBONE_PRESETS`
                (randomly initialised weights of that size) or a path to a
                checkpoint directory.
            **kwargs: constructor arguments overriding the preset's, e.g.
                `dtype="mixed_bfloat16"` or `dropout=0.0`.

        Example:
        >>> backbone = BertBackbone.from_preset("bert_tiny")
        >>> backbone.count_params()
        4385920
        """
        if isinstance(preset, os.PathLike) or (
            isinstance(preset, str) and (os.sep in preset or os.path.exists(preset))
        ):
            return load_backbone(cls, preset, **kwargs)
        config = backbone_preset_config(preset)
        config.update(kwargs)
        return cls(**config)

    def save_to_preset(self, directory, vocabulary_file=None, lowercase=True, overwrite=False):
        """Saves weights and config as a Hugging Face directory plus bert_keras.json.

        `transformers.BertModel.from_pretrained(directory)` loads the result
        and computes the same outputs; `BertBackbone.from_preset(directory)`
        restores this config from bert_keras.json, float32 and trainable
        (a run's precision policy and freezing are its own, as in every
        export: see `exported_backbone_config`). Files are written to
        a temporary sibling directory that is renamed into place, so an
        interrupted save leaves nothing half-written.

        Args:
            directory: output directory; must not exist or be empty unless
                `overwrite`.
            vocabulary_file: optional vocab.txt to copy alongside, with a
                tokenizer_config.json.
            lowercase: whether the vocabulary is uncased (tokenizer config).
                Words of more than 100 characters become [UNK], as
                transformers tokenizes the directory (a task model's
                `save_to_preset` records its own tokenizer's settings).
            overwrite: replace a non-empty `directory`.

        Example:
        >>> import tempfile
        >>> directory = tempfile.mkdtemp() + "/tiny"
        >>> BertBackbone.from_preset("bert_tiny").save_to_preset(directory)
        >>> BertBackbone.from_preset(directory).count_params()
        4385920
        """
        checkpoint = model_checkpoint(
            self,
            backbone_config=exported_backbone_config(self),
            vocabulary_file=None if vocabulary_file is None else os.fspath(vocabulary_file),
            tokenizer_settings=tokenizer_settings(
                lowercase=lowercase, max_input_chars_per_word=HUGGING_FACE_MAX_CHARS_PER_WORD
            ),
        )
        write_checkpoint(checkpoint, directory, overwrite=overwrite)


def _encode(embeddings, encoder_blocks, inputs, output_positions=None):
    """Embeddings then every block; the last block only at `output_positions`."""
    sequence = embeddings(inputs["token_ids"], inputs["segment_ids"])
    return run_encoder_blocks(encoder_blocks, sequence, inputs["padding_mask"], output_positions)


def build_encoder_blocks(num_layers, num_heads, intermediate_dim, dtype=None, **block_kwargs):
    """BERT's stack: `num_layers` post-LN `TransformerEncoder`s named `transformer_layer_<i>`.

    Example:
    >>> [block.name for block in build_encoder_blocks(2, num_heads=2, intermediate_dim=8)]
    ['transformer_layer_0', 'transformer_layer_1']
    """
    return [
        TransformerEncoder(
            num_heads,
            intermediate_dim,
            dtype=dtype,
            name=f"transformer_layer_{index}",
            **block_kwargs,
        )
        for index in range(num_layers)
    ]


def run_encoder_blocks(
    encoder_blocks, sequence, padding_mask, output_positions=None, training=None
):
    """Every block in turn; the last one computes only the rows at `output_positions`.

    Example:
    >>> import numpy as np
    >>> blocks = build_encoder_blocks(2, num_heads=2, intermediate_dim=8)
    >>> rows = run_encoder_blocks(blocks, np.ones((1, 5, 4), "float32"), np.ones((1, 5)),
    ...                           output_positions=np.array([[0, 3]]))
    >>> tuple(rows.shape)
    (1, 2, 4)
    """
    return encoder_block_outputs(
        encoder_blocks, sequence, padding_mask, output_positions, training
    )[-1]


def encoder_block_outputs(
    encoder_blocks, sequence, padding_mask, output_positions=None, training=None
):
    """Every block's output in turn, first to last; the last one only at `output_positions`.

    Example:
    >>> import numpy as np
    >>> blocks = build_encoder_blocks(3, num_heads=2, intermediate_dim=8)
    >>> outputs = encoder_block_outputs(blocks, np.ones((1, 5, 4), "float32"), np.ones((1, 5)))
    >>> [tuple(output.shape) for output in outputs]
    [(1, 5, 4), (1, 5, 4), (1, 5, 4)]
    """
    outputs = []
    for index, block in enumerate(encoder_blocks):
        is_last = index == len(encoder_blocks) - 1
        sequence = block(
            sequence,
            padding_mask=padding_mask,
            output_positions=output_positions if is_last else None,
            training=training,
        )
        outputs.append(sequence)  # [batch, seq or n, hidden_dim]
    return outputs


def with_dtype_policy(config):
    """A copy of a model config whose serialized "dtype" is a dtype policy again.

    Example:
    >>> with_dtype_policy({"dtype": {"module": "keras", "class_name": "DTypePolicy",
    ...                              "config": {"name": "float32"}}})["dtype"].name
    'float32'
    """
    config = dict(config)
    if isinstance(config.get("dtype"), dict):
        config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
    return config


def quantized_policy_map(model):
    """The policies of `model`'s quantized layers by layer path, or None where none is.

    Models rebuild their layers from constructor arguments in `from_config`,
    so a quantized model's config holds this map as its "dtype" (as
    keras-hub's backbones do): every layer is given the map and takes the
    policy of its own path when it is built, creating the quantized
    variables that the saved weights fill. Its default policy is the
    model's own, which every other layer keeps.

    Example:
    >>> backbone = BertBackbone(vocabulary_size=10, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> quantized_policy_map(backbone) is None
    True
    >>> backbone.quantize("int8")
    >>> policy_map = quantized_policy_map(backbone)
    >>> policy_map["pooler_dense"].name, policy_map["embeddings/token_embedding"].name
    ('int8_from_float32', 'int8_from_float32')
    >>> policy_map["embeddings/layer_norm"].name
    'float32'
    """
    default_policy = model.dtype_policy
    if isinstance(default_policy, keras.dtype_policies.DTypePolicyMap):
        default_policy = default_policy.default_policy
    policy_map = keras.dtype_policies.DTypePolicyMap(default_policy=default_policy)
    for layer in model._flatten_layers(include_self=False):
        if layer.quantization_mode is not None and layer.path not in policy_map:
            policy = layer.dtype_policy  # a loaded model's layers hold the map itself
            if isinstance(policy, keras.dtype_policies.DTypePolicyMap):
                policy = policy[layer.path]
            policy_map[layer.path] = policy
    return policy_map if len(policy_map) else None


def serialized_dtype_policy(model):
    """The "dtype" of `model`'s config: its policy, or `quantized_policy_map` once quantized.

    Example:
    >>> backbone = BertBackbone(vocabulary_size=10, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> serialized_dtype_policy(backbone)["config"]
    {'name': 'float32'}
    """
    policy_map = quantized_policy_map(model)
    return keras.dtype_policies.serialize(model.dtype_policy if policy_map is None else policy_map)


def _check_model_arguments(kwargs):
    """`keras.Model` would drop an argument it does not know, a mistyped override too."""
    unknown = sorted(set(kwargs) - {"name", "trainable"})
    if unknown:
        raise TypeError(
            f"BertBackbone got unexpected keyword arguments {unknown}; it takes the sizes, "
            "dropout, attention_dropout, activation, layer_norm_epsilon, dtype, name and trainable."
        )


def _check_architecture(hidden_dim, num_heads, activation):
    if hidden_dim % num_heads:
        raise ValueError(f"hidden_dim ({hidden_dim}) must be divisible by num_heads ({num_heads}).")
    get_activation(activation)
