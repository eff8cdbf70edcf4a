"""CheckpointManager: whole checkpoints only, the newest N kept, optimizer state restored."""

import os

import keras
import numpy as np
import pytest

from bert_keras.layers.dropout import Dropout
from bert_keras.training.checkpoint_manager import CheckpointManager
from bert_keras.training.checkpoint_manager import check_same
from bert_keras.training.checkpoint_manager import random_states
from bert_keras.training.checkpoint_manager import restore_random_states


def trained_model(seed, steps):
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dropout(0.5), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.AdamW(1e-2), loss="mse")
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        model.train_on_batch(rng.normal(size=(4, 3)), rng.normal(size=(4, 2)))
    return model


def values(variables):
    return [keras.ops.convert_to_numpy(variable) for variable in variables]


def test_a_process_that_does_not_write_files_leaves_the_directory_alone(tmp_path):
    manager = CheckpointManager(tmp_path / "checkpoints", writes_files=False)
    assert manager.save(trained_model(seed=1, steps=1), 1, {}) is None
    assert not os.path.exists(tmp_path / "checkpoints")
    assert manager.latest() is None


def test_restore_brings_back_weights_and_optimizer_moments(tmp_path):
    manager = CheckpointManager(tmp_path)
    saved = trained_model(seed=1, steps=3)
    manager.save(saved, 3, {"note": "x"})
    fresh = trained_model(seed=2, steps=0)
    assert random_states(fresh) != random_states(saved)
    restored = manager.restore(fresh)
    states = random_states(saved)  # dropout's, three steps on
    assert restored.step == 3 and restored.metadata == {
        "note": "x",
        "step": 3,
        "random_states": states,
    }
    assert random_states(fresh) == states
    assert int(fresh.optimizer.iterations) == 3
    for ours, theirs in zip(values(fresh.optimizer.variables), values(saved.optimizer.variables)):
        np.testing.assert_array_equal(ours, theirs)
    for ours, theirs in zip(values(fresh.weights), values(saved.weights)):
        np.testing.assert_array_equal(ours, theirs)


def test_an_optimizer_state_keras_would_skip_is_refused(tmp_path):
    manager = CheckpointManager(tmp_path)
    manager.save(trained_model(seed=1, steps=2), 2, {})
    loss_scaled = trained_model(seed=2, steps=0)
    loss_scaled.compile(
        optimizer=keras.optimizers.LossScaleOptimizer(keras.optimizers.AdamW(1e-2)), loss="mse"
    )
    with pytest.raises(ValueError, match="ckpt-00000002.weights.h5 holds another optimizer state"):
        manager.restore(loss_scaled)


def test_keeps_the_newest_and_ignores_incomplete_ones(tmp_path):
    manager = CheckpointManager(tmp_path, keep_checkpoint_max=2)
    model = trained_model(seed=1, steps=1)
    for step in (5, 10, 15):
        manager.save(model, step, {})
    assert [checkpoint.step for checkpoint in manager.checkpoints()] == [10, 15]
    assert sorted(os.listdir(tmp_path)) == [
        "ckpt-00000010.json",
        "ckpt-00000010.weights.h5",
        "ckpt-00000015.json",
        "ckpt-00000015.weights.h5",
    ]
    # What a kill mid-save leaves: weights without metadata, and partial files.
    (tmp_path / "ckpt-00000020.weights.h5").write_bytes(b"cut")
    (tmp_path / "ckpt-00000025.partial.weights.h5").write_bytes(b"cut")
    (tmp_path / "ckpt-00000020.partial.json").write_text("{")
    assert manager.latest().step == 15
    manager.remove_partial_files()
    assert not [name for name in os.listdir(tmp_path) if ".partial" in name]


def test_nothing_to_restore(tmp_path):
    assert CheckpointManager(tmp_path / "missing").restore(trained_model(1, 0)) is None


def test_keep_checkpoint_max_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="keep_checkpoint_max is 0 but must be at least 1"):
        CheckpointManager(tmp_path, keep_checkpoint_max=0)


def test_check_same_lists_every_difference():
    with pytest.raises(ValueError) as error:
        check_same({"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 5, "d": 4}, "architecture", "ckpt-1")
    assert str(error.value) == (
        "ckpt-1 was written with another architecture: b is 2 there but 5 here; "
        "c is 3 there but None here; d is None there but 4 here."
    )


def test_restoring_random_streams_into_a_model_without_dropout_names_dropout():
    with_dropout = keras.Sequential([keras.Input((2,)), Dropout(0.1, seed=3)])
    without_dropout = keras.Sequential([keras.Input((2,)), Dropout(0.0)])
    states = random_states(with_dropout)
    with pytest.raises(ValueError) as error:
        restore_random_states(without_dropout, states)
    assert str(error.value).startswith(
        "The checkpoint holds 1 random streams (dropout's seeds), the model 0: its dropout "
        "differs from the checkpoint's run"
    )
