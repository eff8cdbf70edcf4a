"""Numbered training checkpoints: model + optimizer state, written atomically, the last N kept.

Each checkpoint is two files in one directory:

- `ckpt-{step:08d}.weights.h5`: `model.save_weights`, which in Keras 3 holds
  every model variable and the optimizer's (iterations, moments, loss scale);
- `ckpt-{step:08d}.json`: what the run needs to continue (the step, the
  batches consumed, the architecture, the settings that fix the data order).

The weights go to a temporary name and are renamed into place, then the
metadata is written the same way (`bert_keras.atomic_files`); a checkpoint exists once its .json does, so
a run killed at any moment leaves either a whole checkpoint or none.
`keras.callbacks.BackupAndRestore` was the first choice, but in Keras 3.15 it
restores only the epoch (not the position inside one), overwrites a single
file in place and keeps at most two.
"""

import dataclasses
import glob
import json
import os
import re
import tempfile
import warnings

import keras
import numpy as np
from absl import logging

from bert_keras.atomic_files import PARTIAL_MARKER
from bert_keras.atomic_files import atomic_file
from bert_keras.atomic_files import write_text
from bert_keras.training.optimizer_build import build_optimizer

_NAME = re.compile(r"^ckpt-(\d{8})\.json$")
# How Keras says it left an optimizer's state unloaded (its variables and the file's differ).
_SKIPPED_OPTIMIZER = "Skipping variable loading for optimizer"


@dataclasses.dataclass
class SavedCheckpoint:
    """One complete checkpoint on disk.

    Attributes:
        step: the training step it was written at.
        weights_path: its `.weights.h5` file.
        metadata: the dict stored beside it.
    """

    step: int
    weights_path: str
    metadata: dict


class CheckpointManager:
    """Writes, finds, prunes and restores the checkpoints of one run.

    Args:
        directory: where the checkpoints live (created when needed).
        keep_checkpoint_max: how many of the newest checkpoints to keep.
        writes_files: False on all but one of several processes training one
            model: they still go through `save` (reading variables that
            span processes is collective: every process must take part), but
            into a scratch file that is then deleted.

    Example:
    >>> import tempfile, keras
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="adam", loss="mse")
    >>> manager = CheckpointManager(tempfile.mkdtemp(), keep_checkpoint_max=2)
    >>> for step in (10, 20, 30):
    ...     _ = manager.save(model, step, {"batches": step})
    >>> [checkpoint.step for checkpoint in manager.checkpoints()]
    [20, 30]
    >>> manager.restore(model).metadata
    {'batches': 30, 'random_states': [], 'step': 30}
    """

    def __init__(self, directory, keep_checkpoint_max=5, writes_files=True):
        if keep_checkpoint_max < 1:
            raise ValueError(
                f"keep_checkpoint_max is {keep_checkpoint_max} but must be at least 1."
            )
        self.directory = os.fspath(directory)
        self.keep_checkpoint_max = keep_checkpoint_max
        self.writes_files = writes_files

    def checkpoints(self):
        """The complete checkpoints, oldest first."""
        found = []
        for path in glob.glob(os.path.join(glob.escape(self.directory), "ckpt-*.json")):
            match = _NAME.match(os.path.basename(path))
            weights_path = path[: -len(".json")] + ".weights.h5"
            if not match or not os.path.exists(weights_path):
                continue
            with open(path, encoding="utf-8") as file:
                metadata = json.load(file)
            found.append(SavedCheckpoint(int(match.group(1)), weights_path, metadata))
        return sorted(found, key=lambda checkpoint: checkpoint.step)

    def latest(self):
        """The newest complete checkpoint, or None."""
        checkpoints = self.checkpoints()
        return checkpoints[-1] if checkpoints else None

    def save(self, model, step, metadata):
        """Writes model + optimizer state at `step`, then drops the oldest beyond the limit.

        Returns:
            The `SavedCheckpoint` written (None where `writes_files` is False).
        """
        build_optimizer(model)
        if not self.writes_files:
            with tempfile.TemporaryDirectory() as scratch:
                model.save_weights(os.path.join(scratch, "scratch.weights.h5"))
            return None
        stem = os.path.join(self.directory, f"ckpt-{step:08d}")
        weights_path = stem + ".weights.h5"
        with atomic_file(weights_path) as partial_weights:
            model.save_weights(partial_weights)
        metadata = {**metadata, "step": step, "random_states": random_states(model)}
        write_text(stem + ".json", json.dumps(metadata, indent=2, sort_keys=True) + "\n")
        self._prune()
        return SavedCheckpoint(step, weights_path, metadata)

    def _prune(self):
        for checkpoint in self.checkpoints()[: -self.keep_checkpoint_max]:
            # The .json first: without it the .weights.h5 is no checkpoint.
            os.remove(checkpoint.weights_path[: -len(".weights.h5")] + ".json")
            os.remove(checkpoint.weights_path)

    def remove_partial_files(self):
        """Deletes what a killed save left behind."""
        for path in glob.glob(
            os.path.join(glob.escape(self.directory), f"ckpt-*{PARTIAL_MARKER}*")
        ):
            logging.info("Removing %s, left by an interrupted save.", path)
            os.remove(path)

    def restore(self, model, checkpoint=None):
        """Loads the newest (or the given) checkpoint into a compiled `model`.

        The optimizer is built first so its slots exist to receive the saved
        moments.

        Returns:
            The `SavedCheckpoint` loaded, or None when there is none.

        Raises:
            ValueError: the checkpoint's optimizer state does not fit the
                model's optimizer (another optimizer, or float16's loss
                scaling on one side only), which Keras would skip with a
                warning, restarting the moments and the step count.
        """
        checkpoint = checkpoint or self.latest()
        if checkpoint is None:
            return None
        build_optimizer(model)
        _load_weights_with_optimizer_state(model, checkpoint.weights_path)
        restore_random_states(model, checkpoint.metadata.get("random_states", []))
        logging.info("Restored %s (step %d).", checkpoint.weights_path, checkpoint.step)
        return checkpoint


def _load_weights_with_optimizer_state(model, weights_path):
    """`model.load_weights`, raising where Keras skips an optimizer's saved variables."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.load_weights(weights_path)
    skipped = []
    for warning in caught:
        if str(warning.message).startswith(_SKIPPED_OPTIMIZER):
            skipped.append(str(warning.message).strip())
        else:
            warnings.warn_explicit(
                warning.message, warning.category, warning.filename, warning.lineno
            )
    if skipped:
        raise ValueError(
            f"{weights_path} holds another optimizer state than this run's optimizer "
            f"(Keras: {skipped[0]}): resuming would restart the moments and the step count. "
            "Resume with the optimizer settings it was written with (mixed_precision, optimizer)."
        )


def random_states(model):
    """The states of `model`'s random streams (dropout's seed generators), in the model's order.

    `save_weights` leaves them out, so without them a resumed run would
    drop other units than the uninterrupted run from its first step on.
    Their names are no key: Keras numbers seed generators per process.

    Example:
    >>> from bert_keras.layers.dropout import Dropout
    >>> model = keras.Sequential([keras.Input((2,)), Dropout(0.5, seed=3)])
    >>> random_states(model)
    [[3, 0]]
    """
    return [keras.ops.convert_to_numpy(variable).tolist() for variable in _random_streams(model)]


def restore_random_states(model, states):
    """Sets `model`'s random streams to `states` (from `random_states`); none if there are none."""
    streams = _random_streams(model)
    if states and len(states) != len(streams):
        raise ValueError(
            f"The checkpoint holds {len(states)} random streams (dropout's seeds), the model "
            f"{len(streams)}: its dropout differs from the checkpoint's run (a rate of 0 has "
            "none, as in hidden_dropout_prob or attention_probs_dropout_prob); resume with the "
            "run's dropout."
        )
    for variable, state in zip(streams, states):
        variable.assign(np.asarray(state, dtype=variable.dtype))


def _random_streams(model):
    """`model`'s variables that are not weights: its seed generators' states."""
    weights = {id(variable) for variable in model.weights}
    return [variable for variable in model.variables if id(variable) not in weights]


def check_same(saved, current, what, source):
    """Raises ValueError listing every key whose value differs between two dicts.

    Args:
        saved: the values recorded with a checkpoint.
        current: the values of this run.
        what: what the values are, for the message (e.g. "architecture").
        source: where `saved` came from, for the message.

    Example:
    >>> check_same({"hidden_dim": 128}, {"hidden_dim": 128}, "architecture", "ckpt")
    >>> check_same({"hidden_dim": 128}, {"hidden_dim": 256}, "architecture", "ckpt")
    Traceback (most recent call last):
    ...
    ValueError: ckpt was written with another architecture: hidden_dim is 128 there but 256 here.
    """
    differences = differing_values(saved, current)
    if differences:
        raise ValueError(
            f"{source} was written with another {what}: " + "; ".join(differences) + "."
        )


def differing_values(saved, current):
    """`"<key> is <saved> there but <current> here"` for each key whose value differs.

    Example:
    >>> differing_values({"learning_rate": 1e-3, "seed": 1}, {"learning_rate": 5e-4, "seed": 1})
    ['learning_rate is 0.001 there but 0.0005 here']
    """
    return [
        f"{key} is {saved.get(key)!r} there but {current.get(key)!r} here"
        for key in sorted(set(saved) | set(current))
        if saved.get(key) != current.get(key)
    ]
