"""BERT backbone and task models."""

from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_pretrainer import BertPretrainer
from bert_keras.models.presets import BACKBONE_PRESETS
