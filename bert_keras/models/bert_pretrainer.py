"""BERT's pretraining model: masked LM and next-sentence prediction together."""

import keras
from keras import ops

from bert_keras.layers.dense import Dense
from bert_keras.layers.initializers import bert_kernel_initializer
from bert_keras.layers.masked_lm_head import MaskedLMHead
from bert_keras.models.bert_backbone import INPUT_NAMES
from bert_keras.models.bert_task import BertTask
from bert_keras.models.bert_task import backbone_inputs
from bert_keras.models.bert_task import float32_logits
from bert_keras.models.input_checks import check_class_ids
from bert_keras.training.replica_losses import mean_over_replicas
from bert_keras.training.replica_losses import reported_as_global
from bert_keras.training.replica_losses import share_of_replicas

# The original's normaliser: sum(weights * loss) / (sum(weights) + 1e-5).
_WEIGHT_EPSILON = 1e-5


# `Checkpoint.head_weights` name -> the layer of `BertPretrainer` that takes it.
PRETRAINING_HEADS = {"masked_lm": "masked_lm_head", "next_sentence": "next_sentence_head"}


@keras.saving.register_keras_serializable(package="bert_keras")
class BertPretrainer(BertTask):
    """Backbone + tied masked-LM head + next-sentence head (Devlin et al. §3.1).

    A Functional model. Inputs: the backbone's `token_ids`, `segment_ids`,
    `padding_mask` plus `masked_positions` `[batch, num_predictions]`.
    Outputs (float32 under any dtype policy): `masked_lm_logits`
    `[batch, num_predictions, vocabulary_size]` and `next_sentence_logits`
    `[batch, 2]` (class 0 = B follows A, as in the original records).
    The heads read the encoder at [CLS] and the masked positions only, so the
    last encoder block computes just those rows
    (`BertBackbone.sequence_output_at`); the logits are those of the whole
    backbone's outputs.

    Trained with `model.fit` on `(features, labels)` where `labels` is a dict
    with `masked_lm_ids` `[batch, num_predictions]`, `masked_lm_weights`
    (1.0 for real predictions, 0.0 for padding) and `next_sentence_labels`
    `[batch]` or `[batch, 1]`. The loss is the original's: the masked-LM
    cross-entropy averaged over real predictions
    (`sum(w * ce) / (sum(w) + 1e-5)`) plus the mean next-sentence
    cross-entropy. Metrics: `masked_lm_loss`, `masked_lm_accuracy` (over real
    predictions), `next_sentence_loss` and `next_sentence_accuracy`.

    Args:
        backbone: a `bert_keras.models.BertBackbone`.
        **kwargs: standard `keras.Model` arguments (`name`, `trainable`).

    Example:
    >>> import numpy as np
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=60, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> pretrainer = BertPretrainer(backbone)
    >>> pretrainer.compile(optimizer="adam")
    >>> features = {"token_ids": np.full((2, 6), 5), "segment_ids": np.zeros((2, 6)),
    ...             "padding_mask": np.ones((2, 6)), "masked_positions": np.array([[1, 2]] * 2)}
    >>> labels = {"masked_lm_ids": np.array([[7, 9]] * 2), "masked_lm_weights": np.ones((2, 2)),
    ...           "next_sentence_labels": np.array([0, 1])}
    >>> history = pretrainer.fit(features, labels, verbose=0)
    >>> sorted(history.history)
    ['loss', 'masked_lm_accuracy', 'masked_lm_loss', 'next_sentence_accuracy', 'next_sentence_loss']
    """

    default_learning_rate = 1e-4

    @classmethod
    def checkpoint_heads(cls):
        """Both pretraining heads: `from_preset` loads a `BertForPreTraining`'s whole."""
        return dict(PRETRAINING_HEADS)

    def __init__(self, backbone, **kwargs):
        dtype = backbone.dtype_policy
        # === Layers ===
        masked_lm_head = MaskedLMHead(
            token_embedding=backbone.token_embedding,
            activation=backbone.activation,
            layer_norm_epsilon=backbone.layer_norm_epsilon,
            dtype=dtype,
            name="masked_lm_head",
        )
        next_sentence_head = Dense(
            2,
            kernel_initializer=bert_kernel_initializer(),
            dtype=dtype,
            name="next_sentence_head",
        )

        # === Functional graph ===
        inputs = backbone_inputs("masked_positions")
        masked_positions = inputs["masked_positions"]
        # The heads read [CLS] and the masked positions only, so the last
        # encoder block computes just those rows.
        read_positions = ops.concatenate(
            [ops.zeros_like(masked_positions[:, :1]), masked_positions], axis=1
        )  # [batch, 1 + num_predictions]
        read_outputs = backbone.sequence_output_at(
            {name: inputs[name] for name in INPUT_NAMES}, read_positions
        )  # [batch, 1 + num_predictions, hidden]
        masked_lm_logits = masked_lm_head(
            read_outputs[:, 1:, :]
        )  # [batch, num_predictions, vocabulary_size]
        pooled_output = backbone.pooler_dense(read_outputs[:, 0, :])  # [batch, hidden]
        next_sentence_logits = float32_logits(
            next_sentence_head(pooled_output), name="next_sentence_logits"
        )  # [batch, 2]
        super().__init__(
            backbone,
            inputs=inputs,
            outputs={
                "masked_lm_logits": masked_lm_logits,
                "next_sentence_logits": next_sentence_logits,
            },
            **kwargs,
        )

        # === Config ===
        self.masked_lm_head = masked_lm_head
        self.next_sentence_head = next_sentence_head
        self.masked_lm_loss_tracker = keras.metrics.Mean(name="masked_lm_loss")
        self.masked_lm_accuracy = keras.metrics.SparseCategoricalAccuracy(name="masked_lm_accuracy")
        self.next_sentence_loss_tracker = keras.metrics.Mean(name="next_sentence_loss")
        self.next_sentence_accuracy = keras.metrics.SparseCategoricalAccuracy(
            name="next_sentence_accuracy"
        )

    computes_its_own_loss = True

    def _check_array_inputs(self, x, y=None, sample_weight=None, batch_size=None, source=""):
        """`BertTask`'s checks, and the labels' class ids (jax would train on a wrong loss)."""
        super()._check_array_inputs(x, y, sample_weight, batch_size, source)
        if not isinstance(y, dict):
            return
        classes = {"masked_lm_ids": self.backbone.vocabulary_size, "next_sentence_labels": 2}
        for name, num_classes in classes.items():
            if name in y:
                check_class_ids(y[name], num_classes, f"{source}y[{name!r}]")

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        masked_lm_loss, next_sentence_loss = self._pretraining_losses(y, y_pred)
        # Tracked here, where they are computed: compute_metrics would compute
        # them again, which eager torch pays for (XLA would merge the two).
        self.masked_lm_loss_tracker.update_state(masked_lm_loss)
        self.next_sentence_loss_tracker.update_state(next_sentence_loss)
        total = masked_lm_loss + next_sentence_loss
        if self.losses:
            total = total + ops.sum(self.losses)
        return reported_as_global(share_of_replicas(total))

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        self.masked_lm_accuracy.update_state(
            y["masked_lm_ids"], y_pred["masked_lm_logits"], sample_weight=y["masked_lm_weights"]
        )
        self.next_sentence_accuracy.update_state(
            _next_sentence_labels(y), y_pred["next_sentence_logits"]
        )
        return self.get_metrics_result()

    def _pretraining_losses(self, y, y_pred):
        _check_labels(y)
        per_prediction = keras.losses.sparse_categorical_crossentropy(
            y["masked_lm_ids"], y_pred["masked_lm_logits"], from_logits=True
        )  # [batch, num_predictions]
        weights = ops.cast(y["masked_lm_weights"], "float32")
        # The replicas' losses average to the whole batch's.
        predictions = mean_over_replicas(ops.sum(weights), loss=per_prediction)
        masked_lm_loss = ops.sum(per_prediction * weights) / (predictions + _WEIGHT_EPSILON)
        per_example = keras.losses.sparse_categorical_crossentropy(
            _next_sentence_labels(y), y_pred["next_sentence_logits"], from_logits=True
        )
        examples = mean_over_replicas(ops.cast(ops.shape(per_example)[0], "float32"), per_example)
        next_sentence_loss = ops.sum(per_example) / examples
        return masked_lm_loss, next_sentence_loss

    @property
    def metrics(self):
        return [
            self._loss_tracker,
            self.masked_lm_loss_tracker,
            self.masked_lm_accuracy,
            self.next_sentence_loss_tracker,
            self.next_sentence_accuracy,
        ]


LABEL_NAMES = ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")


def _check_labels(y):
    if not isinstance(y, dict) or not set(LABEL_NAMES) <= set(y):
        received = sorted(y) if isinstance(y, dict) else type(y).__name__
        raise ValueError(
            f"BertPretrainer expects labels as a dict with keys {list(LABEL_NAMES)}; "
            f"received {received}."
        )


def _next_sentence_labels(y):
    return ops.reshape(y["next_sentence_labels"], (-1,))
