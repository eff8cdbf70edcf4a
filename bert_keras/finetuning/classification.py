"""One fine-tuning run for sentence(-pair) classification: data, model, metrics, files."""

import csv
import glob
import io
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
from bert_keras.data.input_file_error import InputFileError
from bert_keras.evaluation.glue_metrics import accuracy
from bert_keras.evaluation.glue_metrics import glue_metrics
from bert_keras.finetuning.run import STEP_FLAGS
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
        splits: the splits the program's steps read ("train", "dev" and
            "test" for --do_train, --do_eval and --do_predict): their files
            are checked when the run is built, before any training, and
            without "train" the checkpoint's classifier head must fit the
            data. None: the files there are checked, and scoring a head with
            random weights is only warned about.

    A checkpoint's 1-output classifier head makes a regression where no
    train file names classes, as transformers takes a head of num_labels 1.
    `label_names` are the classes in the model's output order (empty for a
    regression); `head_loaded` says whether the checkpoint's head fit them.

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
        splits=None,
        **options,
    ):
        self.task_name = task_name.lower()
        if self.task_name not in GLUE_TASKS and self.task_name != "csv":
            raise ValueError(
                f"Unknown task_name {task_name!r}; known: {sorted(GLUE_TASKS)} or 'csv'."
            )
        super().__init__(data_dir, init_checkpoint, output_dir, max_seq_length, **options)
        self.splits = None if splits is None else tuple(splits)
        self._examples = {}  # split -> its examples, read whole (`_read`)
        for split in self.splits or ():
            if not self._has_file(split):
                raise ValueError(f"{STEP_FLAGS[split]} reads {self._missing_file(split)}.")
        head = self.checkpoint.head_weights.get("classifier")
        head_outputs = None if head is None else head["bias"].shape[-1]
        head_names = self.checkpoint_label_names("classifier")  # as messages name them
        if head_names:  # run_glue names a csv task's integer classes by ints
            head_names = [str(name) for name in head_names]
        checkpoint_labels = head_names
        if head_names and head_names == [f"LABEL_{index}" for index in range(len(head_names))]:
            # transformers' names for classes no one named: the class ids, as run_glue reads them
            checkpoint_labels = [str(index) for index in range(len(head_names))]
        # Whether the csv files have a text_pair column: the train file's, or an export's.
        self._text_pair, self._text_pair_source = None, None
        if self._has("train"):
            data_labels = self._data_label_names()  # () for a regression
        elif head_outputs == 1:  # a regression, as transformers takes a head of num_labels 1
            data_labels = ()
        elif checkpoint_labels:  # a fine-tuned model, to score or predict with
            data_labels = tuple(checkpoint_labels)
        else:
            raise FileNotFoundError(
                f"No train.csv or train.tsv in {data_dir}, and {init_checkpoint} names no "
                "classes (id2label) and has no 1-output (regression) classifier head: a csv "
                "task's labels come from one of them."
            )
        if not self._has("train"):  # an export records whether it reads text pairs
            self._text_pair = self.checkpoint.task_config.get("text_pair")
            self._text_pair_source = init_checkpoint
        in_head_order = checkpoint_labels and in_checkpoint_order(data_labels, checkpoint_labels)
        self.label_names = tuple(in_head_order or data_labels)
        num_classes = max(len(self.label_names), 1)
        self.head_loaded = head_outputs == num_classes
        self._trained = False
        if self.head_loaded and checkpoint_labels and data_labels and not in_head_order:
            logging.warning(
                "%s's classifier head names the classes %s, the data %s: its outputs are "
                "taken in the data's order, as transformers' run_glue takes them.",
                init_checkpoint,
                head_names,
                list(data_labels),
            )
        self._check_head(init_checkpoint, head_outputs, head_names)
        # Read now, so that a bad label or column is an error before training, not after it.
        for split in self._checked_splits():
            examples = self._read(split)
            if split == "dev" and self.splits is not None and None in examples.labels:
                raise InputFileError(
                    f"--do_eval scores {self._expected_file(split)}, which has no label column."
                )
        self.preprocessor = BertPreprocessor(self.tokenizer, sequence_length=self.max_seq_length)
        self.model = self.build_model(
            lambda backbone: BertClassifier(backbone, num_classes=num_classes), "classifier"
        )

    def _check_head(self, init_checkpoint, head_outputs, checkpoint_labels):
        """Warns that a checkpoint head of another size is dropped; refuses to score a new one.

        A new head has random weights: scoring it without training (the
        steps asked for have no "train") is almost always a mistake.
        """
        scores_only = self.splits is not None and "train" not in self.splits
        if head_outputs is None:
            if scores_only:
                raise ValueError(
                    f"{init_checkpoint} has no classifier head, so --do_eval and --do_predict "
                    "without --do_train would score one with random weights; --do_train "
                    "trains one, or give a fine-tuned checkpoint."
                )
            return
        if self.head_loaded:
            return
        head = f"{init_checkpoint}'s classifier head has {head_outputs} outputs"
        if checkpoint_labels:
            head += f" (classes {checkpoint_labels})"
        data = (
            f"the data has {len(self.label_names)} classes {list(self.label_names)}"
            if self.label_names
            else "the data is a regression (1 output)"
        )
        if scores_only:
            raise ValueError(
                f"{head}, but {data}: it is not loaded, and --do_eval and --do_predict without "
                "--do_train would score a new one with random weights."
            )
        logging.warning("%s, but %s: it is not loaded; the run trains a new one.", head, data)

    def _checked_splits(self):
        """The dev and test splits read when the run is built: those asked for, or those there."""
        if self.splits is not None:
            return [split for split in ("dev", "test") if split in self.splits]
        # GLUE's test files have no labels; a csv test file's may name classes train lacks.
        labelled = ("dev",) if self.task_name in GLUE_TASKS else ("dev", "test")
        return [split for split in labelled if self._has_file(split)]

    def _data_label_names(self):
        """The task's classes: GLUE's by name, a csv task's from its train file."""
        if self.task_name in GLUE_TASKS:
            return GLUE_TASKS[self.task_name].labels
        examples = self._read_labelled("train", None)
        self._text_pair = examples.texts_b is not None
        self._text_pair_source = self._generic_path("train")
        if len(examples.label_names) == 1:
            raise InputFileError(
                f"{self._expected_file('train')}: every example's label is "
                f"{examples.label_names[0]!r}; a classifier needs two classes or more (numbers, "
                "one with a fractional part, make a regression)."
            )
        return examples.label_names

    def _has(self, split):
        """Whether the split can be read: a GLUE task's always names its classes."""
        return self.task_name in GLUE_TASKS or self._has_file(split)

    def _has_file(self, split):
        """Whether the split's file is there (a GLUE task's files are named by the task)."""
        if self.task_name in GLUE_TASKS:
            return os.path.isfile(glue_path(self.task_name, self.data_dir, split))
        return bool(self._generic_path(split))

    def _expected_file(self, split):
        """The split's file (for messages)."""
        if self.task_name in GLUE_TASKS:
            return glue_path(self.task_name, self.data_dir, split)
        return self._generic_path(split)

    def _missing_file(self, split):
        """What a missing split's file would be called (for messages)."""
        if self.task_name in GLUE_TASKS:
            return f"{self._expected_file(split)}, which is not there"
        return f"{split}.csv or {split}.tsv, but {self.data_dir} has neither"

    def _generic_path(self, split):
        matches = sorted(glob.glob(os.path.join(glob.escape(self.data_dir), f"{split}.[ct]sv")))
        if len(matches) > 1:
            raise ValueError(
                f"{self.data_dir} holds both {split}.csv and {split}.tsv: keep the one to read."
            )
        return matches[0] if matches else None

    def _read(self, split, limit=None):
        """A split's examples, their labels ids of `label_names`; a whole split is read once.

        The run reads the dev and test files when it is built, to check them
        before training; scoring then takes those examples.
        """
        if limit is not None:
            return self._read_labelled(split, self.label_names, limit)
        if split not in self._examples:
            self._examples[split] = self._read_labelled(split, self.label_names)
        return self._examples[split]

    def _read_labelled(self, split, label_names, limit=None):
        if self.task_name in GLUE_TASKS:
            return read_glue(self.task_name, self.data_dir, split, label_names, limit=limit)
        path = self._generic_path(split)
        if path is None:
            raise FileNotFoundError(f"No {split}.csv or {split}.tsv in {self.data_dir}.")
        examples = read_generic(
            path, label_names=label_names, limit=limit, labelled=split != "test"
        )
        has_pair = examples.texts_b is not None
        if self._text_pair is not None and has_pair != self._text_pair:
            raise InputFileError(
                f"{path}:1: the header {'names' if has_pair else 'has no'} text_pair column, "
                f"but {self._text_pair_source} {'has' if self._text_pair else 'has none'}: "
                "a model reads text pairs or single texts, not both."
            )
        return examples

    def train(
        self, batch_size, learning_rate, num_epochs, warmup_proportion=0.1, limit=None, verbose=2
    ):
        """Fine-tunes on the train split with the paper's AdamW recipe; returns the history.

        The model, with its label names, goes to OUTPUT_DIR/export (see
        `FineTuningRun.export`).
        """
        examples = self._read("train", limit=limit)
        self._trained = True
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
        self.warn_if_head_untrained("classifier")
        examples = self._read(split)
        if None in examples.labels:
            raise InputFileError(
                f"The {split} file of {self.data_dir} has no labels to score; --do_predict "
                "writes predictions for unlabelled examples."
            )
        predictions = self._predict_examples(examples, batch_size)
        if self.label_names and self.task_name in GLUE_TASKS:
            results = glue_metrics(
                self.task_name,
                self._in_glue_order(examples.labels),
                self._in_glue_order(predictions),
            )
        elif self.label_names:
            results = {"accuracy": accuracy(examples.labels, predictions)}
        else:
            results = glue_metrics("sts-b", examples.labels, predictions)
        results = {**results, "examples": len(examples), "seconds": seconds_since(start)}
        results = self.write_results(results)
        self._write_predictions(split, predictions)
        return results

    def _in_glue_order(self, class_ids):
        """`class_ids` of the head renumbered in the GLUE task's order of its labels.

        A head fine-tuned elsewhere may list MRPC's classes as ("1", "0");
        GLUE's F1 is the F1 of the class named "1" whatever its head id.
        """
        glue_labels = GLUE_TASKS[self.task_name].labels
        glue_ids = np.array([glue_labels.index(name) for name in self.label_names])
        return glue_ids[np.asarray(class_ids, int)]

    def predict(self, split, batch_size):
        """Writes predictions for an unlabelled split."""
        self.warn_if_head_untrained("classifier")
        examples = self._read(split)
        self._write_predictions(split, self._predict_examples(examples, batch_size))

    def _predict_examples(self, examples, batch_size):
        logits = self.predict_features(
            self.model, classification_features(self.preprocessor, examples), batch_size
        )
        return logits[:, 0] if not self.label_names else np.argmax(logits, axis=-1)

    def _write_predictions(self, split, predictions):
        """predictions_{split}.tsv; a class name holding a tab or a line break is quoted."""
        names = self.label_names
        rows = [("index", "prediction")] + [
            (i, names[p] if names else float(p)) for i, p in enumerate(predictions)
        ]
        text = io.StringIO()
        csv.writer(text, delimiter="\t", lineterminator="\n").writerows(rows)
        self.write_file(f"predictions_{split}.tsv", text.getvalue())
