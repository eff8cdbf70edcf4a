import keras
import numpy as np
import pytest
from keras import ops

from bert_keras.layers.masked_lm_head import MaskedLMHead
from tests import reference
from tests.test_case import TestCase

SEQUENCE = np.random.RandomState(2).normal(size=(2, 6, 8)).astype("float32")
POSITIONS = np.array([[1, 4, 0], [5, 2, 2]], "int32")


def _tied_head(dtype=None):
    embedding = keras.layers.Embedding(30, 8, dtype=dtype)
    embedding.build((None,))
    return MaskedLMHead(token_embedding=embedding, dtype=dtype), embedding


class TestMaskedLMHead(TestCase):
    def test_shared_checks_untied(self):
        self.run_layer_test(
            MaskedLMHead,
            {"vocabulary_size": 30},
            {"inputs": SEQUENCE, "masked_positions": POSITIONS},
            expected_output_shape=(2, 3, 30),
            expected_num_trainable_weights=6,
            expected_output_dtype="float32",
        )

    def test_tied_head_matches_the_reference(self):
        head, embedding = _tied_head()
        logits = ops.convert_to_numpy(head(SEQUENCE, POSITIONS))
        w = {v.path.split("/", 1)[1]: ops.convert_to_numpy(v) for v in head.weights}
        gathered = np.take_along_axis(SEQUENCE, POSITIONS[:, :, None], axis=1)
        hidden = reference.gelu_tanh(
            gathered @ w["transform_dense/kernel"] + w["transform_dense/bias"]
        )
        hidden = reference.layer_norm(
            hidden, w["transform_layer_norm/gamma"], w["transform_layer_norm/beta"], 1e-12
        )
        table = ops.convert_to_numpy(embedding.embeddings)
        np.testing.assert_allclose(logits, hidden @ table.T + w["output_bias"], atol=1e-5)

    def test_without_positions_it_predicts_from_every_vector_given(self):
        head, _ = _tied_head()
        gathered = np.take_along_axis(SEQUENCE, POSITIONS[:, :, None], axis=1)
        np.testing.assert_allclose(
            ops.convert_to_numpy(head(gathered)),
            ops.convert_to_numpy(head(SEQUENCE, POSITIONS)),
            atol=1e-6,
        )

    def test_tied_head_owns_no_output_kernel(self):
        head, embedding = _tied_head()
        head(SEQUENCE, POSITIONS)
        assert len(head.weights) == 5
        embedding.embeddings.assign(np.zeros((30, 8), "float32"))
        np.testing.assert_allclose(ops.convert_to_numpy(head(SEQUENCE, POSITIONS)), 0.0)

    @pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
    def test_logits_are_float32_under_mixed_precision(self, policy):
        head, _ = _tied_head(dtype=policy)
        logits = head(SEQUENCE, POSITIONS)
        assert keras.backend.standardize_dtype(logits.dtype) == "float32"
        assert head.output_bias.dtype == "float32"

    def test_vocabulary_size_must_match_the_tied_embedding(self):
        embedding = keras.layers.Embedding(30, 8)
        with pytest.raises(ValueError, match="vocabulary_size is 31 but the tied"):
            MaskedLMHead(vocabulary_size=31, token_embedding=embedding)
