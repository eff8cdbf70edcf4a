"""Token tagging (NER) on every position's output."""

import keras

from bert_keras.models.bert_task import BertTask
from bert_keras.models.bert_task import backbone_inputs
from bert_keras.models.bert_task import dropout_dense
from bert_keras.models.bert_task import float32_logits

IGNORED_LABEL = -100


@keras.saving.register_keras_serializable(package="bert_keras")
class BertTokenClassifier(BertTask):
    """Sequence output → dropout → dense per token (Devlin et al. §5.3, CoNLL NER).

    Outputs float32 logits `[batch, seq, num_classes]`. As in the paper, each
    word is labelled on its first word piece; the other pieces, [CLS], [SEP]
    and padding carry the label `IGNORED_LABEL` (-100), which the default loss
    and accuracy skip.

    Args:
        backbone: a `BertBackbone`.
        num_classes: number of tags.
        dropout: dropout before the output layer.
        preprocessor: optional `BertPreprocessor`; with one, `fit`, `evaluate`
            and `predict` take raw text. Give it a fixed `sequence_length`, so
            every batch of logits has the same length; labels index the packed
            tokens (`bert_keras.finetuning.tagging` aligns word labels).
        **kwargs: standard `keras.Model` arguments.

    Example:
    >>> import numpy as np
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> tagger = BertTokenClassifier(backbone, num_classes=9)
    >>> inputs = {"token_ids": np.ones((2, 5)), "segment_ids": np.zeros((2, 5)),
    ...           "padding_mask": np.ones((2, 5))}
    >>> tuple(tagger.predict(inputs, verbose=0).shape)
    (2, 5, 9)
    """

    checkpoint_head = "token_classifier"

    def __init__(self, backbone, num_classes, dropout=0.1, **kwargs):
        inputs = backbone_inputs()
        sequence_output = backbone(inputs)["sequence_output"]
        logits = float32_logits(
            dropout_dense(sequence_output, num_classes, backbone.dtype_policy, dropout, "logits")
        )  # [batch, seq, num_classes]
        super().__init__(backbone, inputs=inputs, outputs=logits, **kwargs)
        self.num_classes = num_classes
        self.dropout = dropout

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, ignore_class=IGNORED_LABEL
        )

    def get_config(self):
        return {**super().get_config(), "num_classes": self.num_classes, "dropout": self.dropout}
