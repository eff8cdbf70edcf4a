import numpy as np
import pytest
from keras import ops

from bert_keras.layers.position_embedding import PositionEmbedding
from tests.test_case import TestCase


class TestPositionEmbedding(TestCase):
    def test_shared_checks(self):
        self.run_layer_test(
            PositionEmbedding,
            {"sequence_length": 16},
            {"inputs": np.random.rand(2, 5, 8).astype("float32")},
            expected_output_shape=(2, 5, 8),
            expected_num_trainable_weights=1,
        )

    @pytest.mark.parametrize("length", [1, 7, 16])
    def test_returns_the_first_rows_of_the_table_for_any_length(self, length):
        layer = PositionEmbedding(sequence_length=16)
        output = ops.convert_to_numpy(layer(np.zeros((3, length, 4), "float32")))
        table = ops.convert_to_numpy(layer.position_embeddings)
        np.testing.assert_array_equal(output, np.broadcast_to(table[:length], (3, length, 4)))

    def test_too_long_input_names_both_lengths(self):
        layer = PositionEmbedding(sequence_length=8)
        with pytest.raises(ValueError, match=r"(?<!max_)sequence_length is 8 but inputs has 9"):
            layer(np.zeros((1, 9, 4), "float32"))
