"""BertBackbone.encoder_layer_outputs: every layer equals transformers' hidden_states[1:]."""

import os

import keras
import numpy as np
import torch
import transformers
from keras import ops

from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_task import backbone_inputs

TOLERANCE = 1e-5
NUM_LAYERS = 4
WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *(f"word{index}" for index in range(25))]
INPUTS = {
    "token_ids": np.array([[2, 5, 7, 3, 9, 3, 0, 0], [2, 9, 3, 11, 4, 5, 6, 3]], "int32"),
    "segment_ids": np.array([[0, 0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 1, 1, 1, 1, 1]], "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1, 1, 0, 0], [1] * 8], "int32"),
}


def _random_checkpoint(directory):
    """A random transformers BertModel saved with safetensors, plus a vocab.txt."""
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=len(WORDS),
        hidden_size=16,
        num_hidden_layers=NUM_LAYERS,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        hidden_act="gelu",
    )
    model = transformers.BertModel(config).eval()
    model.save_pretrained(directory, safe_serialization=True)
    with open(os.path.join(directory, "vocab.txt"), "w") as vocabulary:
        vocabulary.write("\n".join(WORDS) + "\n")
    with torch.no_grad():
        outputs = model(
            input_ids=torch.tensor(INPUTS["token_ids"], dtype=torch.long),
            token_type_ids=torch.tensor(INPUTS["segment_ids"], dtype=torch.long),
            attention_mask=torch.tensor(INPUTS["padding_mask"], dtype=torch.long),
            output_hidden_states=True,
        )
    return [hidden.numpy() for hidden in outputs.hidden_states[1:]]  # the encoder layers


def _max_real_difference(actual, expected):
    """Max |difference| over real tokens (padded positions are never read)."""
    real = INPUTS["padding_mask"].astype(bool)
    return float(np.abs(ops.convert_to_numpy(actual) - expected).max(-1)[real].max())


def test_every_layer_matches_transformers_hidden_states(tmp_path):
    expected = _random_checkpoint(str(tmp_path))
    backbone = BertBackbone.from_preset(str(tmp_path))
    layers = backbone.encoder_layer_outputs(INPUTS)
    assert len(layers) == NUM_LAYERS
    differences = [_max_real_difference(a, e) for a, e in zip(layers, expected)]
    print("per-layer max |difference| vs transformers:", differences)
    assert max(differences) <= TOLERANCE
    np.testing.assert_allclose(
        ops.convert_to_numpy(layers[-1]),
        ops.convert_to_numpy(backbone(INPUTS)["sequence_output"]),
        atol=1e-6,
    )


def test_a_feature_model_of_the_last_four_layers(tmp_path):
    expected = _random_checkpoint(str(tmp_path))
    backbone = BertBackbone.from_preset(str(tmp_path))
    inputs = backbone_inputs()
    features = keras.layers.Concatenate(axis=-1)(backbone.encoder_layer_outputs(inputs)[-4:])
    feature_model = keras.Model(inputs, features)  # [batch, seq, 4 * hidden]
    assert _max_real_difference(feature_model(INPUTS), np.concatenate(expected[-4:], -1)) <= (
        TOLERANCE
    )
    # The feature model shares the backbone's weights and adds none.
    assert feature_model.count_params() == backbone.count_params() - 16 * 16 - 16  # no pooler


def test_outputs_config_and_saving_are_unchanged(tmp_path):
    backbone = BertBackbone(len(WORDS), NUM_LAYERS, 2, 16, 32, max_sequence_length=32)
    assert sorted(backbone(INPUTS)) == ["pooled_output", "sequence_output"]
    assert BertBackbone.from_config(backbone.get_config()).get_config() == backbone.get_config()
    path = str(tmp_path / "backbone.keras")
    backbone.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    assert restored.get_config() == backbone.get_config()
    for ours, theirs in zip(
        backbone.encoder_layer_outputs(INPUTS), restored.encoder_layer_outputs(INPUTS)
    ):
        np.testing.assert_allclose(
            ops.convert_to_numpy(ours), ops.convert_to_numpy(theirs), atol=1e-6
        )
