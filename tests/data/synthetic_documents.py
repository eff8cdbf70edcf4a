"""Random token-id documents and special tokens for the pretraining-data tests."""

import numpy as np

from bert_keras.data.pretraining_instances import Documents
from bert_keras.data.pretraining_instances import SpecialTokens

VOCABULARY_SIZE = 1000
CLS, SEP, MASK = 2, 3, 4
CONTINUATION_FROM = 900  # ids >= 900 stand for "##" pieces


def special_tokens():
    """[CLS], [SEP], [MASK] and the "##" pieces of the synthetic vocabulary."""
    is_continuation = np.arange(VOCABULARY_SIZE) >= CONTINUATION_FROM
    return SpecialTokens(CLS, SEP, MASK, VOCABULARY_SIZE, is_continuation)


def random_documents(num_documents=200, seed=0):
    """Documents of 1 to 9 sentences of 1 to 29 random ids each."""
    rng = np.random.default_rng(seed)
    return Documents.from_lists(
        [
            [
                list(rng.integers(5, VOCABULARY_SIZE, rng.integers(1, 30)))
                for _ in range(rng.integers(1, 10))
            ]
            for _ in range(num_documents)
        ]
    )
