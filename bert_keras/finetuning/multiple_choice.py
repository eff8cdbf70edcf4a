"""One fine-tuning run for multiple choice (SWAG): data, model, accuracy, files."""

import os
import time

import numpy as np
import tensorflow as tf

from bert_keras.data.input_file_error import InputFileError
from bert_keras.data.length_batching import batch_by_length
from bert_keras.data.swag import SPLIT_FILES
from bert_keras.data.swag import read_swag
from bert_keras.data.swag import split_path
from bert_keras.evaluation.glue_metrics import accuracy
from bert_keras.finetuning.run import FineTuningRun
from bert_keras.finetuning.run import seconds_since
from bert_keras.models.bert_multiple_choice import BertMultipleChoice
from bert_keras.text.preprocessor import BertPreprocessor

_PACK_BATCH = 1024  # context-choice pairs per preprocessor call


class MultipleChoiceRun(FineTuningRun):
    """Reads SWAG CSV files, builds a `BertMultipleChoice` from a checkpoint, trains, scores.

    Each choice is packed as `[CLS] context [SEP] choice [SEP]` (the
    original run_swag.py's pairing; pairs too long lose tokens from the end
    of the longer side first). The number of choices is the training file's
    (the dev file's without one). A checkpoint head named "classifier" with
    one output (Hugging Face `BertForMultipleChoice`) is loaded.

    Args:
        data_dir: directory of train.csv, val.csv (or dev.csv), test.csv.
        init_checkpoint: checkpoint directory; its vocab.txt and casing are
            used.
        output_dir: eval_results.json and predictions go here.
        max_seq_length: tokens per packed choice.
        seed: seeds Keras, shuffling and dropout.
        execution: an `Execution` (see `FineTuningRun`).
        bucket_by_length: batch training texts by length (see `FineTuningRun`).
        check_splits: splits ("dev", "test") read and checked (header,
            endings per example, labels for "dev") when the run is built, so
            that a bad file is an error before training, not after it;
            `evaluate` and `predict` then use what was read.
        scores_only: the run will not train: a checkpoint without a
            multiple-choice head is refused (it would score random weights).

    Example:
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> import tempfile
    >>> checkpoint, data = tempfile.mkdtemp() + "/tiny", tempfile.mkdtemp()
    >>> vocab = data + "/vocab.txt"
    >>> _ = open(vocab, "w").write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]))
    >>> BertBackbone(7, 1, 2, 8, 16).save_to_preset(checkpoint, vocabulary_file=vocab)
    >>> for split in ("train", "val"):
    ...     _ = open(f"{data}/{split}.csv", "w").write(
    ...         "sent1,sent2,ending0,ending1,label\\na,,a,b,0\\nb,,a,b,1\\n")
    >>> run = MultipleChoiceRun(data, checkpoint, tempfile.mkdtemp(), max_seq_length=8)
    >>> _ = run.train(batch_size=2, learning_rate=1e-3, num_epochs=1, verbose=0)
    >>> sorted(run.evaluate("dev", batch_size=2))
    ['accuracy', 'examples', 'seconds']
    """

    def __init__(
        self,
        data_dir,
        init_checkpoint,
        output_dir,
        max_seq_length=None,
        check_splits=(),
        scores_only=False,
        **options,
    ):
        super().__init__(data_dir, init_checkpoint, output_dir, max_seq_length, **options)
        self.preprocessor = BertPreprocessor(self.tokenizer, sequence_length=self.max_seq_length)
        self.num_choices = self._num_choices()
        self._checked_examples = {}
        for split in check_splits:
            self._checked_examples[split] = self._read_checked(split)
        self.model = self.build_model(
            lambda backbone: BertMultipleChoice(backbone, num_choices=self.num_choices),
            "classifier",
            output_layer="choice_score",
        )
        self._trained = False
        if scores_only:
            self.refuse_untrained_head("multiple-choice (classifier, 1 output)")

    def _num_choices(self):
        """The choices of the first split that has examples, or those a fine-tuned checkpoint recorded."""
        for split in ("train", "dev", "test"):
            try:
                examples = self._read(split, limit=1, labelled=False)
            except FileNotFoundError:
                continue
            if len(examples):
                return examples.num_choices
        recorded = self.checkpoint.task_config.get("num_choices")
        if recorded:
            return recorded
        names = [name for split_names in SPLIT_FILES.values() for name in split_names]
        if not any(os.path.isfile(os.path.join(self.data_dir, name)) for name in names):
            what = "holds none of" if os.path.isdir(self.data_dir) else "is no directory holding"
            raise InputFileError(f"{self.data_dir} {what} {', '.join(names)}.")
        raise InputFileError(f"No examples in {self.data_dir} to count the choices from.")

    def _read(self, split, limit=None, labelled=True):
        return read_swag(split_path(self.data_dir, split), limit=limit, labelled=labelled)

    def _read_checked(self, split):
        """`split`'s examples, checked; labels needed but for "test" (only predicted)."""
        if split in self._checked_examples:
            return self._checked_examples[split]
        labelled = split != "test"
        return self._checked(self._read(split, labelled=labelled), split, labelled)

    def train(
        self, batch_size, learning_rate, num_epochs, warmup_proportion=0.1, limit=None, verbose=2
    ):
        """Fine-tunes on train.csv with the paper's AdamW recipe; returns the history.

        The model goes to OUTPUT_DIR/export (see `FineTuningRun.export`), its
        task config naming the task and the number of choices.
        """
        examples = self._checked(self._read("train", limit=limit), "train")
        self._trained = True
        features = self._features(examples)
        dataset = batch_by_length(
            tf.data.Dataset.from_tensor_slices(
                (features, np.asarray(examples.labels, np.int32))
            ).shuffle(len(examples), seed=self.seed, reshuffle_each_iteration=True),
            batch_size,
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
            output_layer="choice_score",
            task_config={"task": "multiple_choice", "num_choices": self.num_choices},
        )
        return history

    def evaluate(self, split, batch_size):
        """Accuracy on `split`; writes eval_results.json and the predictions."""
        start = time.perf_counter()
        examples = self._read_checked(split)
        if None in examples.labels:
            raise InputFileError(f"The {split} file in {self.data_dir} has no label column.")
        self.warn_if_head_untrained("multiple-choice")
        predictions = self._predict_examples(examples, batch_size)
        results = {
            "accuracy": accuracy(examples.labels, predictions),
            "examples": len(examples),
            "seconds": seconds_since(start),
        }
        self.write_results(results)
        self._write_predictions(split, predictions)
        return results

    def predict(self, split, batch_size):
        """Writes OUTPUT_DIR/predictions_{split}.tsv: each example's chosen ending."""
        examples = self._read_checked(split)
        self.warn_if_head_untrained("multiple-choice")
        self._write_predictions(split, self._predict_examples(examples, batch_size))

    def _checked(self, examples, split, labelled=True):
        if not len(examples):
            raise InputFileError(f"The {split} file in {self.data_dir} holds no examples.")
        if examples.num_choices not in (0, self.num_choices):
            raise InputFileError(
                f"The {split} file in {self.data_dir} has {examples.num_choices} endings per "
                f"example; the model was built for {self.num_choices}."
            )
        if labelled and None in examples.labels:
            raise InputFileError(f"The {split} file in {self.data_dir} has no label column.")
        return examples

    def _features(self, examples):
        """Packed choices, `[examples, num_choices, max_seq_length]` int32 arrays."""
        contexts = [
            context
            for context, choices in zip(examples.contexts, examples.choices)
            for _ in choices
        ]
        choices = [choice for example_choices in examples.choices for choice in example_choices]
        batches = [
            self.preprocessor(
                (contexts[start : start + _PACK_BATCH], choices[start : start + _PACK_BATCH])
            )
            for start in range(0, len(choices), _PACK_BATCH)
        ]
        shape = (len(examples), self.num_choices, self.max_seq_length)
        return {
            name: np.concatenate([batch[name].numpy() for batch in batches]).reshape(shape)
            for name in ("token_ids", "segment_ids", "padding_mask")
        }

    def _predict_examples(self, examples, batch_size):
        logits = self.predict_features(self.model, self._features(examples), batch_size)
        return np.argmax(logits, axis=-1)

    def _write_predictions(self, split, predictions):
        lines = ["index\tprediction"] + [f"{i}\t{p}" for i, p in enumerate(predictions)]
        self.write_file(f"predictions_{split}.tsv", "\n".join(lines) + "\n")
