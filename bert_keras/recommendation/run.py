"""A BERT4Rec run: an interaction log in, a trained model, honest metrics and top-k lists out.

`python -m tasks.recommend` is its command line. The log is split leave-one-out
(`bert_keras.data.interactions`); the model trains on each user's items before
the last two, with the original's recipe (AdamW with weight decay 0.01, warmup,
linear decay, gradients clipped to a global norm of 5), and stops early on the
validation items' full-ranking NDCG@10, keeping its best weights. Evaluation
ranks each user's last item after the rest of the history, both against every
unseen item and against 100 popularity-sampled negatives.

Files in OUTPUT_DIR: `item_ids.json` (id → raw item id), `model.keras`,
`history.json` (drawn to `history.png`), `eval_results.json` and
`predictions.tsv`, each written whole; and `checkpoints/`, from which an
interrupted training resumes: `ckpt-{epoch}.weights.h5` + `.json` after each
epoch (model and optimizer state, the history, the early-stopping state and
the settings, the newest 2 kept; `bert_keras.training.checkpoint_manager`)
and `best.weights.h5`, the best epoch's weights so far.
"""

import csv
import hashlib
import io
import json
import math
import os

import keras
import numpy as np
from absl import logging

from bert_keras.atomic_files import atomic_file
from bert_keras.atomic_files import partial_path
from bert_keras.atomic_files import write_text
from bert_keras.data.cloze_instances import DEFAULT_MASK_LAST_RATE
from bert_keras.data.cloze_instances import cloze_epochs
from bert_keras.data.cloze_instances import training_windows
from bert_keras.data.interactions import PAD_ID
from bert_keras.data.interactions import LeaveOneOutSplit
from bert_keras.data.interactions import UserSequences
from bert_keras.data.interactions import load_item_ids
from bert_keras.data.interactions import read_interactions
from bert_keras.evaluation.ranking_metrics import next_item_ranks
from bert_keras.evaluation.ranking_metrics import popularity_negatives
from bert_keras.evaluation.ranking_metrics import ranking_metrics
from bert_keras.models.bert4rec import Bert4Rec
from bert_keras.models.dataset_release import without_autotuning_thread
from bert_keras.models.presets import bert4rec_preset_config
from bert_keras.training.checkpoint_manager import CheckpointManager
from bert_keras.training.checkpoint_manager import differing_values
from bert_keras.training.history_plots import write_history_plot
from bert_keras.training.optimizers import create_optimizer

MODEL_FILE = "model.keras"
ITEM_IDS_FILE = "item_ids.json"
EVAL_RESULTS_FILE = "eval_results.json"
PREDICTIONS_FILE = "predictions.tsv"
HISTORY_FILE = "history.json"
CHECKPOINT_DIR = "checkpoints"
BEST_WEIGHTS_FILE = "best.weights.h5"  # in CHECKPOINT_DIR
KEEP_CHECKPOINTS = 2
CLIP_NORM = 5.0  # the original BERT4Rec's clip_by_global_norm
EARLY_STOPPING_METRIC = "val_full/ndcg@10"


class RecommendationRun:
    """Reads and splits a log; trains, evaluates and predicts with BERT4Rec.

    Args:
        input_file: the interaction log.
        input_format: "movielens", "recbole" or "csv"
            (`bert_keras.data.interactions.INPUT_FORMATS`).
        output_dir: results go here (created if absent).
        preset: a `BERT4REC_PRESETS` name: the model's sizes and the mask
            probability.
        min_interactions: users with fewer interactions are dropped.
        max_sequence_length: overrides the preset's.
        num_negatives: popularity-sampled negatives per evaluated user; 0
            reports the full-ranking metrics alone.
        seed: seeds weights, masks, shuffling and the negatives.
        **model_overrides: `Bert4Rec` arguments replacing the preset's
            (e.g. `hidden_dim=32`).

    Example:
    >>> import tempfile
    >>> log = tempfile.mkdtemp() + "/log.csv"
    >>> rows = [f"u{u},i{(u + t) % 7},{t}" for u in range(4) for t in range(6)]
    >>> _ = open(log, "w").write("user,item,timestamp\\n" + "\\n".join(rows))
    >>> run = RecommendationRun(log, "csv", tempfile.mkdtemp(), max_sequence_length=8,
    ...                         num_negatives=2)
    >>> run.sequences.num_items, len(run.split.test_targets)
    (7, 4)
    """

    def __init__(
        self,
        input_file,
        input_format,
        output_dir,
        preset="bert4rec_ml1m",
        min_interactions=5,
        max_sequence_length=None,
        num_negatives=100,
        seed=12345,
        **model_overrides,
    ):
        keras.utils.set_random_seed(seed)
        self.output_dir = output_dir
        self.preset = preset
        self.config = {**bert4rec_preset_config(preset), **model_overrides}
        if max_sequence_length is not None:
            self.config["max_sequence_length"] = max_sequence_length
        self.num_negatives = num_negatives
        self.seed = seed
        log = read_interactions(input_file, input_format)
        self.sequences = UserSequences.from_interactions(log, min_interactions)
        if not self.sequences.sequences:
            raise ValueError(
                f"{input_file}: no user has {min_interactions} or more interactions "
                f"({self.sequences.dropped_users} users dropped)."
            )
        self.split = LeaveOneOutSplit.from_sequences(self.sequences.sequences)
        os.makedirs(output_dir, exist_ok=True)
        self.model = None

    def check_negatives(self):
        """Refuses `num_negatives` that a user leaves too few items for (`evaluate` would).

        Raises:
            ValueError: naming the user and the most negatives that can be drawn.
        """
        unseen = self._unseen_items()
        user = int(np.argmin(unseen))
        if unseen[user] >= self.num_negatives:
            return
        who = f"user {self.sequences.user_ids[user]!r}, who"
        message = f"num_negatives={self.num_negatives} negatives cannot be drawn for {who}"
        if unseen[user]:
            raise ValueError(
                f"{message} leaves only {unseen[user]} of the {self.sequences.num_items} items "
                f"unseen: lower --num_negatives to at most {unseen[user]}."
            )
        raise ValueError(
            f"{message} has seen all {self.sequences.num_items} items: --num_negatives=0 "
            "reports the full-ranking metrics alone."
        )

    def most_negatives(self):
        """The most popularity-sampled negatives every user leaves unseen items for."""
        return int(min(self._unseen_items()))

    def _unseen_items(self):
        return [self.sequences.num_items - len(set(s.tolist())) for s in self.sequences.sequences]

    def build_model(self):
        """A fresh `Bert4Rec` of the preset's sizes for this log's items."""
        config = {key: value for key, value in self.config.items() if key != "mask_probability"}
        return Bert4Rec(num_items=self.sequences.num_items, **config)

    def train(
        self,
        num_epochs,
        batch_size=256,
        learning_rate=1e-4,
        num_warmup_steps=100,
        sliding_window=0.5,
        mask_last_rate=None,
        patience=10,
        verbose=2,
    ):
        """Fits the model, resuming OUTPUT_DIR/checkpoints; keeps the epoch with the best validation NDCG@10.

        Every epoch ends with a checkpoint (`OUTPUT_DIR/checkpoints`), and
        an epoch's window order and masks depend only on the seed and the
        epoch's number (`cloze_epochs`), so a run stopped at any moment and
        called again with the same settings continues after its last whole
        epoch and ends with the weights and history of a run never stopped.
        Settings that change the model, the data or the learning rate's
        schedule are refused then; `patience` may change: a run that stopped
        early continues under a larger one, as if it had had it from the
        start. A run whose training has finished (all `num_epochs`, or
        stopped early under this `patience`) and whose `model.keras` exists
        is not trained again: its model is loaded and its history returned.
        Delete `OUTPUT_DIR/checkpoints`, or choose another OUTPUT_DIR, to
        train anew.

        Args:
            num_epochs: passes over the training windows (at most).
            batch_size: windows per step.
            learning_rate: peak learning rate.
            num_warmup_steps: steps of linear warmup, at most a tenth of the
                training steps.
            sliding_window: window step as a fraction of the sequence length
                (the original's `prop_sliding_window`).
            mask_last_rate: share of windows that mask only their last item;
                None keeps `cloze_instances.DEFAULT_MASK_LAST_RATE`.
            patience: epochs without a better validation NDCG@10 before stopping.
            verbose: `keras.Model.fit`'s verbosity.

        Returns:
            The `History.history` dict of every epoch trained, resumed runs'
            included.

        Raises:
            ValueError: a checkpoint in OUTPUT_DIR was written with other
                settings (each differing one is named).
        """
        length = self.config["max_sequence_length"]
        windows = training_windows(self.split.train, length, max(1, int(sliding_window * length)))
        if mask_last_rate is None:
            mask_last_rate = DEFAULT_MASK_LAST_RATE
        steps_per_epoch = math.ceil(len(windows) / batch_size)
        steps = steps_per_epoch * num_epochs
        schedule = {
            "num_epochs": num_epochs,
            "learning_rate": learning_rate,
            "num_warmup_steps": num_warmup_steps,  # as asked: a refusal names what was given
        }
        if num_warmup_steps > (steps // 10 or 1):
            logging.info(
                "num_warmup_steps %d is more than a tenth of the %d training steps: %d instead.",
                num_warmup_steps,
                steps,
                steps // 10 or 1,
            )
            num_warmup_steps = steps // 10 or 1
        settings = self._training_settings(
            windows,
            data_order={
                "batch_size": batch_size,
                "sliding_window": sliding_window,
                "mask_last_rate": mask_last_rate,
            },
            schedule=schedule,
        )
        checkpoints = CheckpointManager(
            os.path.join(self.output_dir, CHECKPOINT_DIR), KEEP_CHECKPOINTS
        )
        best_weights = os.path.join(checkpoints.directory, BEST_WEIGHTS_FILE)
        resumed, history, stopping = self._resume_point(checkpoints, best_weights, settings)
        initial_epoch = 0 if resumed is None else resumed.step
        finished = resumed is not None and (
            initial_epoch >= num_epochs or _stopped_early(stopping, patience, initial_epoch)
        )
        if finished and self._model_saved_after(resumed):
            logging.info(
                "%s finished training after epoch %d of %d; loading its %s instead of training "
                "again (delete %s to train anew).",
                self.output_dir,
                initial_epoch,
                num_epochs,
                MODEL_FILE,
                checkpoints.directory,
            )
            self.model = None
            self.load_model()
            self._write_history(history)  # a kill after model.keras may have left it unwritten
            return history

        self.model = self.build_model()
        self.model.compile(
            optimizer=create_optimizer(
                learning_rate,
                num_train_steps=steps,
                num_warmup_steps=num_warmup_steps,
                global_clipnorm=CLIP_NORM,
            )
        )
        if resumed is not None:
            checkpoints.restore(self.model, resumed)
            logging.info(
                "Resuming training from %s, after epoch %d of %d.",
                resumed.weights_path,
                initial_epoch,
                num_epochs,
            )
        if not finished:
            if resumed is not None:
                _check_same_backend(resumed, settings)
            early_stopping = ResumableEarlyStopping(
                EARLY_STOPPING_METRIC, patience, best_weights, stopping
            )
            epoch_checkpoint = EpochCheckpoint(checkpoints, settings, early_stopping, history)
            callbacks = [
                ValidationRanking(self.split.validation_histories, self.split.validation_targets),
                early_stopping,
                epoch_checkpoint,
            ]
            dataset = self._training_epochs(
                windows, batch_size, range(initial_epoch, num_epochs), mask_last_rate
            )
            self.model.fit(
                without_autotuning_thread(dataset),
                initial_epoch=initial_epoch,
                epochs=num_epochs,
                steps_per_epoch=steps_per_epoch,  # each epoch's batches, one after the other
                callbacks=callbacks,
                verbose=verbose,
                shuffle=False,  # cloze_epochs shuffles
            )
            _check_not_diverged(epoch_checkpoint.diverged)
        self._save_trained_model(best_weights, history)
        return history

    def _training_settings(self, windows, data_order, schedule):
        """What a checkpoint must have been written with to resume, as its metadata reads back."""
        settings = {
            "model": {**self.config, "num_items": self.sequences.num_items},
            "data order": {
                "seed": self.seed,
                **data_order,
                "windows": len(windows),
                # Another log, or the same one read with other settings, cuts other windows.
                "windows_sha256": _windows_digest(windows),
            },
            "learning-rate schedule": schedule,
            # Dropout's random streams, restored on resume, are each backend's own.
            "backend": {"KERAS_BACKEND": keras.backend.backend()},
        }
        return json.loads(json.dumps(settings))

    def _model_saved_after(self, checkpoint):
        """Whether OUTPUT_DIR holds a model.keras written after `checkpoint`: this run's, not an older one's.

        A run whose checkpoints were deleted to train anew, stopped between its
        last checkpoint and its model.keras, would otherwise load the older run's.
        """
        path = os.path.join(self.output_dir, MODEL_FILE)
        if not os.path.exists(path):
            return False
        if os.path.getmtime(path) >= os.path.getmtime(checkpoint.weights_path):
            return True
        logging.warning(
            "%s is older than the checkpoint of epoch %d (another run's): this run's best "
            "weights replace it.",
            path,
            checkpoint.step,
        )
        return False

    def _resume_point(self, checkpoints, best_weights, settings):
        """The latest whole checkpoint (or None), its history and early-stopping state.

        Files a kill left half written are removed, and so are best weights
        that no checkpoint goes with (another run's).
        """
        if os.path.isdir(checkpoints.directory):
            checkpoints.remove_partial_files()
            if os.path.exists(partial_path(best_weights)):  # left by a kill while it was written
                os.remove(partial_path(best_weights))
        resumed = checkpoints.latest()
        if resumed is not None:
            _check_resumable(resumed, settings)
            return resumed, resumed.metadata["history"], resumed.metadata["early_stopping"]
        if os.path.exists(best_weights):  # another run's, whose checkpoints were deleted
            os.remove(best_weights)
        if os.path.exists(os.path.join(self.output_dir, MODEL_FILE)):
            logging.warning(
                "%s holds a %s but no checkpoints: training anew replaces it.",
                self.output_dir,
                MODEL_FILE,
            )
        return None, {}, None

    def _training_epochs(self, windows, batch_size, epochs, mask_last_rate):
        """The cloze batches of `epochs`, one epoch after the other."""
        length = self.config["max_sequence_length"]
        return cloze_epochs(
            windows,
            batch_size,
            epochs,
            mask_id=self.sequences.num_items + 1,
            max_sequence_length=length,
            mask_probability=self.config["mask_probability"],
            max_predictions=max(1, round(length * self.config["mask_probability"])),
            mask_last_rate=mask_last_rate,
            seed=self.seed,
        ).prefetch(2)

    def _save_trained_model(self, best_weights, history):
        """Saves the best epoch's model, its item ids, the history and its plot."""
        if os.path.exists(best_weights):
            self.model.load_weights(best_weights)
            logging.info("Restored the weights of the best epoch from %s.", best_weights)
        with atomic_file(os.path.join(self.output_dir, MODEL_FILE)) as path:
            self.model.save(path)
            # Before the model takes its place: a reader checks the ids against it.
            self.sequences.save_item_ids(
                os.path.join(self.output_dir, ITEM_IDS_FILE), model_file=path
            )
        self._write_history(history)

    def _write_history(self, history):
        """Writes OUTPUT_DIR/history.json and draws it to history.png."""
        self._write(HISTORY_FILE, json.dumps(history, indent=2))
        write_history_plot(self.output_dir)

    def load_model(self):
        """The trained model: this run's, else OUTPUT_DIR/model.keras (safe mode).

        A saved model keeps the item ids it was trained with (item_ids.json):
        the log is renumbered to them, whatever ids its own frequencies give.
        """
        if self.model is None:
            path = os.path.join(self.output_dir, MODEL_FILE)
            if not os.path.exists(path):
                raise ValueError(f"No trained model at {path}: run with --do_train first.")
            ids_path = os.path.join(self.output_dir, ITEM_IDS_FILE)
            if not os.path.exists(ids_path):
                raise ValueError(f"{path} has no {ITEM_IDS_FILE} beside it: train again.")
            item_ids = load_item_ids(ids_path, model_file=path)
            self.sequences = self.sequences.renumbered(item_ids, source=ids_path)
            self.split = LeaveOneOutSplit.from_sequences(self.sequences.sequences)
            self.model = keras.saving.load_model(path, safe_mode=True)
        if self.model.num_items != self.sequences.num_items:
            raise ValueError(
                f"The model has {self.model.num_items} items, the log {self.sequences.num_items}: "
                f"{self.output_dir} was trained on another log or --min_interactions."
            )
        return self.model

    def evaluate(self, batch_size=256):
        """The trained model's test metrics, also written to OUTPUT_DIR/eval_results.json.

        Returns:
            `test_metrics` of the model.
        """
        self.check_negatives()
        model = self.load_model()
        results = self.test_metrics(lambda histories: model.next_item_scores(histories, batch_size))
        self._write(EVAL_RESULTS_FILE, json.dumps(results, indent=2))
        return results

    def test_metrics(self, score_histories):
        """Metrics of each user's last item after the rest of the history.

        Args:
            score_histories: histories -> scores `[users, num_items + 1]`, as
                `Bert4Rec.next_item_scores` or a baseline of
                `bert_keras.recommendation.baselines`.

        Returns:
            A dict: `test/full/<metric>`, `test/pop<N>/<metric>` (metrics of
            `ranking_metrics`), `users` and `items`.
        """
        results = self.rank(score_histories, self.split.test_histories, self.split.test_targets)
        results = {f"test/{name}": value for name, value in results.items()}
        results.update(users=len(self.split.test_targets), items=self.sequences.num_items)
        return results

    def rank(self, score_histories, histories, targets, chunk=1024):
        """Full-ranking and popularity-sampled metrics of `targets` after `histories`."""
        counts = np.bincount(
            np.concatenate(self.sequences.sequences), minlength=self.sequences.num_items + 1
        ).astype("float64")
        counts[0] = 0.0
        full, sampled = [], []
        for start in range(0, len(targets), chunk):
            chunk_histories = histories[start : start + chunk]
            chunk_targets = targets[start : start + chunk]
            negatives = popularity_negatives(
                [self.sequences.sequences[start + row] for row in range(len(chunk_targets))],
                chunk_targets,
                counts,
                self.num_negatives,
                seed=self.seed + start,
            )
            ranks = next_item_ranks(
                score_histories(chunk_histories), chunk_histories, chunk_targets, negatives
            )
            full.append(ranks[0])
            sampled.append(ranks[1])
        results = {f"full/{k}": v for k, v in ranking_metrics(np.concatenate(full)).items()}
        if self.num_negatives:
            for name, value in ranking_metrics(np.concatenate(sampled)).items():
                results[f"pop{self.num_negatives}/{name}"] = value
        return results

    def predict(self, top_k=10, batch_size=256):
        """Each user's `top_k` next items after the whole history, unseen ones only.

        Writes OUTPUT_DIR/predictions.tsv: `user`, `rank`, `item`, `score`
        with raw user and item ids (fewer rows for a user who has seen all but
        fewer than `top_k` items). Returns the file's path.
        """
        model = self.load_model()
        items, scores = model.recommend(
            self.sequences.sequences, top_k=top_k, batch_size=batch_size
        )
        rows = [("user", "rank", "item", "score")]
        for user, row_items, row_scores in zip(self.sequences.user_ids, items, scores):
            for rank, (item, score) in enumerate(zip(row_items, row_scores), start=1):
                if item == PAD_ID:
                    break
                rows.append((user, rank, self.sequences.item_ids[item - 1], f"{score:.6g}"))
        text = io.StringIO()
        # Quoted where an id holds a tab, a newline or a quote, as csv readers expect.
        csv.writer(text, delimiter="\t", lineterminator="\n").writerows(rows)
        return self._write(PREDICTIONS_FILE, text.getvalue().rstrip("\n"))

    def _write(self, name, text):
        path = os.path.join(self.output_dir, name)
        write_text(path, text + "\n")
        return path


class ValidationRanking(keras.callbacks.Callback):
    """Adds the validation targets' full-ranking metrics to each epoch's logs.

    Logged as `val_full/hr@10`, `val_full/ndcg@10`, ... so that
    `keras.callbacks.EarlyStopping` can monitor them.

    Args:
        histories: per user, the items before the validation target.
        targets: the validation item of each user.
        batch_size: users per forward pass.
    """

    def __init__(self, histories, targets, batch_size=256):
        super().__init__()
        self.histories = histories
        self.targets = np.asarray(targets)
        self.batch_size = batch_size

    def on_epoch_end(self, epoch, logs=None):
        scores = self.model.next_item_scores(self.histories, self.batch_size)
        full, _ = next_item_ranks(
            scores, self.histories, self.targets, np.zeros((len(self.targets), 0), "int64")
        )
        for name, value in ranking_metrics(full).items():
            logs[f"val_full/{name}"] = value


class ResumableEarlyStopping(keras.callbacks.EarlyStopping):
    """`EarlyStopping` (mode "max") that starts from a saved state and keeps its best weights in a file.

    Keras' `restore_best_weights` holds the best epoch's weights in memory,
    which a killed process loses; here they are written (atomically) to
    `best_weights_path` whenever the monitored value improves. `state()`
    and the `state` argument carry the best value, its epoch and the epochs
    waited across processes. Restoring the weights at the end is the
    caller's (`RecommendationRun.train` loads the file).

    Args:
        monitor: the logged value to maximise.
        patience: epochs without improvement before training stops.
        best_weights_path: where the best epoch's weights are written.
        state: a `state()` of an earlier run, or None to start afresh.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "best.weights.h5")
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    >>> stopping = ResumableEarlyStopping("score", 1, path, {"best": 0.5, "best_epoch": 2, "wait": 0})
    >>> stopping.set_model(model)
    >>> stopping.on_train_begin()
    >>> stopping.on_epoch_end(3, {"score": 0.7})
    >>> stopping.state(), os.path.exists(path)
    ({'best': 0.7, 'best_epoch': 3, 'wait': 0}, True)
    >>> stopping.on_epoch_end(4, {"score": 0.6})
    >>> stopping.state(), model.stop_training
    ({'best': 0.7, 'best_epoch': 3, 'wait': 1}, True)
    """

    def __init__(self, monitor, patience, best_weights_path, state=None):
        super().__init__(monitor=monitor, mode="max", patience=patience)
        self.best_weights_path = best_weights_path
        self.initial_state = state

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        if self.initial_state is not None:
            self.best = self.initial_state["best"]
            self.best_epoch = self.initial_state["best_epoch"]
            self.wait = self.initial_state["wait"]

    def on_epoch_end(self, epoch, logs=None):
        best_before = self.best
        super().on_epoch_end(epoch, logs)
        if self.best_epoch == epoch and self.best is not best_before:
            with atomic_file(self.best_weights_path) as path:
                self.model.save_weights(path)

    def state(self):
        """The best value (None before any), its epoch (0-based) and the epochs waited since."""
        best = None if self.best is None else float(self.best)
        return {"best": best, "best_epoch": int(self.best_epoch), "wait": int(self.wait)}


class EpochCheckpoint(keras.callbacks.Callback):
    """Writes a checkpoint after each epoch, with what a resumed `RecommendationRun.train` needs.

    Its metadata: `settings` (checked on resume), `history` (the epochs'
    logs so far, this run's appended to `history`), and `early_stopping`
    (`ResumableEarlyStopping.state`). Put it after the callbacks that add
    to the logs or stop training. The checkpoint's step is the number of
    epochs done.

    Args:
        manager: a `CheckpointManager`.
        settings: a JSON-able dict stored with every checkpoint.
        early_stopping: the run's `ResumableEarlyStopping`.
        history: the history of the epochs before this run's; appended to.

    Example:
    >>> import tempfile
    >>> manager = CheckpointManager(tempfile.mkdtemp())
    >>> stopping = ResumableEarlyStopping("loss", 5, manager.directory + "/best.weights.h5")
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> _ = model.fit(np.zeros((4, 2)), np.zeros(4), epochs=2, verbose=0,
    ...               callbacks=[stopping, EpochCheckpoint(manager, {}, stopping, {})])
    >>> latest = manager.latest()
    >>> latest.step, len(latest.metadata["history"]["loss"]), latest.metadata["early_stopping"]
    (2, 2, {'best': 0.0, 'best_epoch': 0, 'wait': 1})
    """

    def __init__(self, manager, settings, early_stopping, history):
        super().__init__()
        self.manager = manager
        self.settings = settings
        self.early_stopping = early_stopping
        self.history = history
        self.diverged = None  # (epoch, loss) where the training loss became NaN or infinite

    def on_epoch_end(self, epoch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(loss):
            self.diverged = (epoch + 1, float(loss))
            self.model.stop_training = True  # and no checkpoint of weights that are not numbers
            return
        for name, value in (logs or {}).items():
            self.history.setdefault(name, []).append(float(value))
        metadata = {
            "settings": self.settings,
            "history": self.history,
            "early_stopping": self.early_stopping.state(),
        }
        self.manager.save(self.model, epoch + 1, metadata)


def _check_not_diverged(diverged):
    """Raises where `EpochCheckpoint` saw the training loss become NaN or infinite."""
    if diverged is None:
        return
    epoch, loss = diverged
    raise ValueError(
        f"The training loss is {loss} in epoch {epoch}: the run diverged, so no model is saved "
        "(the checkpoints keep the epochs before it). A lower --learning_rate may train."
    )


def _check_same_backend(checkpoint, settings):
    """Refuses to train on from `checkpoint` under another backend, whose dropout streams differ.

    A finished run's model loads on any backend: this is checked only where
    training goes on.
    """
    saved = checkpoint.metadata["settings"].get("backend")
    differences = [] if saved is None else differing_values(saved, settings["backend"])
    if differences:
        raise ValueError(
            f"{checkpoint.weights_path} was written with another backend: "
            + "; ".join(differences)
            + ". A resumed run continues dropout's random streams, which are each backend's "
            "own; resume it with that KERAS_BACKEND, choose another output_dir, or delete "
            f"{os.path.dirname(checkpoint.weights_path)} to train anew."
        )


def _check_resumable(checkpoint, settings):
    """Refuses to resume `checkpoint` under settings other than its own, naming each that differs."""
    if "settings" not in checkpoint.metadata:
        raise ValueError(
            f"{checkpoint.weights_path} is not a BERT4Rec checkpoint (another program, "
            "tasks.pretrain say, wrote it into this output_dir); choose another output_dir."
        )
    problems = []
    for what, values in settings.items():
        if what == "backend" or what not in checkpoint.metadata["settings"]:
            continue  # training on is checked by `_check_same_backend`; an older checkpoint's
        saved = checkpoint.metadata["settings"][what]
        differences = differing_values(saved, values)
        if what == "data order" and saved["windows_sha256"] != values["windows_sha256"]:
            differences = [d for d in differences if not d.startswith("windows_sha256 ")] + [
                "other training windows (the log, --min_interactions, --max_sequence_length "
                "or --sliding_window changed)"
            ]
        if differences:
            problems.append(f"another {what}: " + "; ".join(differences))
    if problems:
        raise ValueError(
            f"{checkpoint.weights_path} was written with " + "; and ".join(problems) + ". "
            "Resuming needs the same settings; choose another output_dir, or delete "
            f"{os.path.dirname(checkpoint.weights_path)}, to train anew."
        )


def _stopped_early(state, patience, epochs_done):
    """Whether Keras' `EarlyStopping` with `patience` stops after the state's epoch.

    It stops once `wait` reaches `patience`, after a second epoch or later;
    `wait` counts epochs since the best, so it is 0 after an improvement,
    when training goes on even with a patience of 0.
    """
    return epochs_done >= 2 and state["wait"] >= max(patience, 1)


def _windows_digest(windows):
    digest = hashlib.sha256()
    for window in windows:
        digest.update(np.asarray(window, "int64").tobytes())
        digest.update(b"|")
    return digest.hexdigest()
