"""Sentence and sentence-pair classification or regression on [CLS]."""

import keras

from bert_keras.models.bert_task import BertTask
from bert_keras.models.bert_task import backbone_inputs
from bert_keras.models.bert_task import dropout_dense
from bert_keras.models.bert_task import float32_logits
from bert_keras.models.input_checks import check_one_text_per_example
from bert_keras.models.input_checks import check_positive_count


@keras.saving.register_keras_serializable(package="bert_keras")
class BertClassifier(BertTask):
    """Pooled [CLS] output → dropout → dense (Devlin et al. §4.1, GLUE).

    Outputs float32 logits `[batch, num_classes]`; with `num_classes=1` the
    single output is a regression score (STS-B) and the default loss is mean
    squared error.

    Args:
        backbone: a `BertBackbone`.
        num_classes: number of labels, or 1 for regression.
        dropout: dropout before the output layer.
        preprocessor: optional `BertPreprocessor`; with one, `fit`, `evaluate`
            and `predict` take raw text (see `BertTask`).
        **kwargs: standard `keras.Model` arguments.

    Example:
    >>> import numpy as np
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> classifier = BertClassifier(backbone, num_classes=3)
    >>> classifier.compile()
    >>> inputs = {"token_ids": np.ones((2, 5)), "segment_ids": np.zeros((2, 5)),
    ...           "padding_mask": np.ones((2, 5))}
    >>> tuple(classifier.predict(inputs, verbose=0).shape)
    (2, 3)
    """

    checkpoint_head = "classifier"
    one_label_per_example = True
    default_learning_rate = 2e-5

    def __init__(self, backbone, num_classes, dropout=0.1, **kwargs):
        check_positive_count("num_classes", num_classes)
        inputs = backbone_inputs()
        pooled_output = backbone.pooled_output(inputs)  # the last block on [CLS] only
        logits = float32_logits(
            dropout_dense(pooled_output, num_classes, backbone.dtype_policy, dropout, "logits")
        )
        super().__init__(backbone, inputs=inputs, outputs=logits, **kwargs)
        self.num_classes = num_classes
        self.label_classes = num_classes if num_classes > 1 else None  # 1: a regression
        self.dropout = dropout

    def _check_array_inputs(self, x, y=None, sample_weight=None, batch_size=None, source=""):
        """`BertTask`'s checks, and that texts come one per example (pairs as a tuple)."""
        super()._check_array_inputs(x, y, sample_weight, batch_size, source)
        check_one_text_per_example(x, f"{source}x")

    def default_loss(self):
        if self.num_classes == 1:
            return keras.losses.MeanSquaredError()
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        if self.num_classes == 1:
            return [keras.metrics.MeanSquaredError(name="mse")]
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def get_config(self):
        return {**super().get_config(), "num_classes": self.num_classes, "dropout": self.dropout}
