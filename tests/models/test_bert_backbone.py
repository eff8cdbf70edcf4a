import keras
import keras_hub
import numpy as np
import pytest
from keras import ops

from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.presets import BACKBONE_PRESETS
from tests.test_case import TINY_BACKBONE
from tests.test_case import TestCase
from tests.test_case import tiny_backbone

INPUTS = {
    "token_ids": np.array([[1, 5, 7, 2, 9, 2, 0, 0], [1, 9, 2, 3, 4, 5, 6, 2]], "int32"),
    "segment_ids": np.array([[0, 0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 1, 1, 1, 1, 1]], "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1, 1, 0, 0], [1] * 8], "int32"),
}


def _numpy(outputs):
    return {name: ops.convert_to_numpy(value) for name, value in outputs.items()}


class TestBertBackbone(TestCase):
    def test_shared_checks(self):
        self.run_model_test(
            BertBackbone,
            TINY_BACKBONE,
            INPUTS,
            expected_output_shapes={"sequence_output": (2, 8, 8), "pooled_output": (2, 8)},
        )

    @pytest.mark.parametrize(
        "preset, expected",
        [
            ("bert_tiny", 4_385_920),
            ("bert_mini", 11_170_560),
            ("bert_small", 28_763_648),
            ("bert_medium", 41_373_184),
            ("bert_base", 109_482_240),
            ("bert_large", 335_141_888),
        ],
    )
    def test_preset_parameter_counts_equal_the_reference(self, preset, expected):
        config = BACKBONE_PRESETS[preset]
        backbone = BertBackbone(**{**config, "num_layers": 1})
        # Count one block and extrapolate: building bert_large on 2 cores is slow.
        embeddings_and_pooler = backbone.count_params() - _block_params(backbone)
        total = embeddings_and_pooler + config["num_layers"] * _block_params(backbone)
        assert total == expected

    def test_bert_tiny_preset_builds_with_the_reference_count(self):
        assert BertBackbone.from_preset("bert_tiny").count_params() == 4_385_920

    def test_from_preset_accepts_overrides(self):
        backbone = BertBackbone.from_preset("bert_tiny", dropout=0.0, dtype="mixed_bfloat16")
        assert backbone.dropout == 0.0
        assert backbone.dtype_policy.name == "mixed_bfloat16"

    def test_matches_keras_hub_with_the_same_weights(self):
        ours = tiny_backbone(activation="gelu_approximate")
        theirs = keras_hub.models.BertBackbone(**TINY_BACKBONE)
        _copy_weights_to_keras_hub(ours, theirs)
        expected = _numpy(theirs(INPUTS))
        actual = _numpy(ours(INPUTS))
        for name in ("sequence_output", "pooled_output"):
            np.testing.assert_allclose(actual[name], expected[name], atol=1e-5)

    def test_any_sequence_length_up_to_the_maximum(self):
        backbone = tiny_backbone()
        for length in (1, 5, 16):
            inputs = {name: value[:, :1].repeat(length, 1) for name, value in INPUTS.items()}
            assert backbone(inputs)["sequence_output"].shape == (2, length, 8)

    def test_padding_does_not_change_real_positions(self):
        backbone = tiny_backbone()
        short = {name: value[:1, :6] for name, value in INPUTS.items()}
        padded = {name: value[:1] for name, value in INPUTS.items()}
        padded["token_ids"] = padded["token_ids"].copy()
        padded["token_ids"][0, 6:] = 33
        short_out, padded_out = _numpy(backbone(short)), _numpy(backbone(padded))
        np.testing.assert_allclose(
            short_out["sequence_output"], padded_out["sequence_output"][:, :6], atol=1e-5
        )
        np.testing.assert_allclose(
            short_out["pooled_output"], padded_out["pooled_output"], atol=1e-5
        )

    def test_dropout_is_off_at_inference_and_on_in_training(self):
        backbone = tiny_backbone(dropout=0.3)
        first, second = _numpy(backbone(INPUTS)), _numpy(backbone(INPUTS))
        np.testing.assert_array_equal(first["sequence_output"], second["sequence_output"])
        training = _numpy(backbone(INPUTS, training=True))
        assert not np.allclose(training["sequence_output"], first["sequence_output"])

    def test_too_long_input_names_both_lengths(self):
        backbone = tiny_backbone()
        long_inputs = {name: np.zeros((1, 17), "int32") for name in INPUTS}
        with pytest.raises(ValueError, match="max_sequence_length is 16 but token_ids has 17"):
            backbone(long_inputs)

    @pytest.mark.parametrize("method", ["predict", "evaluate", "fit"])
    def test_too_long_arrays_are_refused_before_keras_loop_which_keeps_the_weights(self, method):
        """On jax an error raised while Keras' loop traces leaves the variables without values."""
        backbone = tiny_backbone()
        backbone.compile(loss="mse")
        long_inputs = {name: np.zeros((1, 17), "int32") for name in INPUTS}
        targets = {"sequence_output": np.zeros((1, 17, 8)), "pooled_output": np.zeros((1, 8))}
        arguments = (long_inputs,) if method == "predict" else (long_inputs, targets)
        with pytest.raises(
            ValueError, match=r"max_sequence_length is 16 but x\['token_ids'\] has 17"
        ):
            getattr(backbone, method)(*arguments, verbose=0)
        expected = _numpy(backbone(INPUTS))["pooled_output"]
        np.testing.assert_allclose(
            backbone.predict(INPUTS, verbose=0)["pooled_output"], expected, atol=1e-5
        )

    @pytest.mark.parametrize(
        "name, value, message",
        [
            (
                "token_ids",
                40,
                r"x\['token_ids'\] holds the id 40 \(at index \(1, 3\)\); ids run from 0 to 39",
            ),
            ("token_ids", -1, r"x\['token_ids'\] holds the id -1 "),
            ("segment_ids", 2, r"x\['segment_ids'\] holds the id 2 .*\(num_segments 2\)"),
        ],
    )
    def test_ids_off_the_embedding_tables_are_errors_in_keras_loops(self, name, value, message):
        """Traced, the ids cannot be read: jax gathers NaN for them, the others fail unclearly."""
        backbone = tiny_backbone()
        backbone.compile(loss="mse")
        inputs = {key: array.copy() for key, array in INPUTS.items()}
        inputs[name][1, 3] = value
        targets = {"sequence_output": np.zeros((2, 8, 8)), "pooled_output": np.zeros((2, 8))}
        with pytest.raises(ValueError, match=message):
            backbone.predict(inputs, verbose=0)
        with pytest.raises(ValueError, match=message):
            backbone.evaluate(inputs, targets, verbose=0)
        with pytest.raises(ValueError, match=message):
            backbone.fit(inputs, targets, verbose=0)
        with pytest.raises(ValueError, match=rf"validation_data\[0\]{message[1:]}"):
            backbone.fit(INPUTS, targets, validation_data=(inputs, targets), verbose=0)

    @pytest.mark.parametrize("keys", [["token_ids", "segment_ids"], [*INPUTS, "labels"]])
    def test_missing_or_extra_keys_list_the_expected_ones(self, keys):
        backbone = tiny_backbone()
        inputs = {key: INPUTS["token_ids"] for key in keys}
        with pytest.raises(ValueError, match="token_ids', 'segment_ids', 'padding_mask'"):
            backbone(inputs)

    def test_quantize_int8_quantizes_every_dense_and_embedding_and_round_trips(self, tmp_path):
        backbone = tiny_backbone()
        expected = _numpy(backbone(INPUTS))
        backbone.quantize("int8")
        assert _quantized_paths(backbone) == QUANTIZED_BACKBONE_PATHS
        outputs = _numpy(backbone(INPUTS))
        for name, value in outputs.items():
            # Layer-normed outputs of about 1, 8 wide: int8 is off by about 0.01.
            assert np.abs(value - expected[name]).max() < 0.1, name
        # The last block computing only [CLS] reads the quantized kernels too.
        np.testing.assert_allclose(
            ops.convert_to_numpy(backbone.pooled_output(INPUTS)),
            outputs["pooled_output"],
            atol=1e-5,
        )
        restored = self.run_saving_test(backbone, INPUTS)
        assert _quantized_paths(restored) == QUANTIZED_BACKBONE_PATHS
        revived = BertBackbone.from_config(backbone.get_config())
        assert _quantized_paths(revived) == QUANTIZED_BACKBONE_PATHS
        assert revived.get_config() == backbone.get_config()
        with pytest.raises(ValueError, match="is quantized .* a checkpoint holds float weights"):
            backbone.save_to_preset(tmp_path / "preset")

    @pytest.mark.parametrize("mode", ["int8", "int4"])
    def test_a_quantized_mixed_precision_backbone_computes_in_its_policy(self, mode):
        # On TensorFlow the quantized embeddings give float32, which bfloat16 cannot add.
        backbone = tiny_backbone(dtype="mixed_bfloat16")
        expected = _numpy(backbone(INPUTS))
        backbone.quantize(mode)
        outputs = backbone(INPUTS)
        assert keras.backend.standardize_dtype(outputs["sequence_output"].dtype) == "bfloat16"
        # bfloat16 keeps 8 bits of mantissa, and int4 fewer still.
        assert np.abs(_numpy(outputs)["sequence_output"] - expected["sequence_output"]).max() < 0.5

    def test_a_float_backbone_config_names_its_policy_alone(self):
        assert tiny_backbone().get_config()["dtype"]["config"] == {"name": "float32"}

    def test_hidden_dim_not_divisible_by_heads(self):
        with pytest.raises(
            ValueError, match=r"hidden_dim \(8\) must be divisible by num_heads \(3\)"
        ):
            tiny_backbone(num_heads=3)

    @pytest.mark.parametrize(
        "override, message",
        [
            ({"num_heads": 0}, "num_heads is 0 but must be a whole number, at least 1"),
            ({"num_heads": -2}, "num_heads is -2 but must be a whole number, at least 1"),
            ({"num_layers": 0}, "num_layers is 0 but must be a whole number, at least 1"),
            ({"max_sequence_length": 2.5}, "max_sequence_length is 2.5 but must be a whole"),
            ({"dropout": 1.0}, r"dropout is 1.0 but must be a number in \[0, 1\)"),
            ({"layer_norm_epsilon": -1.0}, "layer_norm_epsilon is -1.0 but must be a positive"),
        ],
    )
    def test_a_size_or_rate_out_of_its_range_is_named(self, override, message):
        with pytest.raises(ValueError, match=message):
            tiny_backbone(**override)

    def test_a_mask_or_segment_ids_of_another_shape_than_the_token_ids_is_named(self):
        backbone = tiny_backbone()
        ids = np.array([[2, 5, 7, 3, 0], [2, 9, 3, 0, 0]], "int32")
        inputs = {"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": (ids > 0) * 1}
        one_mask = {**inputs, "padding_mask": inputs["padding_mask"][:1]}
        message = r"\['padding_mask'\] has shape \(1, 5\) but .*\['token_ids'\] \(2, 5\)"
        with pytest.raises(ValueError, match="inputs" + message):
            backbone(one_mask)
        with pytest.raises(ValueError, match="x" + message):
            backbone.predict(one_mask, verbose=0)
        with pytest.raises(ValueError, match=r"inputs\['segment_ids'\] has shape \(2, 4\)"):
            backbone({**inputs, "segment_ids": np.zeros((2, 4), "int32")})

    def test_a_mistyped_override_is_refused_not_dropped(self):
        with pytest.raises(TypeError, match=r"unexpected keyword arguments \['dropuot'\]"):
            BertBackbone.from_preset("bert_tiny", dropuot=0.0)
        assert BertBackbone.from_preset("bert_tiny", name="tiny", dropout=0.0).dropout == 0.0

    def test_unknown_activation(self):
        with pytest.raises(ValueError, match="Unknown activation 'gelu_fast'"):
            tiny_backbone(activation="gelu_fast")

    def test_unknown_preset_lists_the_known_ones(self):
        with pytest.raises(ValueError, match="Unknown preset 'bert_huge'") as error:
            BertBackbone.from_preset("bert_huge")
        for name in BACKBONE_PRESETS:
            assert name in str(error.value)


# Every Dense and Embedding of `TINY_BACKBONE`, by path, with its quantized policy.
QUANTIZED_BACKBONE_PATHS = {
    "embeddings/token_embedding": "int8_from_float32",
    "embeddings/segment_embedding": "int8_from_float32",
    "pooler_dense": "int8_from_float32",
    **{
        f"transformer_layer_{index}/{name}": "int8_from_float32"
        for index in range(2)
        for name in (
            "self_attention/query_key_value",
            "self_attention/attention_output",
            "intermediate_dense",
            "output_dense",
        )
    },
}


def _quantized_paths(model):
    """Path -> dtype policy name of each Dense and Embedding of `model`."""
    paths = {}
    for layer in model._flatten_layers():
        if isinstance(layer, (keras.layers.Dense, keras.layers.Embedding)):
            policy = layer.dtype_policy
            if isinstance(policy, keras.dtype_policies.DTypePolicyMap):
                policy = policy[layer.path]
            paths[layer.path] = policy.name
    return paths


def _block_params(backbone):
    return backbone.get_layer("transformer_layer_0").count_params()


def _copy_weights_to_keras_hub(ours, theirs):
    heads, head_dim = ours.num_heads, ours.hidden_dim // ours.num_heads
    w = {v.path: ops.convert_to_numpy(v) for v in ours.weights}
    target = {
        "token_embedding/embeddings": w["embeddings/token_embedding/embeddings"],
        "position_embedding/embeddings": w["embeddings/position_embedding/embeddings"],
        "segment_embedding/embeddings": w["embeddings/segment_embedding/embeddings"],
        "embeddings_layer_norm/gamma": w["embeddings/layer_norm/gamma"],
        "embeddings_layer_norm/beta": w["embeddings/layer_norm/beta"],
        "pooled_dense/kernel": w["pooler_dense/kernel"],
        "pooled_dense/bias": w["pooler_dense/bias"],
    }
    for i in range(ours.num_layers):
        ours_prefix, theirs_prefix = f"transformer_layer_{i}/", f"transformer_layer_{i}/"
        kernels = np.split(w[ours_prefix + "self_attention/query_key_value/kernel"], 3, axis=-1)
        biases = np.split(w[ours_prefix + "self_attention/query_key_value/bias"], 3, axis=-1)
        for name, kernel, bias in zip(("query", "key", "value"), kernels, biases):
            target[f"{theirs_prefix}self_attention_layer/{name}/kernel"] = kernel.reshape(
                -1, heads, head_dim
            )
            target[f"{theirs_prefix}self_attention_layer/{name}/bias"] = bias.reshape(
                heads, head_dim
            )
        renames = {
            "self_attention/attention_output": "self_attention_layer/attention_output",
            "attention_layer_norm": "self_attention_layer_norm",
            "intermediate_dense": "feedforward_intermediate_dense",
            "output_dense": "feedforward_output_dense",
            "output_layer_norm": "feedforward_layer_norm",
        }
        for our_name, their_name in renames.items():
            for leaf in ("kernel", "bias", "gamma", "beta"):
                if ours_prefix + f"{our_name}/{leaf}" in w:
                    target[theirs_prefix + f"{their_name}/{leaf}"] = w[
                        ours_prefix + f"{our_name}/{leaf}"
                    ]
        target[theirs_prefix + "self_attention_layer/attention_output/kernel"] = target[
            theirs_prefix + "self_attention_layer/attention_output/kernel"
        ].reshape(heads, head_dim, -1)
    assert set(target) == {v.path for v in theirs.weights}
    for variable in theirs.weights:
        variable.assign(target[variable.path])


def test_a_preset_is_saved_float32_and_trainable_whatever_the_run(tmp_path):
    backbone = tiny_backbone(dtype="mixed_bfloat16")
    backbone.trainable = False  # a run's feature extraction, not the checkpoint's
    backbone.save_to_preset(tmp_path / "preset")
    restored = BertBackbone.from_preset(tmp_path / "preset")
    assert restored.trainable and restored.dtype_policy.name == "float32"
    for saved, loaded in zip(backbone.weights, restored.weights):
        np.testing.assert_array_equal(ops.convert_to_numpy(loaded), ops.convert_to_numpy(saved))


def test_a_vocabulary_longer_than_the_embeddings_is_refused_before_writing(tmp_path):
    vocabulary = tmp_path / "vocab.txt"
    vocabulary.write_text("".join(f"token{index}\n" for index in range(41)))
    with pytest.raises(ValueError, match="holds 41 tokens but the checkpoint has 40 word"):
        tiny_backbone().save_to_preset(tmp_path / "preset", vocabulary_file=vocabulary)
    assert not (tmp_path / "preset").exists()
