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
`predictions.tsv`, each written whole.
"""

import csv
import io
import json
import math
import os

import keras
import numpy as np

from bert_keras.atomic_files import atomic_file
from bert_keras.atomic_files import write_text
from bert_keras.data.cloze_instances import cloze_dataset
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
from bert_keras.training.history_plots import write_history_plot
from bert_keras.training.optimizers import create_optimizer

MODEL_FILE = "model.keras"
ITEM_IDS_FILE = "item_ids.json"
EVAL_RESULTS_FILE = "eval_results.json"
PREDICTIONS_FILE = "predictions.tsv"
HISTORY_FILE = "history.json"
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
        num_negatives: popularity-sampled negatives per evaluated user.
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
        unseen = [self.sequences.num_items - len(set(s.tolist())) for s in self.sequences.sequences]
        user = int(np.argmin(unseen))
        if unseen[user] < self.num_negatives:
            raise ValueError(
                f"num_negatives={self.num_negatives} negatives cannot be drawn for user "
                f"{self.sequences.user_ids[user]!r}, who has not seen only {unseen[user]} of the "
                f"{self.sequences.num_items} items: lower --num_negatives to at most {unseen[user]}."
            )

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
        """Fits a new model; keeps the epoch with the best validation NDCG@10.

        Args:
            num_epochs: passes over the training windows (at most).
            batch_size: windows per step.
            learning_rate: peak learning rate.
            num_warmup_steps: steps of linear warmup.
            sliding_window: window step as a fraction of the sequence length
                (the original's `prop_sliding_window`).
            mask_last_rate: share of windows that mask only their last item;
                None keeps `cloze_instances.DEFAULT_MASK_LAST_RATE`.
            patience: epochs without a better validation NDCG@10 before stopping.
            verbose: `keras.Model.fit`'s verbosity.

        Returns:
            The `History.history` dict.
        """
        length = self.config["max_sequence_length"]
        windows = training_windows(self.split.train, length, max(1, int(sliding_window * length)))
        max_predictions = max(1, round(length * self.config["mask_probability"]))
        extra = {} if mask_last_rate is None else {"mask_last_rate": mask_last_rate}
        dataset = (
            cloze_dataset(
                windows,
                mask_id=self.sequences.num_items + 1,
                max_sequence_length=length,
                mask_probability=self.config["mask_probability"],
                max_predictions=max_predictions,
                seed=self.seed,
                **extra,
            )
            .shuffle(len(windows), seed=self.seed, reshuffle_each_iteration=True)
            .batch(batch_size)
            .prefetch(2)
        )
        steps = math.ceil(len(windows) / batch_size) * num_epochs
        self.model = self.build_model()
        self.model.compile(
            optimizer=create_optimizer(
                learning_rate,
                num_train_steps=steps,
                num_warmup_steps=min(num_warmup_steps, steps // 10 or 1),
                global_clipnorm=CLIP_NORM,
            )
        )
        callbacks = [
            ValidationRanking(self.split.validation_histories, self.split.validation_targets),
            keras.callbacks.EarlyStopping(
                EARLY_STOPPING_METRIC, mode="max", patience=patience, restore_best_weights=True
            ),
        ]
        history = self.model.fit(
            without_autotuning_thread(dataset),
            epochs=num_epochs,
            callbacks=callbacks,
            verbose=verbose,
            shuffle=False,  # the windows' pipeline shuffles
        )
        with atomic_file(os.path.join(self.output_dir, MODEL_FILE)) as path:
            self.model.save(path)
            # Before the model takes its place: a reader checks the ids against it.
            self.sequences.save_item_ids(
                os.path.join(self.output_dir, ITEM_IDS_FILE), model_file=path
            )
        self._write(HISTORY_FILE, json.dumps(_plain(history.history), indent=2))
        write_history_plot(self.output_dir)
        return history.history

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


def _plain(history):
    return {name: [float(value) for value in values] for name, values in history.items()}
