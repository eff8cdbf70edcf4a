"""Keras layers that BERT models are built from."""

from bert_keras.layers.activations import get_activation
from bert_keras.layers.bert_embeddings import BertEmbeddings
from bert_keras.layers.dense import Dense
from bert_keras.layers.dropout import Dropout
from bert_keras.layers.masked_lm_head import MaskedLMHead
from bert_keras.layers.multi_head_self_attention import MultiHeadSelfAttention
from bert_keras.layers.position_embedding import PositionEmbedding
from bert_keras.layers.transformer_encoder import TransformerEncoder
