"""The test hub: tiny backbone configs, inputs and models, and the shared checks.

`TestCase.run_layer_test`, `run_model_test` and `run_task_test` check, for
one constructor config: config round-trip, calls, weight counts, one `fit`
step that changes the weights, `.keras` save/load (safe mode) with identical
outputs (`run_saving_test`), and every mixed-precision policy (float32
variables, low-precision or float32 outputs as the model promises; a finite
fit step under mixed_float16).

Layer, model and task tests build their models from `TINY_BACKBONE` (through
`tiny_backbone`) or, where a test must learn something, `TRAINING_BACKBONE`.
"""

import os
import tempfile

import keras
import numpy as np
import pytest
from keras import ops

from bert_keras.models.bert_backbone import BertBackbone

PRECISION_POLICIES = ("mixed_bfloat16", "mixed_float16")

# The smallest backbone with every part: two blocks, so that stacking and the
# pretrainer's last block (which computes only the rows its heads read) are
# exercised. The sizes of the tiny transformers models in tests/checkpoints.
TINY_BACKBONE = {
    "vocabulary_size": 40,
    "num_layers": 2,
    "num_heads": 2,
    "hidden_dim": 8,
    "intermediate_dim": 16,
    "max_sequence_length": 16,
}
# Wide enough to learn a toy task or the synthetic pretraining records in a
# few steps; one block keeps those runs short.
TRAINING_BACKBONE = {
    "vocabulary_size": 40,
    "num_layers": 1,
    "num_heads": 2,
    "hidden_dim": 16,
    "intermediate_dim": 32,
    "max_sequence_length": 32,
}
# Inputs of `TINY_BACKBONE`: four sequences of seven, two segments, two of
# them padded.
TINY_INPUTS = {
    "token_ids": np.random.default_rng(0).integers(5, 40, (4, 7)).astype("int32"),
    "segment_ids": np.repeat([[0, 0, 0, 0, 1, 1, 1]], 4, 0).astype("int32"),
    "padding_mask": np.array([[1] * 7, [1] * 7, [1] * 5 + [0] * 2, [1] * 6 + [0]], "int32"),
}


def tiny_backbone(dtype=None, **overrides):
    """A `BertBackbone` of `TINY_BACKBONE` with `overrides` applied."""
    return BertBackbone(**{**TINY_BACKBONE, **overrides}, dtype=dtype)


def check_validation_data_overrides_split(model, x, y, held_out):
    """`fit(x, y, validation_split=0.5, validation_data=held_out)` validates on `held_out`
    and trains on all of `x` (two batches of four), as Keras does for arrays."""
    model.compile()
    history = model.fit(
        x, y, batch_size=4, validation_split=0.5, validation_data=held_out, verbose=0
    ).history
    assert int(model.optimizer.iterations.numpy()) == 2  # every example trained
    expected = model.evaluate(*held_out, verbose=0, return_dict=True)["loss"]
    assert history["val_loss"][0] == pytest.approx(expected, rel=1e-5)


class TestCase:
    """Base class for layer, model and task tests; see the module docstring."""

    def run_layer_test(
        self,
        layer_cls,
        init_kwargs,
        call_kwargs,
        expected_output_shape,
        expected_num_trainable_weights,
        expected_num_non_trainable_weights=0,
        expected_output_dtype=None,
    ):
        """Runs every shared check on `layer_cls(**init_kwargs)`.

        Args:
            layer_cls: the layer class.
            init_kwargs: constructor arguments.
            call_kwargs: dict of call argument name → numpy array.
            expected_output_shape: output shape for `call_kwargs`.
            expected_num_trainable_weights: number of trainable variables.
            expected_num_non_trainable_weights: non-trainable variables.
            expected_output_dtype: output dtype under a mixed policy, when it
                is not the policy's compute dtype (e.g. float32 logits).
        """
        self._check_config_round_trip(layer_cls, init_kwargs)
        layer = layer_cls(**init_kwargs)
        self._check_symbolic_call(layer_cls(**init_kwargs), call_kwargs, expected_output_shape)
        output = layer(**call_kwargs)
        assert tuple(output.shape) == tuple(expected_output_shape)
        assert len(layer.trainable_weights) == expected_num_trainable_weights
        assert len(layer.non_trainable_weights) == expected_num_non_trainable_weights
        model = _wrap_layer(layer_cls(**init_kwargs), call_kwargs)
        self._check_fit_step(model, call_kwargs)
        self.run_saving_test(model, call_kwargs)
        for policy in PRECISION_POLICIES:
            mixed = layer_cls(**init_kwargs, dtype=policy)
            self._check_precision(mixed, mixed(**call_kwargs), policy, expected_output_dtype)

    def run_model_test(self, model_cls, init_kwargs, inputs, expected_output_shapes):
        """Runs every shared check on the Functional model `model_cls(**init_kwargs)`.

        Args:
            model_cls: the model class.
            init_kwargs: constructor arguments.
            inputs: what the model is called on (a dict of numpy arrays).
            expected_output_shapes: dict of output name → shape.
        """
        self._check_config_round_trip(model_cls, init_kwargs)
        model = model_cls(**init_kwargs)
        outputs = model(inputs)
        assert {name: tuple(value.shape) for name, value in outputs.items()} == {
            name: tuple(shape) for name, shape in expected_output_shapes.items()
        }
        self._check_fit_step(model, inputs)
        self.run_saving_test(model, inputs)
        for policy in PRECISION_POLICIES:
            mixed = model_cls(**init_kwargs, dtype=policy)
            for output in mixed(inputs).values():
                self._check_precision(mixed, output, policy)
            if policy == "mixed_float16":
                # The harder case trains; tests/finetuning and tests/pretraining train in
                # bfloat16.
                self._check_fit_step(mixed, inputs)

    def run_task_test(self, task_cls, init_kwargs, inputs, labels, unused_weights=()):
        """Runs every shared check on `task_cls(tiny_backbone(), **init_kwargs)`.

        Config round-trip, `.keras` save/load, one fit step with the task's
        default `compile()` that changes every weight; under each mixed
        policy, float32 variables and outputs; under mixed_float16, loss
        scaling and two fit steps with finite losses that change every
        weight.

        Args:
            task_cls: the task model class.
            init_kwargs: constructor arguments besides the backbone.
            inputs: what the model is called on (a dict of numpy arrays).
            labels: what `fit` takes as targets for `inputs`.
            unused_weights: path prefixes of weights outside the task's graph
                or without a gradient (e.g. the pooler of a tagger).
        """
        model = task_cls(tiny_backbone(), **init_kwargs)
        config = model.get_config()
        assert task_cls.from_config(config).get_config() == config
        for name, value in init_kwargs.items():
            assert config[name] == value, f"get_config()[{name!r}] differs from the argument"
        self.run_saving_test(model, inputs)
        model.compile()
        self._check_fit_step(model, inputs, labels, unused_weights)
        for policy in PRECISION_POLICIES:
            mixed = task_cls(tiny_backbone(policy), **init_kwargs)
            for variable in mixed.weights:
                assert variable.dtype == "float32", f"{variable.path} is {variable.dtype}"
            for output in keras.tree.flatten(mixed(inputs)):
                assert keras.backend.standardize_dtype(output.dtype) == "float32"
            mixed.compile()
            if policy == "mixed_float16":
                # Training in float16 with loss scaling, the harder case; every task
                # trains in bfloat16 in tests/finetuning and tests/pretraining.
                assert isinstance(mixed.optimizer, keras.optimizers.LossScaleOptimizer)
                # The second step starts from the weights the first one wrote.
                self._check_fit_step(mixed, inputs, labels, unused_weights, epochs=2)

    def run_saving_test(self, model, inputs):
        """Saves `model` as `.keras`, reloads it in safe mode and compares outputs.

        Returns:
            The reloaded model, for checks of what must survive the reload.
        """
        expected = _to_numpy(model(inputs))
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "model.keras")
            model.save(path)
            restored = keras.saving.load_model(path, safe_mode=True)
        assert type(restored) is type(model)
        actual = _to_numpy(restored(inputs))
        keras.tree.map_structure(
            lambda a, b: np.testing.assert_allclose(a, b, atol=1e-6, rtol=0), actual, expected
        )
        return restored

    def _check_config_round_trip(self, cls, init_kwargs):
        config = cls(**init_kwargs).get_config()
        revived = cls.from_config(config)
        assert revived.get_config() == config
        for name, value in init_kwargs.items():
            assert config[name] == value, f"get_config()[{name!r}] differs from the argument"

    def _check_symbolic_call(self, layer, call_kwargs, expected_output_shape):
        symbolic_inputs = {
            name: keras.KerasTensor((None,) + value.shape[1:], dtype=_dtype_name(value))
            for name, value in call_kwargs.items()
        }
        output = layer(**symbolic_inputs)
        assert tuple(output.shape) == (None,) + tuple(expected_output_shape[1:])

    def _check_fit_step(self, model, inputs, targets=None, unused_weights=(), epochs=1):
        if targets is None:
            targets = _zero_targets(model(inputs))
            model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
        before = [ops.convert_to_numpy(w).copy() for w in model.trainable_weights]
        history = model.fit(
            inputs, targets, epochs=epochs, batch_size=len(_first(inputs)), verbose=0
        )
        assert np.all(np.isfinite(history.history["loss"])), history.history["loss"]
        after = [ops.convert_to_numpy(w) for w in model.trainable_weights]
        changed = [
            not np.array_equal(b, a) or w.path.startswith(tuple(unused_weights))
            for w, b, a in zip(model.trainable_weights, before, after)
        ]
        assert all(changed), (
            "fit did not update "
            f"{[w.path for w, c in zip(model.trainable_weights, changed) if not c]}"
        )

    def _check_precision(self, layer, output, policy, expected_output_dtype=None):
        compute_dtype = keras.DTypePolicy(policy).compute_dtype
        for variable in layer.weights:
            assert variable.dtype == "float32", f"{variable.path} is {variable.dtype}"
        for sublayer in layer._flatten_layers():
            if isinstance(sublayer, keras.layers.InputLayer):
                continue
            assert sublayer.dtype_policy.name == policy, f"{sublayer.name} ignores {policy}"
        assert keras.backend.standardize_dtype(output.dtype) == (
            expected_output_dtype or compute_dtype
        )
        assert np.all(np.isfinite(ops.convert_to_numpy(ops.cast(output, "float32"))))


def _wrap_layer(layer, call_kwargs):
    inputs = {
        name: keras.Input(shape=value.shape[1:], dtype=_dtype_name(value), name=name)
        for name, value in call_kwargs.items()
    }
    return keras.Model(inputs, layer(**inputs))


def _dtype_name(array):
    return keras.backend.standardize_dtype(array.dtype)


def _zero_targets(outputs):
    return keras.tree.map_structure(lambda t: np.zeros(tuple(t.shape), "float32"), outputs)


def _first(inputs):
    return next(iter(inputs.values())) if isinstance(inputs, dict) else inputs


def _to_numpy(outputs):
    return keras.tree.map_structure(ops.convert_to_numpy, outputs)
