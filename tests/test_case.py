"""The shared checks every layer and model test runs.

`run_layer_test` and `run_model_test` check, for one constructor config:
config round-trip, symbolic and eager calls, weight counts, one `fit` step that
changes the weights, `.keras` save/load (safe mode) with identical outputs, and
every mixed-precision policy (float32 variables, low-precision outputs, no
NaN).
"""

import os
import tempfile

import keras
import numpy as np
from keras import ops

PRECISION_POLICIES = ("mixed_bfloat16", "mixed_float16")


class TestCase:
    """Base class for layer and model tests; see the module docstring."""

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
        self._check_saving(model, call_kwargs)
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
        self._check_saving(model, inputs)
        for policy in PRECISION_POLICIES:
            mixed = model_cls(**init_kwargs, dtype=policy)
            for output in mixed(inputs).values():
                self._check_precision(mixed, output, policy)
            self._check_fit_step(mixed, inputs)

    def run_task_test(self, build_task, inputs, labels, unused_weights=()):
        """Shared checks for a task model: `build_task(dtype)` makes one.

        Config round-trip, `.keras` save/load, one fit step with the task's
        default `compile()` that changes every weight, and, under each mixed
        policy, float32 outputs and a finite fit step. `unused_weights`:
        path prefixes outside the task's graph (e.g. the pooler of a tagger).
        """
        model = build_task(None)
        config = model.get_config()
        assert type(model).from_config(config).get_config() == config
        self._check_saving(model, inputs)
        model.compile()
        self._check_fit_step(model, inputs, labels, unused_weights)
        for policy in PRECISION_POLICIES:
            mixed = build_task(policy)
            for output in keras.tree.flatten(mixed(inputs)):
                assert keras.backend.standardize_dtype(output.dtype) == "float32"
            mixed.compile()
            self._check_fit_step(mixed, inputs, labels, unused_weights)

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

    def _check_fit_step(self, model, inputs, targets=None, unused_weights=()):
        if targets is None:
            targets = _zero_targets(model(inputs))
            model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
        before = [ops.convert_to_numpy(w).copy() for w in model.trainable_weights]
        history = model.fit(inputs, targets, epochs=1, batch_size=len(_first(inputs)), verbose=0)
        assert np.isfinite(history.history["loss"][0])
        after = [ops.convert_to_numpy(w) for w in model.trainable_weights]
        changed = [
            not np.array_equal(b, a) or w.path.startswith(tuple(unused_weights))
            for w, b, a in zip(model.trainable_weights, before, after)
        ]
        assert all(changed), (
            "fit did not update "
            f"{[w.path for w, c in zip(model.trainable_weights, changed) if not c]}"
        )

    def _check_saving(self, model, inputs):
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
