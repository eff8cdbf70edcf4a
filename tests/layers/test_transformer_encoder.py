import numpy as np
import pytest
from keras import ops

from bert_keras.layers.transformer_encoder import TransformerEncoder
from tests import reference
from tests.test_case import TestCase

INPUTS = np.random.RandomState(1).normal(size=(2, 5, 8)).astype("float32")
PADDING = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], "int32")
INIT = {"num_heads": 2, "intermediate_dim": 16}


def _reference_block(layer, inputs, mask, activation):
    w = {v.path.split("/", 1)[1]: ops.convert_to_numpy(v) for v in layer.weights}
    eps = layer.layer_norm_epsilon

    def attention(x):
        return reference.self_attention(
            x,
            w["self_attention/query_key_value/kernel"],
            w["self_attention/query_key_value/bias"],
            w["self_attention/attention_output/kernel"],
            w["self_attention/attention_output/bias"],
            layer.num_heads,
            mask,
        )

    def feed_forward(x):
        hidden = activation(x @ w["intermediate_dense/kernel"] + w["intermediate_dense/bias"])
        return hidden @ w["output_dense/kernel"] + w["output_dense/bias"]

    def norm(x, name):
        return reference.layer_norm(x, w[f"{name}/gamma"], w[f"{name}/beta"], eps)

    if layer.normalize_first:
        x = inputs + attention(norm(inputs, "attention_layer_norm"))
        return x + feed_forward(norm(x, "output_layer_norm"))
    x = norm(inputs + attention(inputs), "attention_layer_norm")
    return norm(x + feed_forward(x), "output_layer_norm")


class TestTransformerEncoder(TestCase):
    def test_shared_checks(self):
        self.run_layer_test(
            TransformerEncoder,
            INIT,
            {"inputs": INPUTS, "padding_mask": PADDING},
            expected_output_shape=(2, 5, 8),
            expected_num_trainable_weights=12,
        )

    @pytest.mark.parametrize(
        "activation, reference_activation",
        [("gelu_approximate", reference.gelu_tanh), ("gelu", reference.gelu_exact)],
    )
    @pytest.mark.parametrize("normalize_first", [False, True])
    def test_matches_the_reference_block(self, activation, reference_activation, normalize_first):
        layer = TransformerEncoder(**INIT, activation=activation, normalize_first=normalize_first)
        actual = ops.convert_to_numpy(layer(INPUTS, padding_mask=PADDING))
        mask = reference.padding_to_attention_mask(PADDING)
        expected = _reference_block(layer, INPUTS, mask, reference_activation)
        np.testing.assert_allclose(actual, expected, atol=2e-5)

    def test_full_attention_mask_is_combined_with_padding(self):
        layer = TransformerEncoder(**INIT)
        causal = np.tril(np.ones((5, 5), "int32"))[None].repeat(2, 0)
        actual = ops.convert_to_numpy(layer(INPUTS, padding_mask=PADDING, attention_mask=causal))
        mask = causal * reference.padding_to_attention_mask(PADDING)
        expected = _reference_block(layer, INPUTS, mask, reference.gelu_tanh)
        np.testing.assert_allclose(actual, expected, atol=2e-5)

    @pytest.mark.parametrize("normalize_first", [False, True])
    @pytest.mark.parametrize("causal", [False, True])
    def test_output_positions_are_the_full_outputs_rows(self, normalize_first, causal):
        layer = TransformerEncoder(**INIT, normalize_first=normalize_first)
        attention_mask = np.tril(np.ones((2, 5, 5), "int32")) if causal else None
        positions = np.array([[4, 0, 2], [1, 1, 0]], "int32")
        full = ops.convert_to_numpy(
            layer(INPUTS, padding_mask=PADDING, attention_mask=attention_mask)
        )
        rows = layer(
            INPUTS, padding_mask=PADDING, attention_mask=attention_mask, output_positions=positions
        )
        expected = np.take_along_axis(full, positions[:, :, None], axis=1)
        np.testing.assert_allclose(ops.convert_to_numpy(rows), expected, atol=1e-5)

    def test_layer_norm_epsilon_defaults_to_bert(self):
        assert TransformerEncoder(**INIT).get_config()["layer_norm_epsilon"] == 1e-12

    def test_unknown_activation(self):
        with pytest.raises(ValueError, match="Unknown activation 'swishy'"):
            TransformerEncoder(**INIT, activation="swishy")
