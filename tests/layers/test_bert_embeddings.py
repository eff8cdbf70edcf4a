import numpy as np
import pytest
from keras import ops

from bert_keras.layers.bert_embeddings import BertEmbeddings
from tests import reference
from tests.test_case import TestCase

INIT = {"vocabulary_size": 20, "hidden_dim": 8, "max_sequence_length": 10, "dropout": 0.1}
TOKEN_IDS = np.array([[1, 5, 7, 2, 0], [1, 9, 2, 3, 2]], "int32")
SEGMENT_IDS = np.array([[0, 0, 0, 0, 0], [0, 0, 0, 1, 1]], "int32")


class TestBertEmbeddings(TestCase):
    def test_shared_checks(self):
        self.run_layer_test(
            BertEmbeddings,
            INIT,
            {"token_ids": TOKEN_IDS, "segment_ids": SEGMENT_IDS},
            expected_output_shape=(2, 5, 8),
            expected_num_trainable_weights=5,
        )

    def test_sums_three_tables_then_layer_norm(self):
        layer = BertEmbeddings(**INIT, layer_norm_epsilon=1e-12)
        output = ops.convert_to_numpy(layer(TOKEN_IDS, SEGMENT_IDS))
        w = {v.path.split("/", 1)[1]: ops.convert_to_numpy(v) for v in layer.weights}
        summed = (
            w["token_embedding/embeddings"][TOKEN_IDS]
            + w["segment_embedding/embeddings"][SEGMENT_IDS]
            + w["position_embedding/embeddings"][None, :5]
        )
        expected = reference.layer_norm(summed, w["layer_norm/gamma"], w["layer_norm/beta"], 1e-12)
        np.testing.assert_allclose(output, expected, atol=1e-5)

    def test_dropout_only_in_training(self):
        layer = BertEmbeddings(**{**INIT, "dropout": 0.5})
        inference = ops.convert_to_numpy(layer(TOKEN_IDS, SEGMENT_IDS))
        np.testing.assert_array_equal(
            inference, ops.convert_to_numpy(layer(TOKEN_IDS, SEGMENT_IDS))
        )
        training = ops.convert_to_numpy(layer(TOKEN_IDS, SEGMENT_IDS, training=True))
        assert (training == 0).mean() > 0.2

    def test_without_segments_there_is_no_segment_table(self):
        layer = BertEmbeddings(**INIT, num_segments=0)
        output = ops.convert_to_numpy(layer(TOKEN_IDS))
        assert output.shape == (2, 5, 8)
        assert not any("segment" in variable.path for variable in layer.weights)
        assert BertEmbeddings.from_config(layer.get_config()).num_segments == 0
        w = {v.path.split("/", 1)[1]: ops.convert_to_numpy(v) for v in layer.weights}
        summed = (
            w["token_embedding/embeddings"][TOKEN_IDS]
            + w["position_embedding/embeddings"][None, :5]
        )
        expected = reference.layer_norm(summed, w["layer_norm/gamma"], w["layer_norm/beta"], 1e-12)
        np.testing.assert_allclose(output, expected, atol=1e-5)

    def test_segments_without_segment_ids_are_an_error_naming_them(self):
        with pytest.raises(
            ValueError, match=r"has 2 segments \(num_segments\) but got no segment_ids"
        ):
            BertEmbeddings(**INIT)(TOKEN_IDS)
