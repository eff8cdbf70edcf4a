import re

import keras
import numpy as np
import pytest
from keras import ops

from bert_keras.training.fused_adamw import FusedAdamW
from bert_keras.training.schedules import LinearWarmupLinearDecay

SHAPES = {"kernel": (6, 5), "bias": (5,), "embeddings": (7, 3)}


def _optimizers(**settings):
    """A FusedAdamW and Keras' AdamW with the same settings, each on its own weights."""
    rng = np.random.default_rng(0)
    initial = {name: rng.normal(size=shape).astype("float32") for name, shape in SHAPES.items()}
    pairs = []
    for optimizer_class in (FusedAdamW, keras.optimizers.AdamW):
        optimizer = optimizer_class(
            **{
                "learning_rate": LinearWarmupLinearDecay(1e-2, 20, 3),
                "weight_decay": 0.1,
                "epsilon": 1e-6,
                **settings,
            }
        )
        optimizer.exclude_from_weight_decay(var_names=["bias"])
        weights = [keras.Variable(value, name=name) for name, value in initial.items()]
        pairs.append((optimizer, weights))
    return pairs


def _gradients(rng, scale):
    return [rng.normal(scale=scale, size=shape).astype("float32") for shape in SHAPES.values()]


def _state(optimizer, weights):
    return [ops.convert_to_numpy(v) for v in weights + list(optimizer.variables)]


def _train(optimizer, weights, gradient_steps):
    for gradients in gradient_steps:
        optimizer.apply([ops.convert_to_tensor(g) for g in gradients], weights)
    return _state(optimizer, weights)


@pytest.mark.parametrize(
    "settings",
    [
        {"global_clipnorm": 1.0},
        {"global_clipnorm": None},
        {"gradient_accumulation_steps": 2},
        {"learning_rate": 3e-3},
    ],
    ids=["clipped", "unclipped", "accumulating", "constant_learning_rate"],
)
def test_updates_weights_and_slots_as_keras_adamw_does(settings):
    rng = np.random.default_rng(1)
    # Small gradients (the norm under the clip) and large ones, one of them zero.
    gradient_steps = [_gradients(rng, scale) for scale in (1e-3, 3.0, 1e-2, 10.0, 0.1, 1e-4)]
    gradient_steps[2][1][:] = 0.0
    (fused, fused_weights), (reference, reference_weights) = _optimizers(**settings)
    initial = _state(fused, fused_weights)[: len(SHAPES)]
    ours = _train(fused, fused_weights, gradient_steps)
    theirs = _train(reference, reference_weights, gradient_steps)
    assert len(ours) == len(theirs) > 3 * len(SHAPES)  # weights, iterations, two slots each
    for start, our_weight, their_weight in zip(initial, ours, theirs):
        # Keras raises beta_2 = 0.999 to the step in float32 (1 - 0.999 keeps
        # five digits), torch's kernel in double: the updates differ there,
        # and by the float32 rounding of weights near 1.
        np.testing.assert_allclose(our_weight - start, their_weight - start, rtol=3e-5, atol=2e-7)
        assert np.abs(our_weight - start).max() > 1e-3  # the weights moved
    for our_slot, their_slot in zip(ours[len(SHAPES) :], theirs[len(SHAPES) :]):
        np.testing.assert_allclose(our_slot, their_slot, rtol=1e-6, atol=1e-12)


def test_a_non_finite_gradient_spoils_the_weights_as_in_keras():
    rng = np.random.default_rng(2)
    gradients = _gradients(rng, 1.0)
    gradients[0][0, 0] = np.inf
    (fused, fused_weights), (reference, reference_weights) = _optimizers(global_clipnorm=1.0)
    ours = _train(fused, fused_weights, [gradients])
    theirs = _train(reference, reference_weights, [gradients])
    for our_value, their_value in zip(ours[: len(SHAPES)], theirs[: len(SHAPES)]):
        np.testing.assert_array_equal(np.isnan(our_value), np.isnan(their_value))
    assert np.isnan(ours[0]).all()


def test_serializes_with_its_settings():
    optimizer = FusedAdamW(learning_rate=3e-4, weight_decay=0.02, epsilon=1e-6, global_clipnorm=1.0)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert type(restored) is FusedAdamW
    assert restored.get_config() == optimizer.get_config()


@pytest.mark.skipif(keras.backend.backend() != "torch", reason="torch.compile is torch's")
def test_a_torch_compiled_step_traces_once_and_updates_as_keras_adamw(monkeypatch):
    """Under `model.compile(jit_compile=True)`, Keras wraps the step in `torch.compile`."""
    import torch

    graphs = []

    def counting_backend(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward

    rng = np.random.default_rng(3)
    gradient_steps = [_gradients(rng, scale) for scale in (1e-3, 3.0, 1e-2, 10.0, 0.1, 1e-4)]
    (fused, fused_weights), (reference, reference_weights) = _optimizers(global_clipnorm=1.0)
    fused.build(fused_weights)  # as `fit` does before its first step
    regular_expressions_in_steps = []
    search = re.search
    monkeypatch.setattr(
        re, "search", lambda *args: regular_expressions_in_steps.append(args) or search(*args)
    )
    torch._dynamo.reset()
    step = torch.compile(fused.apply, backend=counting_backend)
    graphs_after = []
    for gradients in gradient_steps:
        step([ops.convert_to_tensor(g) for g in gradients], fused_weights)
        graphs_after.append(len(graphs))
    assert graphs_after[1] > 0
    assert graphs_after[-1] == graphs_after[1]  # no step traced anew once warm
    assert regular_expressions_in_steps == []  # which weights decay was decided in `build`
    monkeypatch.undo()
    ours = _state(fused, fused_weights)
    theirs = _train(reference, reference_weights, gradient_steps)
    for our_value, their_value in zip(ours, theirs):
        np.testing.assert_allclose(our_value, their_value, rtol=1e-6, atol=1e-7)
