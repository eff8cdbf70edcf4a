"""bert_keras: BERT for Keras 3 on TensorFlow, JAX and PyTorch.

Example:
>>> import bert_keras
>>> backbone = bert_keras.BertBackbone.from_preset("bert_tiny")
>>> backbone.num_layers
2
"""

from bert_keras.models.bert_backbone import BertBackbone

__version__ = "0.1.0"
