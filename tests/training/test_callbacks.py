"""Training callbacks: step-numbered logs, an append-only history, periodic checkpoints."""

import os

import keras
import numpy as np
import pytest

from bert_keras.training import callbacks as callbacks_module
from bert_keras.training.callbacks import HistoryPlot
from bert_keras.training.callbacks import JsonLinesHistory
from bert_keras.training.callbacks import PeriodicCheckpoint
from bert_keras.training.callbacks import StepTensorBoard
from bert_keras.training.callbacks import StopAtStep
from bert_keras.training.callbacks import TrainingProgress
from bert_keras.training.checkpoint_manager import CheckpointManager
from bert_keras.training.history_records import read_history


def compiled_model(**compile_arguments):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.25), loss="mse", **compile_arguments)
    return model


def fit(model, callbacks, epochs=2, steps_per_epoch=3, initial_epoch=0):
    data = np.ones((24, 2), "float32"), np.ones((24, 1), "float32")
    return model.fit(
        *data,
        batch_size=2,
        epochs=epochs,
        initial_epoch=initial_epoch,
        steps_per_epoch=steps_per_epoch,
        callbacks=callbacks,
        verbose=0,
    )


@pytest.mark.parametrize("steps_per_execution", [1, 3])
def test_progress_counts_steps_across_epochs_and_resumptions(steps_per_execution):
    if steps_per_execution > 1 and keras.backend.backend() == "torch":
        pytest.skip("Keras' torch backend runs one batch per call")
    progress = TrainingProgress(batch_size=2, initial_step=10)
    history = fit(compiled_model(steps_per_execution=steps_per_execution), [progress])
    assert history.history["step"] == [13, 16]
    assert history.history["learning_rate"] == [0.25, 0.25]
    assert all(value > 0 for value in history.history["examples_per_second"])


@pytest.mark.parametrize("steps_per_execution", [1, 2])
def test_training_stops_after_the_steps_asked_for_within_the_last_epoch(steps_per_execution):
    if steps_per_execution > 1 and keras.backend.backend() == "torch":
        pytest.skip("Keras' torch backend runs one batch per call")
    model = compiled_model(steps_per_execution=steps_per_execution)
    callbacks = [StopAtStep(total_steps=8, steps_per_epoch=6), TrainingProgress(batch_size=2)]
    history = fit(model, callbacks, epochs=3, steps_per_epoch=6)
    assert history.history["step"] == [6, 8]
    assert int(model.optimizer.iterations) == 8


def test_progress_counts_a_pass_ending_in_a_short_batch_as_one_pass():
    # Five examples in batches of two: two full batches and one of one.
    progress = TrainingProgress(batch_size=2, batches_per_epoch=3)
    history = compiled_model().fit(
        np.ones((5, 2)), np.ones((5, 1)), batch_size=2, epochs=2, callbacks=[progress], verbose=0
    )
    assert history.history["epoch"] == [1.0, 2.0]


def test_progress_counts_optimizer_steps_when_accumulating():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.25, gradient_accumulation_steps=3), loss="mse")
    history = fit(
        model,
        [TrainingProgress(batch_size=2, initial_step=4, gradient_accumulation_steps=3)],
        steps_per_epoch=6,
    )
    assert history.history["step"] == [6, 8]
    assert int(model.optimizer.iterations) == 4


def test_history_appends_each_step_once_across_resumptions(tmp_path):
    path = str(tmp_path / "history.jsonl")
    fit(compiled_model(), [TrainingProgress(batch_size=2), JsonLinesHistory(path)])
    first = read_history(path)
    assert [record["step"] for record in first] == [3, 6]
    assert set(first[0]) == {"step", "loss", "learning_rate", "examples_per_second", "seconds"}
    # Resumed from a checkpoint at step 3: step 6 is trained again but not written twice.
    with open(path, "a") as file:
        file.write('{"step": 6, "lo')  # a line cut short by a kill
    fit(
        compiled_model(),
        [TrainingProgress(batch_size=2, initial_step=3), JsonLinesHistory(path)],
        epochs=3,
        initial_epoch=1,
    )
    history = read_history(path)
    assert history[:2] == first
    assert [record["step"] for record in history] == [3, 6, 9]
    assert open(path).read().count("\n") == 4  # 3 records + the cut-off line, kept


class _KilledAtTheFirstBatch(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        raise KeyboardInterrupt


def test_a_replacing_history_keeps_the_earlier_file_until_its_first_record(tmp_path):
    path = tmp_path / "history.jsonl"
    earlier = '{"step": 100, "loss": 0.5}\n'
    path.write_text(earlier)
    with pytest.raises(KeyboardInterrupt):
        fit(
            compiled_model(),
            [TrainingProgress(batch_size=2), JsonLinesHistory(path, replace=True)]
            + [_KilledAtTheFirstBatch()],
        )
    assert path.read_text() == earlier
    fit(compiled_model(), [TrainingProgress(batch_size=2), JsonLinesHistory(path, replace=True)])
    assert [record["step"] for record in read_history(path)] == [3, 6]
    assert os.listdir(tmp_path) == ["history.jsonl"]


def test_history_needs_the_step():
    with pytest.raises(ValueError, match="put TrainingProgress first"):
        fit(compiled_model(), [JsonLinesHistory(os.devnull + ".jsonl")])


@pytest.mark.parametrize(
    ("min_seconds", "steps_drawn"), [(0.0, [3, 6, 9, 12, 12]), (3600, [3, 12])]
)
def test_history_plot_redraws_at_most_every_min_seconds_and_at_the_end(
    tmp_path, monkeypatch, min_seconds, steps_drawn
):
    drawn = []  # the last step in the history at each drawing
    monkeypatch.setattr(
        callbacks_module,
        "write_history_plot",
        lambda directory: drawn.append(
            read_history(os.path.join(directory, "h.jsonl"))[-1]["step"]
        ),
    )
    callbacks = [
        TrainingProgress(batch_size=2),
        JsonLinesHistory(tmp_path / "h.jsonl"),
        HistoryPlot(tmp_path, min_seconds=min_seconds),
    ]
    fit(compiled_model(), callbacks, epochs=4)
    assert drawn == steps_drawn


def test_periodic_checkpoint_saves_every_epoch_at_the_step(tmp_path):
    manager = CheckpointManager(tmp_path, keep_checkpoint_max=5)
    model = compiled_model()
    fit(
        model,
        [TrainingProgress(batch_size=2, initial_step=6), PeriodicCheckpoint(manager, {"run": 1})],
    )
    assert [(checkpoint.step, checkpoint.metadata) for checkpoint in manager.checkpoints()] == [
        (9, {"run": 1, "step": 9, "random_states": []}),
        (12, {"run": 1, "step": 12, "random_states": []}),
    ]


def test_tensorboard_scalars_sit_at_the_training_step(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    fit(
        compiled_model(),
        [TrainingProgress(batch_size=2, initial_step=100), StepTensorBoard(log_dir=str(tmp_path))],
    )
    events = EventAccumulator(str(tmp_path / "train"), size_guidance={"tensors": 0})
    events.Reload()
    assert [event.step for event in events.Tensors("epoch_loss")] == [103, 106]
