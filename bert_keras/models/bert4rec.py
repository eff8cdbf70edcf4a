"""BERT4Rec (Sun et al. 2019): a bidirectional Transformer over item sequences."""

import keras
import numpy as np
from keras import ops

from bert_keras.data.cloze_instances import next_item_inputs
from bert_keras.data.interactions import PAD_ID
from bert_keras.layers.activations import get_activation
from bert_keras.layers.bert_embeddings import BertEmbeddings
from bert_keras.layers.masked_lm_head import MaskedLMHead
from bert_keras.models.bert_backbone import build_encoder_blocks
from bert_keras.models.bert_backbone import run_encoder_blocks
from bert_keras.models.bert_backbone import serialized_dtype_policy
from bert_keras.models.bert_backbone import with_dtype_policy
from bert_keras.models.input_checks import check_positive_count
from bert_keras.models.presets import bert4rec_preset_config
from bert_keras.models.sampled_softmax import log_uniform_candidates
from bert_keras.models.sampled_softmax import sampled_softmax_loss
from bert_keras.training.garbage_collection import QuantizeCollectingOnce
from bert_keras.training.optimizer_build import build_optimizer
from bert_keras.training.optimizer_build import compile_as_saved
from bert_keras.training.replica_build import BuildsFromOneReplica

INPUT_NAMES = ("item_ids", "masked_positions")
# Logit of [PAD] and [MASK], which are never an answer; finite so that a
# padded prediction's (zero-weighted) cross-entropy stays finite.
_NEVER_LOGIT = -1e9
_WEIGHT_EPSILON = 1e-5


@keras.saving.register_keras_serializable(package="bert_keras")
class Bert4Rec(QuantizeCollectingOnce, BuildsFromOneReplica, keras.Model):
    """Item embeddings + learned positions, post-LN encoder blocks, tied output.

    A Functional model with the layers of BERT (`BertEmbeddings` without
    segments, `TransformerEncoder`, `MaskedLMHead`), as the original BERT4Rec
    code builds it from BERT's modeling.py: the head is dense + GELU + layer
    norm, then logits against the item-embedding matrix plus a bias per id.
    Ids: 0 is [PAD], 1..`num_items` the items, `num_items + 1` is [MASK].

    Inputs: `item_ids` `[batch, seq]` (right-padded with 0) and
    `masked_positions` `[batch, n]`; output: float32 logits
    `[batch, n, num_items + 2]` over the ids, at the masked positions only
    (the last block computes only those rows). [PAD] and [MASK] get a logit
    of -1e9, so the softmax runs over the items.

    Compiled by default with `MaskedItemLoss`: labels are the masked items'
    ids `[batch, n]`, 0 where a row has fewer than `n` predictions. With
    `sampled_negatives`, training instead scores each target against that
    many negatives shared by the batch (`bert_keras.models.sampled_softmax`),
    so memory no longer grows with `num_items` x predictions; the model
    then returns, in training only, the head's vectors `[batch, n, hidden]`
    rather than logits. Inference always scores every item.

    Args:
        num_items: number of items.
        num_layers, num_heads, hidden_dim, intermediate_dim: encoder sizes.
        max_sequence_length: number of learned positions.
        dropout: dropout of embeddings and sublayer outputs.
        attention_dropout: dropout of attention probabilities; defaults to
            `dropout`.
        activation: "gelu_approximate" (the original's "gelu") or another
            name of `bert_keras.layers.activations`.
        layer_norm_epsilon: layer norm epsilon.
        sampled_negatives: None for the paper's full softmax, or the number
            of log-uniformly sampled negatives of a sampled softmax.
        dtype: dtype policy.
        **kwargs: standard `keras.Model` arguments.

    Example:
    >>> model = Bert4Rec(num_items=30, max_sequence_length=8, hidden_dim=16,
    ...                  intermediate_dim=32)
    >>> logits = model({"item_ids": np.array([[3, 4, 31, 0]]),
    ...                 "masked_positions": np.array([[2]])})
    >>> tuple(logits.shape)
    (1, 1, 32)
    """

    def __init__(
        self,
        num_items,
        num_layers=2,
        num_heads=2,
        hidden_dim=64,
        intermediate_dim=256,
        max_sequence_length=200,
        dropout=0.2,
        attention_dropout=None,
        activation="gelu_approximate",
        layer_norm_epsilon=1e-12,
        sampled_negatives=None,
        dtype=None,
        **kwargs,
    ):
        get_activation(activation)
        unknown = sorted(set(kwargs) - {"name", "trainable"})
        if unknown:  # which keras.Model would drop, a mistyped argument too
            raise TypeError(f"Bert4Rec got unexpected keyword arguments {unknown}.")
        check_positive_count("num_items", num_items)
        if sampled_negatives is not None and sampled_negatives < 1:
            raise ValueError(f"sampled_negatives must be positive, got {sampled_negatives}.")
        vocabulary_size = num_items + 2

        # === Layers ===
        embeddings = BertEmbeddings(
            vocabulary_size,
            hidden_dim,
            max_sequence_length=max_sequence_length,
            num_segments=0,
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
        output_head = MaskedLMHead(
            token_embedding=embeddings.token_embedding,
            activation=activation,
            layer_norm_epsilon=layer_norm_epsilon,
            dtype=dtype,
            name="output_head",
        )

        # === Functional graph ===
        inputs = {name: keras.Input((None,), dtype="int32", name=name) for name in INPUT_NAMES}
        sequence = _encode_masked(embeddings, encoder_blocks, inputs)  # [batch, n, hidden]
        never = np.zeros(vocabulary_size, "float32")
        never[[PAD_ID, vocabulary_size - 1]] = _NEVER_LOGIT
        logits = output_head(sequence) + never  # [batch, n, vocabulary]
        super().__init__(inputs=inputs, outputs=logits, **kwargs)
        if dtype is not None:
            self.dtype_policy = keras.dtype_policies.get(dtype)

        # === Config ===
        self.num_items = num_items
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.max_sequence_length = max_sequence_length
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.sampled_negatives = sampled_negatives
        self.embeddings = embeddings
        self.encoder_blocks = encoder_blocks
        self.output_head = output_head
        if sampled_negatives:
            self.negatives_seed = keras.random.SeedGenerator()

    def call(self, inputs, training=None, mask=None, **kwargs):
        if training and self.sampled_negatives:
            sequence = _encode_masked(self.embeddings, self.encoder_blocks, inputs, training)
            return self.output_head.transform(sequence)  # [batch, n, hidden]
        return super().call(inputs, training=training, mask=mask, **kwargs)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        if not (training and self.sampled_negatives):
            return super().compute_loss(x, y, y_pred, sample_weight, training)
        negatives = log_uniform_candidates(
            self.num_items, self.sampled_negatives, self.negatives_seed
        )
        loss = sampled_softmax_loss(
            y,
            y_pred,
            self.output_head.output_embeddings,
            self.output_head.output_bias,
            negatives,
            self.num_items,
        )
        return loss + ops.sum(self.losses) if self.losses else loss

    @property
    def mask_id(self):
        """The id of [MASK]: `num_items + 1`."""
        return self.num_items + 1

    def compile(self, optimizer="adam", loss=None, **kwargs):
        """Keras' compile, with `MaskedItemLoss` as the default loss."""
        super().compile(optimizer=optimizer, loss=loss or MaskedItemLoss(), **kwargs)

    def compile_from_config(self, config):
        """Compiles a model loaded from a `.keras` file as it was saved (`compile_as_saved`)."""
        compile_as_saved(self, config)

    def fit(self, *args, **kwargs):
        """Keras' fit, the optimizer built first so that TensorFlow traces the step once."""
        build_optimizer(self)
        return super().fit(*args, **kwargs)

    def recommend(self, histories, top_k=10, exclude_seen=True, batch_size=256):
        """The `top_k` items after each history, best first, with their scores.

        Appends [MASK] to each history (its last `max_sequence_length - 1`
        items) and ranks the items by their logit there.

        Args:
            histories: per user, item ids in time order (1..`num_items`).
            top_k: items to return per history.
            exclude_seen: leave out the items of the history.
            batch_size: histories per forward pass.

        Returns:
            `(item_ids, scores)`, int and float arrays `[users, top_k]`. Where
            fewer than `top_k` items are left to recommend, the rest of the
            row is id 0 ([PAD]) with score -inf.

        Raises:
            ValueError: an empty history, or an id outside 1..`num_items`
                (the history and the id are named).

        Example:
        >>> model = Bert4Rec(num_items=20, max_sequence_length=8, hidden_dim=16,
        ...                  intermediate_dim=32)
        >>> items, scores = model.recommend([[3, 4, 5]], top_k=4)
        >>> items.shape, bool(set(items[0]) & {3, 4, 5})
        ((1, 4), False)
        """
        self._check_items(histories)
        scores = self.next_item_scores(histories, batch_size)  # [users, num_items + 1]
        if exclude_seen:
            for row, history in enumerate(histories):
                scores[row, np.asarray(history, dtype="int64")] = -np.inf
        scores[:, PAD_ID] = -np.inf
        if top_k > scores.shape[1]:  # more than the catalogue: the rest of the row is [PAD]
            scores = np.pad(scores, [(0, 0), (0, top_k - scores.shape[1])], constant_values=-np.inf)
        top = np.argsort(-scores, axis=1, kind="stable")[:, :top_k]
        top_scores = np.take_along_axis(scores, top, axis=1)
        return np.where(np.isneginf(top_scores), PAD_ID, top), top_scores

    def next_item_scores(self, histories, batch_size=256):
        """Logits of the next item after each history, `[users, num_items + 1]`
        indexed by id (column 0, [PAD], is -1e9)."""
        inputs = next_item_inputs(histories, self.max_sequence_length, self.mask_id)
        logits = self.predict(inputs, batch_size=batch_size, verbose=0)  # [users, 1, vocabulary]
        return np.asarray(logits[:, 0, : self.mask_id], dtype="float64")

    def _check_items(self, histories):
        for row, history in enumerate(histories):
            history = np.asarray(history)
            outside = history[(history < 1) | (history > self.num_items)]
            if outside.size:
                raise ValueError(
                    f"History {row} holds the id {int(outside[0])}, outside the model's items "
                    f"1..{self.num_items}; map raw item ids with the run's item_ids.json first."
                )

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": serialized_dtype_policy(self),
            "num_items": self.num_items,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "max_sequence_length": self.max_sequence_length,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "activation": self.activation,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "sampled_negatives": self.sampled_negatives,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**with_dtype_policy(config))

    @classmethod
    def from_preset(cls, preset, num_items, **kwargs):
        """A model of a `BERT4REC_PRESETS` configuration, fresh weights.

        Example:
        >>> Bert4Rec.from_preset("bert4rec_ml1m", num_items=3416).max_sequence_length
        200
        """
        config = bert4rec_preset_config(preset)
        config.pop("mask_probability")
        config.update(kwargs)
        return cls(num_items=num_items, **config)


def _encode_masked(embeddings, encoder_blocks, inputs, training=None):
    """Embeddings and every block; the last block at the masked positions only."""
    padding_mask = ops.not_equal(inputs["item_ids"], PAD_ID)
    sequence = embeddings(inputs["item_ids"], training=training)
    return run_encoder_blocks(
        encoder_blocks, sequence, padding_mask, inputs["masked_positions"], training
    )


@keras.saving.register_keras_serializable(package="bert_keras")
class MaskedItemLoss(keras.losses.Loss):
    """Cross-entropy of the masked items, averaged over real predictions.

    Labels of 0 ([PAD]) mark padded predictions and count nothing; the mean
    is the original's `sum(w * ce) / (sum(w) + 1e-5)`.

    Example:
    >>> logits = np.log(np.array([[[0.1, 0.6, 0.3], [0.3, 0.3, 0.4]]], "float32"))
    >>> round(float(MaskedItemLoss()(np.array([[1, 0]]), logits)), 4)
    0.5108
    """

    def __init__(self, name="masked_item_loss", **kwargs):
        super().__init__(name=name, **kwargs)

    def call(self, y_true, y_pred):
        y_true = ops.cast(y_true, "int32")
        per_prediction = keras.losses.sparse_categorical_crossentropy(
            y_true, y_pred, from_logits=True
        )  # [batch, n]
        weights = ops.cast(ops.not_equal(y_true, PAD_ID), per_prediction.dtype)
        return ops.sum(per_prediction * weights) / (ops.sum(weights) + _WEIGHT_EPSILON)
