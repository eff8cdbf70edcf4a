"""Layers given inputs of the wrong rank, dtype or mask length say so, alike on every backend."""

import numpy as np
import pytest

from bert_keras.layers.masked_lm_head import MaskedLMHead
from bert_keras.layers.multi_head_self_attention import MultiHeadSelfAttention
from bert_keras.layers.position_embedding import PositionEmbedding
from bert_keras.layers.transformer_encoder import TransformerEncoder

SEQUENCE = np.zeros((2, 5, 8), "float32")

MISUSES = {
    "encoder inputs without a sequence axis": (
        lambda: TransformerEncoder(2, 16, name="encoder")(np.zeros((2, 8), "float32")),
        r"encoder takes inputs of the shape \[batch, sequence, hidden\]; got the shape \(2, 8\)\.",
    ),
    "encoder padding mask of another length": (
        lambda: TransformerEncoder(2, 16, name="encoder")(
            SEQUENCE, padding_mask=np.ones((2, 4), bool)
        ),
        r"encoder's padding_mask of the shape \(2, 4\) masks 4 positions, but its inputs have 5\.",
    ),
    "attention inputs without a sequence axis": (
        lambda: MultiHeadSelfAttention(2, name="attention")(np.zeros((2, 8), "float32")),
        r"attention takes inputs of the shape \[batch, sequence, hidden\]; got the shape \(2, 8\)",
    ),
    "attention mask of another length": (
        lambda: MultiHeadSelfAttention(2, name="attention")(
            SEQUENCE, attention_mask=np.ones((2, 1, 5, 4), bool)
        ),
        r"attention's attention_mask of the shape \(2, 1, 5, 4\) masks 4 positions, but its inputs",
    ),
    "attention mask for other queries": (
        lambda: MultiHeadSelfAttention(2, name="attention")(
            SEQUENCE, attention_mask=np.ones((2, 1, 3, 5), bool)
        ),
        r"attention's attention_mask of the shape \(2, 1, 3, 5\) is for 3 queries, but it is",
    ),
    "encoder attention mask for other queries": (
        lambda: TransformerEncoder(2, 16, name="encoder")(
            SEQUENCE, attention_mask=np.ones((2, 4, 5), bool)
        ),
        r"encoder's attention_mask of the shape \(2, 4, 5\) is for 4 queries, but it is asked for 5",
    ),
    "attention mask for other query positions": (
        lambda: MultiHeadSelfAttention(2, name="attention")(
            SEQUENCE,
            attention_mask=np.ones((2, 1, 5, 5), bool),
            query_positions=np.zeros((2, 2), "int32"),
        ),
        r"attention_mask of the shape \(2, 1, 5, 5\) is for 5 queries, but it is asked for 2\.",
    ),
    "attention mask of another rank": (
        lambda: MultiHeadSelfAttention(2, name="attention")(
            SEQUENCE, attention_mask=np.ones((2, 5), bool)
        ),
        r"attention takes attention_mask of the shape \[batch, 1, queries, sequence\]; got the",
    ),
    "encoder padding mask for another batch": (
        lambda: TransformerEncoder(2, 16, name="encoder")(
            SEQUENCE, padding_mask=np.ones((3, 5), bool)
        ),
        r"encoder's padding_mask of the shape \(3, 5\) is for a batch of 3, but its inputs hold 2",
    ),
    "encoder padding mask of another rank": (
        lambda: TransformerEncoder(2, 16, name="encoder")(
            SEQUENCE, padding_mask=np.ones((2, 5, 1), bool)
        ),
        r"encoder takes padding_mask of the shape \[batch, sequence\]; got the shape \(2, 5, 1\)",
    ),
    "encoder attention mask of a vector": (
        lambda: TransformerEncoder(2, 16, name="encoder")(
            SEQUENCE, attention_mask=np.ones(5, bool)
        ),
        r"encoder takes attention_mask of the shape \[batch, sequence, sequence\]; got the shape",
    ),
    "attention of no heads": (
        lambda: MultiHeadSelfAttention(0, name="attention"),
        r"attention's num_heads is 0 but must be a whole number, at least 1\.",
    ),
    "encoder of a negative number of heads": (
        lambda: TransformerEncoder(-2, 16, name="encoder"),
        r"encoder's num_heads is -2 but must be a whole number, at least 1\.",
    ),
    "encoder of a negative epsilon": (
        lambda: TransformerEncoder(2, 16, layer_norm_epsilon=-1.0, name="encoder"),
        r"encoder's layer_norm_epsilon is -1.0 but must be a positive number\.",
    ),
    "position embedding of a fractional length": (
        lambda: PositionEmbedding(2.5, name="positions"),
        r"positions's sequence_length is 2.5 but must be a whole number, at least 1\.",
    ),
    "masked-LM head of no tokens": (
        lambda: MaskedLMHead(0, name="head"),
        r"head's vocabulary_size is 0 but must be a whole number, at least 1\.",
    ),
    "attention on integers": (
        lambda: MultiHeadSelfAttention(2, name="attention")(np.zeros((2, 5, 8), "int32")),
        r"attention takes floating-point inputs; got int32",
    ),
    "position embedding of a vector": (
        lambda: PositionEmbedding(16, name="positions")(np.zeros((2,), "float32")),
        r"positions takes inputs of the shape \[batch, sequence, hidden\]; got the shape \(2,\)",
    ),
    "masked positions of a vector": (
        lambda: MaskedLMHead(10, name="head")(SEQUENCE, masked_positions=np.zeros((2,), "int32")),
        r"head takes masked_positions of the shape \[batch, predictions\]; got the shape \(2,\)",
    ),
}


@pytest.mark.parametrize("misuse", MISUSES)
def test_a_misused_layer_names_itself_the_argument_and_the_shape(misuse):
    call, message = MISUSES[misuse]
    with pytest.raises(ValueError, match=message):
        call()


def test_a_mask_that_broadcasts_over_the_keys_still_passes():
    attended = MultiHeadSelfAttention(2)(SEQUENCE, attention_mask=np.ones((2, 1, 5, 1), bool))
    assert tuple(attended.shape) == (2, 5, 8)
