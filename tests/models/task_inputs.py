"""A tiny backbone and inputs shared by the task-model tests."""

import numpy as np

from bert_keras.models.bert_backbone import BertBackbone

TINY = {
    "vocabulary_size": 40,
    "num_layers": 1,
    "num_heads": 2,
    "hidden_dim": 8,
    "intermediate_dim": 16,
    "max_sequence_length": 16,
}
RNG = np.random.default_rng(0)
INPUTS = {
    "token_ids": RNG.integers(5, 40, (4, 7)).astype("int32"),
    "segment_ids": np.repeat([[0, 0, 0, 0, 1, 1, 1]], 4, 0).astype("int32"),
    "padding_mask": np.array([[1] * 7, [1] * 7, [1] * 5 + [0] * 2, [1] * 6 + [0]], "int32"),
}


def tiny_backbone(dtype=None, **overrides):
    return BertBackbone(**{**TINY, **overrides}, dtype=dtype)
