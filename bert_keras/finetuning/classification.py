"""One fine-tuning run for sentence(-pair) classification: data, model, metrics, files."""

import glob
import os
import time

import numpy as np
from absl import logging

from bert_keras.data.classification_dataset import classification_dataset
from bert_keras.data.classification_dataset import classification_features
from bert_keras.data.glue import GLUE_TASKS
from bert_keras.data.glue import glue_path
from bert_keras.data.glue import read_generic
from bert_keras.data.glue import read_glue
from bert_keras.evaluation.glue_metrics import accuracy
from bert_keras.evaluation.glue_metrics import glue_metrics
from bert_keras.finetuning.run import FineTuningRun
from bert_keras.finetuning.run import seconds_since
from bert_keras.models.bert_classifier import BertClassifier
from bert_keras.text.preprocessor import BertPreprocessor


def in_checkpoint_order(data_labels, checkpoint_labels):
    """The data's class names in the order of a checkpoint head's names for them, or None.

    A head trained elsewhere may order the same classes otherwise, or spell
    them in other case (as transformers' run_glue, names match ignoring case
    where that tells the data's classes apart); None where the head names
    other classes.

    Example:
    >>> in_checkpoint_order(["negative", "positive"], ["POSITIVE", "NEGATIVE"])
    ['positive', 'negative']
    >>> in_checkpoint_order(["negative", "positive"], ["LABEL_0", "LABEL_1"]) is None
    True
    """
    if sorted(data_labels) == sorted(checkpoint_labels):
        return list(checkpoint_labels)
    by_lower_case = {name.lower(): name for name in data_labels}
    if len(by_lower_case) != len(data_labels):
        return None
    if sorted(by_lower_case) != sorted(name.lower() for name in checkpoint_labels):
        return None
    return [by_lower_case[name.lower()] for name in checkpoint_labels]


class ClassificationRun(FineTuningRun):
    """Reads a task, builds a `BertClassifier` from a checkpoint, trains, scores.

    Args:
        task_name: a GLUE task name (see `bert_keras.data.glue.GLUE_TASKS`)
            or "csv" for `{train,dev,test}.{csv,tsv}` with a header.
        data_dir: directory of the task's files.
        init_checkpoint: checkpoint directory; its vocab.txt and casing are
            used. A classifier head of the right size in it is loaded too.
        output_dir: eval_results.json and predictions go here.
        max_seq_length: tokens per packed input.
        seed: seeds Keras, shuffling and dropout.
        execution: an `Execution` (see `FineTuningRun`).
        bucket_by_length: batch training texts by length (see `FineTuningRun`).

    Example:
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> import tempfile
    >>> checkpoint, data = tempfile.mkdtemp() + "/tiny", tempfile.mkdtemp()
    >>> vocab = data + "/vocab.txt"
    >>> _ = open(vocab, "w").write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "ok", "no"]))
    >>> BertBackbone(7, 1, 2, 8, 16).save_to_preset(checkpoint, vocabulary_file=vocab)
    >>> for split in ("train", "dev"):
    ...     _ = open(f"{data}/{split}.csv", "w").write("text,label\\nok,yes\\nno,no\\n")
    >>> run = ClassificationRun("csv", data, checkpoint, tempfile.mkdtemp())
    >>> _ = run.train(batch_size=2, learning_rate=1e-3, num_epochs=1, verbose=0)
    >>> sorted(run.evaluate("dev", batch_size=2))
    ['accuracy', 'examples', 'seconds']
    """

    def __init__(
        self,
        task_name,
        data_dir,
        init_checkpoint,
        output_dir,
        max_seq_length=None,
        **options,
    ):
        self.task_name = task_name.lower()
        if self.task_name not in GLUE_TASKS and self.task_name != "csv":
            raise ValueError(
                f"Unknown task_name {task_name!r}; known: {sorted(GLUE_TASKS)} or 'csv'."
            )
        super().__init__(data_dir, init_checkpoint, output_dir, max_seq_length, **options)
        checkpoint_labels = self.checkpoint_label_names("classifier")
        if self._has("train"):
            data_labels = self._data_label_names()  # () for a regression
        elif checkpoint_labels:  # a fine-tuned model, to score or predict with
            data_labels = tuple(checkpoint_labels)
        else:
            raise FileNotFoundError(
                f"No train.csv or train.tsv in {data_dir}, and {init_checkpoint} names no "
                "classes (id2label): a csv task's labels come from one of them."
            )
        in_head_order = checkpoint_labels and in_checkpoint_order(data_labels, checkpoint_labels)
        if checkpoint_labels and data_labels and not in_head_order:
            logging.warning(
                "%s's classifier head names the classes %s, the data %s: its outputs are "
                "taken in the data's order, as transformers' run_glue takes them.",
                init_checkpoint,
                checkpoint_labels,
                list(data_labels),
            )
        self.label_names = tuple(in_head_order or data_labels)
        # Splits whose labels may name classes train lacks (GLUE's test files have no labels).
        labelled = ("dev",) if self.task_name in GLUE_TASKS else ("dev", "test")
        for split in labelled:
            if self._has_file(split):
                self._read(split)  # a label that train lacks is an error now, not after training
        self.preprocessor = BertPreprocessor(self.tokenizer, sequence_length=self.max_seq_length)
        num_classes = max(len(self.label_names), 1)
        self.model = self.build_model(
            lambda backbone: BertClassifier(backbone, num_classes=num_classes), "classifier"
        )

    def _data_label_names(self):
        """The task's classes: GLUE's by name, a csv task's from its train file."""
        if self.task_name in GLUE_TASKS:
            return GLUE_TASKS[self.task_name].labels
        return self._read_labelled("train", None).label_names

    def _has(self, split):
        """Whether the split can be read: a GLUE task's always names its classes."""
        return self.task_name in GLUE_TASKS or self._has_file(split)

    def _has_file(self, split):
        """Whether the split's file is there (a GLUE task's files are named by the task)."""
        if self.task_name in GLUE_TASKS:
            return os.path.isfile(glue_path(self.task_name, self.data_dir, split))
        return bool(self._generic_path(split))

    def _generic_path(self, split):
        matches = sorted(glob.glob(os.path.join(self.data_dir, f"{split}.[ct]sv")))
        return matches[0] if matches else None

    def _read(self, split, limit=None):
        """A split's examples, their labels ids of `label_names`."""
        return self._read_labelled(split, self.label_names, limit)

    def _read_labelled(self, split, label_names, limit=None):
        if self.task_name in GLUE_TASKS:
            return read_glue(self.task_name, self.data_dir, split, label_names, limit=limit)
        path = self._generic_path(split)
        if path is None:
            raise FileNotFoundError(f"No {split}.csv or {split}.tsv in {self.data_dir}.")
        return read_generic(path, label_names=label_names, limit=limit)

    def train(
        self, batch_size, learning_rate, num_epochs, warmup_proportion=0.1, limit=None, verbose=2
    ):
        """Fine-tunes on the train split with the paper's AdamW recipe; returns the history.

        The model, with its label names, goes to OUTPUT_DIR/export (see
        `FineTuningRun.export`).
        """
        examples = self._read("train", limit=limit)
        dataset = classification_dataset(
            self.preprocessor,
            examples,
            batch_size,
            shuffle=True,
            seed=self.seed,
            **self.training_batching(num_epochs),
        )
        history = self.fit(
            self.model,
            dataset,
            len(examples),
            batch_size,
            learning_rate,
            num_epochs,
            warmup_proportion,
            verbose,
        )
        self.export(
            self.model,
            "classifier",
            label_names=self.label_names or None,
            task_config={"text_pair": examples.texts_b is not None},
        )
        return history

    def evaluate(self, split, batch_size):
        """Scores `split` with the task's GLUE metrics; writes eval_results.json."""
        start = time.perf_counter()
        examples = self._read(split)
        if None in examples.labels:
            raise ValueError(
                f"The {split} file of {self.data_dir} has no labels to score; --do_predict "
                "writes predictions for unlabelled examples."
            )
        predictions = self._predict_examples(examples, batch_size)
        if self.label_names:
            results = (
                glue_metrics(self.task_name, examples.labels, predictions)
                if self.task_name in GLUE_TASKS
                else {"accuracy": accuracy(examples.labels, predictions)}
            )
        else:
            results = glue_metrics("sts-b", examples.labels, predictions)
        results = {**results, "examples": len(examples), "seconds": seconds_since(start)}
        self.write_results(results)
        self._write_predictions(split, predictions)
        return results

    def predict(self, split, batch_size):
        """Writes predictions for an unlabelled split."""
        examples = self._read(split)
        self._write_predictions(split, self._predict_examples(examples, batch_size))

    def _predict_examples(self, examples, batch_size):
        logits = self.predict_features(
            self.model, classification_features(self.preprocessor, examples), batch_size
        )
        return logits[:, 0] if not self.label_names else np.argmax(logits, axis=-1)

    def _write_predictions(self, split, predictions):
        names = self.label_names
        lines = ["index\tprediction"] + [
            f"{i}\t{names[p] if names else float(p)}" for i, p in enumerate(predictions)
        ]
        self.write_file(f"predictions_{split}.tsv", "\n".join(lines) + "\n")
