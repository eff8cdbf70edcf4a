"""BERT backbone and task models."""

from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_classifier import BertClassifier
from bert_keras.models.bert_masked_lm import BertMaskedLM
from bert_keras.models.bert_multiple_choice import BertMultipleChoice
from bert_keras.models.bert_pretrainer import BertPretrainer
from bert_keras.models.bert_question_answerer import BertQuestionAnswerer
from bert_keras.models.bert_sentence_encoder import BertSentenceEncoder
from bert_keras.models.bert_token_classifier import BertTokenClassifier
from bert_keras.models.presets import BACKBONE_PRESETS
