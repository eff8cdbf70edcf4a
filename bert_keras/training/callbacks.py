"""Callbacks of a training run: step-numbered logs, a history file and its plot, checkpoints, TensorBoard.

A run is fitted with one Keras epoch per checkpoint interval, so the
epoch-end logs hold the means of the interval. `TrainingProgress` (first in
the callback list) adds the global `step`, `learning_rate` and
`examples_per_second` to those logs; the others read `step` from them.
"""

import json
import os
import time

import keras

from bert_keras.atomic_files import write_text
from bert_keras.training.history_plots import write_history_plot
from bert_keras.training.history_records import read_history


class TrainingProgress(keras.callbacks.Callback):
    """Adds `step`, `learning_rate`, `examples_per_second` and `seconds` to each epoch's logs.

    `seconds` is the epoch's wall-clock time, compilation included: the
    first epoch's excess over the others is what compiling costs. Given
    `batches_per_epoch`, it also adds `epoch`: the passes over the data so
    far (batches trained on / batches per pass, a pass's last batch
    counting whole however short), for runs whose Keras epochs are shorter
    than a pass.

    Args:
        batch_size: examples per batch.
        initial_step: the step the run starts from (a resumed run's).
        gradient_accumulation_steps: batches per optimizer step.
        batches_per_epoch: batches in one pass over the data, or None.

    Example:
    >>> import numpy as np
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse")
    >>> history = model.fit(np.zeros((8, 2)), np.zeros(8), batch_size=2, verbose=0,
    ...                     callbacks=[TrainingProgress(batch_size=2, initial_step=100)])
    >>> history.history["step"], history.history["learning_rate"]
    ([104], [0.5])
    >>> progress = TrainingProgress(batch_size=2, batches_per_epoch=8)
    >>> model.fit(np.zeros((8, 2)), np.zeros(8), batch_size=2, epochs=2, verbose=0,
    ...           callbacks=[progress]).history["epoch"]
    [0.5, 1.0]
    """

    def __init__(
        self, batch_size, initial_step=0, gradient_accumulation_steps=1, batches_per_epoch=None
    ):
        super().__init__()
        self.batch_size = batch_size
        self.gradient_accumulation_steps = gradient_accumulation_steps
        self.batches_per_epoch = batches_per_epoch
        self.batches = initial_step * gradient_accumulation_steps
        self._epoch_batches = 0
        self._epoch_start = None

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start = time.perf_counter()
        self._epoch_batches = 0

    def on_train_batch_end(self, batch, logs=None):
        # With steps_per_execution > 1 Keras reports only each execution's last batch.
        self._epoch_batches = batch + 1

    def on_epoch_end(self, epoch, logs=None):
        seconds = time.perf_counter() - self._epoch_start
        self.batches += self._epoch_batches
        if logs is None:
            return
        logs["step"] = self.batches // self.gradient_accumulation_steps
        logs["learning_rate"] = float(
            keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)
        )
        logs["examples_per_second"] = self._epoch_batches * self.batch_size / max(seconds, 1e-9)
        logs["seconds"] = seconds
        if self.batches_per_epoch:
            logs["epoch"] = self.batches / self.batches_per_epoch


class JsonLinesHistory(keras.callbacks.Callback):
    """Appends each epoch's logs to a JSON-lines file, one line per step, never rewriting it.

    A resumed run repeats the steps after its last checkpoint; a step the
    file already holds is not written again, so the file has each step once.
    Each line is flushed and synced as it is written.

    Args:
        path: the history file (created when missing).
        replace: start a history of this run's own: an earlier run's file
            stays whole until this run's first record replaces it.

    Example:
    >>> import numpy as np, tempfile
    >>> path = tempfile.mkdtemp() + "/history.jsonl"
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> callbacks = [TrainingProgress(batch_size=4), JsonLinesHistory(path)]
    >>> _ = model.fit(np.zeros((8, 2)), np.zeros(8), batch_size=4, epochs=2, verbose=0,
    ...               callbacks=callbacks)
    >>> [(record["step"], record["loss"]) for record in read_history(path)]
    [(2, 0.0), (4, 0.0)]
    """

    def __init__(self, path, replace=False):
        super().__init__()
        self.path = os.fspath(path)
        self.replace = replace
        self._written_steps = set()

    def on_train_begin(self, logs=None):
        if self.replace:
            return
        self._written_steps = {record["step"] for record in read_history(self.path)}
        if os.path.exists(self.path) and os.path.getsize(self.path):
            with open(self.path, "rb") as file:
                file.seek(-1, os.SEEK_END)
                ends_with_newline = file.read(1) == b"\n"
            if not ends_with_newline:
                # A kill mid-line: start the next record on a line of its own.
                self._append("\n")

    def on_epoch_end(self, epoch, logs=None):
        if not logs or "step" not in logs:
            raise ValueError(
                "JsonLinesHistory needs `step` in the logs: put TrainingProgress first."
            )
        step = int(logs["step"])
        if step in self._written_steps:
            return
        record = {
            "step": step,
            **{name: float(value) for name, value in logs.items() if name != "step"},
        }
        if self.replace and not self._written_steps:
            write_text(self.path, json.dumps(record) + "\n")
        else:
            self._append(json.dumps(record) + "\n")
        self._written_steps.add(step)

    def _append(self, text):
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())


class HistoryPlot(keras.callbacks.Callback):
    """Redraws OUTPUT_DIR/history.png from OUTPUT_DIR's history as training goes.

    Drawing takes a noticeable fraction of a second, as long as many
    training steps of a small model, so the plot is redrawn at the end of an
    epoch only when `min_seconds` have passed since the last drawing, and
    always when training ends (`python -m tools.plot_history OUTPUT_DIR`
    draws the history of a run stopped before). Put it after the callback
    that writes the history (`JsonLinesHistory`).

    Args:
        output_dir: the run's directory (see `history_plots.write_history_plot`).
        min_seconds: the least wall-clock time between two drawings during
            training; 0 redraws after every epoch.

    Example:
    >>> import numpy as np, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> callbacks = [TrainingProgress(batch_size=4),
    ...              JsonLinesHistory(directory + "/history.jsonl"), HistoryPlot(directory)]
    >>> _ = model.fit(np.zeros((8, 2)), np.zeros(8), batch_size=4, epochs=2, verbose=0,
    ...               callbacks=callbacks)
    >>> sorted(os.listdir(directory))
    ['history.jsonl', 'history.png']
    """

    def __init__(self, output_dir, min_seconds=30.0):
        super().__init__()
        self.output_dir = os.fspath(output_dir)
        self.min_seconds = min_seconds
        self._drawn_at = None

    def on_epoch_end(self, epoch, logs=None):
        if self._drawn_at is None or time.monotonic() - self._drawn_at >= self.min_seconds:
            self._draw()

    def on_train_end(self, logs=None):
        self._draw()

    def _draw(self):
        write_history_plot(self.output_dir)
        self._drawn_at = time.monotonic()


class PeriodicCheckpoint(keras.callbacks.Callback):
    """Saves model + optimizer through a `CheckpointManager` at the end of every epoch.

    Args:
        manager: a `bert_keras.training.checkpoint_manager.CheckpointManager`.
        metadata: a dict stored with every checkpoint (with the step added).

    Example:
    >>> import numpy as np, tempfile
    >>> from bert_keras.training.checkpoint_manager import CheckpointManager
    >>> manager = CheckpointManager(tempfile.mkdtemp())
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> callbacks = [TrainingProgress(batch_size=4), PeriodicCheckpoint(manager, {})]
    >>> _ = model.fit(np.zeros((8, 2)), np.zeros(8), batch_size=4, epochs=2, verbose=0,
    ...               callbacks=callbacks)
    >>> manager.latest().step
    4
    """

    def __init__(self, manager, metadata):
        super().__init__()
        self.manager = manager
        self.metadata = metadata

    def on_epoch_end(self, epoch, logs=None):
        self.manager.save(self.model, int(logs["step"]), self.metadata)


class StopAtStep(keras.callbacks.Callback):
    """Ends training after `total_steps`, within the last Keras epoch if need be.

    Keras epochs of `steps_per_epoch` steps rarely divide the steps a run
    asks for; this ends the last epoch early (its logs then cover the steps
    it ran), so that training takes exactly `total_steps`. With several
    steps per compiled call, `total_steps` should be a whole number of calls.

    Args:
        total_steps: steps (batches) to train on in all.
        steps_per_epoch: the `steps_per_epoch` given to `fit`.

    Example:
    >>> import numpy as np
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> callbacks = [StopAtStep(total_steps=5, steps_per_epoch=2), TrainingProgress(batch_size=1)]
    >>> model.fit(np.zeros((9, 2)), np.zeros(9), batch_size=1, epochs=3, steps_per_epoch=2,
    ...           verbose=0, callbacks=callbacks).history["step"]
    [2, 4, 5]
    """

    def __init__(self, total_steps, steps_per_epoch):
        super().__init__()
        self.total_steps = total_steps
        self.steps_per_epoch = steps_per_epoch
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self._epoch * self.steps_per_epoch + batch + 1 >= self.total_steps:
            self.model.stop_training = True


class StepTensorBoard(keras.callbacks.TensorBoard):
    """`keras.callbacks.TensorBoard` whose epoch summaries sit at the training step.

    Keras writes epoch summaries at the epoch index; here an epoch is a
    checkpoint interval, so the x axis is `logs["step"]` instead, which also
    keeps a resumed run's points after the first run's.

    Example:
    >>> import tempfile
    >>> StepTensorBoard(log_dir=tempfile.mkdtemp()).update_freq
    'epoch'
    """

    def on_epoch_end(self, epoch, logs=None):
        step = int(logs["step"]) if logs and "step" in logs else epoch
        super().on_epoch_end(step, logs)
