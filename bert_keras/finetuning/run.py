"""What every fine-tuning program shares: flags, a task model from a checkpoint, training, files.

A task's run (classification, tagging, multiple choice, ...) subclasses
`FineTuningRun` and adds reading its data and scoring it; a task's absl
program defines and checks its flags with `bert_keras.finetuning.flags`
(which imports neither TensorFlow nor Keras, so bad flags fail at once),
builds its run from `run_arguments` and hands it to `run_steps`.
"""

import functools
import json
import math
import os
import statistics
import time

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from bert_keras.atomic_files import write_text
from bert_keras.checkpoints import read_checkpoint
from bert_keras.checkpoints import write_checkpoint
from bert_keras.data.input_file_error import InputFileError
from bert_keras.data.length_batching import PAD_TO_MULTIPLE_OF
from bert_keras.data.length_batching import PREDICTION_COMPILE_TOKENS
from bert_keras.data.length_batching import TRAINING_COMPILE_TOKENS
from bert_keras.data.length_batching import precision_width_multiple
from bert_keras.data.length_batching import predict_by_length
from bert_keras.data.length_batching import prediction_width_multiple
from bert_keras.finetuning.training_diverged import TrainingDivergedError
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_task import checkpoint_tokenizer
from bert_keras.models.checkpoint_weights import apply_checkpoint
from bert_keras.models.checkpoint_weights import exported_backbone_config
from bert_keras.models.checkpoint_weights import model_checkpoint
from bert_keras.models.layout_map import bert_layout_map
from bert_keras.models.layout_map import check_model_splits
from bert_keras.training.callbacks import HistoryPlot
from bert_keras.training.callbacks import JsonLinesHistory
from bert_keras.training.callbacks import StopAtStep
from bert_keras.training.callbacks import TrainingProgress
from bert_keras.training.data_parallel import DataParallel
from bert_keras.training.execution import Execution
from bert_keras.training.optimizers import GLOBAL_CLIPNORM
from bert_keras.training.optimizers import create_optimizer
from bert_keras.training.output_lock import LOCK_FILE

EVAL_RESULTS_FILE = "eval_results.json"
EXPORT_DIR = "export"
HISTORY_FILE = "history.jsonl"
# The program flag whose step reads each split.
STEP_FLAGS = {"train": "--do_train", "dev": "--do_eval", "test": "--do_predict"}


class FineTuningRun:
    """A checkpoint's tokenizer, a task model on its backbone, training, result files.

    Subclasses read their task's data and implement `train(batch_size,
    learning_rate, num_epochs, warmup_proportion, limit)`, `evaluate(split,
    batch_size)` (returns and writes the metrics) and `predict(split,
    batch_size)`; `build_model` and `fit` do the parts every task shares.

    Args:
        data_dir: directory of the task's files.
        init_checkpoint: checkpoint directory (Hugging Face, the original
            release, bert_keras's own); its vocab.txt and casing are used.
        output_dir: results and predictions go here (created if absent).
        max_seq_length: tokens per packed input; longer than the checkpoint's
            positions is an error. None: `default_max_seq_length`, or the
            checkpoint's positions where they are fewer.
        seed: seeds Keras (weights of new heads, dropout) and shuffling.
        execution: an `Execution` (distribution, mixed precision, XLA,
            steps per execution); the default trains in float32 on one device.
        bucket_by_length: train on batches of texts of one length bucket
            (see `batch_by_length`'s `bucket`): less padding; the
            buckets' leftovers make a pass's last, mixed batches.
        max_batch_widths: where XLA compiles a program per batch width
            (`jit_compile`), at most this many widths, those that pad the
            data's texts least (`batch_by_length`'s `max_widths`), in
            training and scoring alike: fewer compiles for more padding.
            None: the widths whose padding saved pays for their compile,
            each counted as `TRAINING_COMPILE_TOKENS` tokens in training
            and `PREDICTION_COMPILE_TOKENS` in scoring (`batch_by_length`'s
            and `predict_by_length`'s `compile_tokens`). Runs without XLA
            take each batch at its longest text whatever it is.
        freeze_backbone: keep the backbone's weights as the checkpoint has
            them (non-trainable) and train only the task's head.

    Example:
    >>> import tempfile
    >>> checkpoint = tempfile.mkdtemp() + "/tiny"
    >>> vocab = tempfile.mkdtemp() + "/vocab.txt"
    >>> _ = open(vocab, "w").write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "ok"]))
    >>> BertBackbone(6, 1, 2, 8, 16).save_to_preset(checkpoint, vocabulary_file=vocab)
    >>> run = FineTuningRun(tempfile.mkdtemp(), checkpoint, tempfile.mkdtemp())
    >>> from bert_keras.models.bert_classifier import BertClassifier
    >>> model = run.build_model(lambda backbone: BertClassifier(backbone, 3), "classifier")
    >>> tuple(model.get_layer("logits").kernel.shape)
    (8, 3)
    """

    default_max_seq_length = 128

    def __init__(
        self,
        data_dir,
        init_checkpoint,
        output_dir,
        max_seq_length=None,
        seed=0,
        execution=None,
        bucket_by_length=False,
        max_batch_widths=None,
        freeze_backbone=False,
    ):
        self.execution = execution or Execution()
        self.execution.validate()
        self.execution.use_compilation_cache()
        self.replicas = DataParallel(
            self.execution.distribution, self.execution.mesh_shape, bert_layout_map
        )
        keras.utils.set_random_seed(seed)
        self.data_dir = data_dir
        self.output_dir = output_dir
        self.seed = seed
        self.bucket_by_length = bucket_by_length
        self.max_batch_widths = max_batch_widths
        self.freeze_backbone = freeze_backbone
        os.makedirs(output_dir, exist_ok=True)
        self.earlier_files = _file_versions(output_dir)
        if self.earlier_files and self.replicas.is_chief:
            logging.warning(
                "%s holds an earlier run's %s: this run replaces those it writes; the others stay "
                "that run's.",
                output_dir,
                ", ".join(sorted(self.earlier_files)),
            )
        self.checkpoint = read_checkpoint(init_checkpoint)
        self.max_seq_length = _sequence_length(
            max_seq_length, self.default_max_seq_length, self.checkpoint
        )
        self.tokenizer = checkpoint_tokenizer(self.checkpoint)
        self._graph_steps = {}  # id(model) -> its scoring step, which holds the model

    @property
    def pad_to_multiple_of(self):
        """Batch widths are multiples of this: 1, or 8 in mixed precision (the tensor cores' tile).

        A step without XLA (torch, TensorFlow on CPUs, `--nojit_compile`)
        takes every width as it comes, so its batches are as long as their
        longest example, rounded up to this. Where XLA compiles a program
        per width, the run's widths are a few of these multiples (of
        `COMPILED_PREDICTION_MULTIPLE` in scoring), those that pad its
        batches least for their compiles (`training_batching`,
        `prediction_batching`), and each batch takes the narrowest of them
        that holds it.

        Example:
        >>> import tempfile
        >>> checkpoint = tempfile.mkdtemp() + "/tiny"
        >>> vocab = tempfile.mkdtemp() + "/vocab.txt"
        >>> _ = open(vocab, "w").write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
        >>> BertBackbone(5, 1, 2, 8, 16).save_to_preset(checkpoint, vocabulary_file=vocab)
        >>> run = FineTuningRun(tempfile.mkdtemp(), checkpoint, tempfile.mkdtemp())
        >>> run.pad_to_multiple_of
        1
        >>> run.jit_compile == (keras.backend.backend() == "jax")  # on CPUs
        True
        """
        return precision_width_multiple(self.execution.compute_dtype)

    @functools.cached_property
    def jit_compile(self):
        """Whether XLA compiles this run's steps, one program per batch width.

        `Execution.jit_compile` when it is set; by default XLA where it pays:
        on jax, and on TensorFlow where a GPU or TPU runs the steps. On
        TensorFlow on CPUs, XLA compiles each batch width anew and slower
        than jax does, which costs a fine-tuning run more than XLA's faster
        steps give back; without it, TensorFlow traces one graph for every
        width (the README's Fine-tuning section has the measurements).
        `pad_to_multiple_of`'s example shows both.
        """
        requested = self.execution.jit_compile
        if requested is None:
            requested = keras.backend.backend() != "tensorflow" or _tensorflow_has_accelerator()
        return self.replicas.jit_compile(requested)

    @property
    def prediction_batching(self):
        """`predict_by_length`'s options in this run's scoring (`predict_features`).

        Where XLA compiles a program per input shape (jax), a short last
        batch is filled up to a full one, which then needs no program of its
        own, and the widths are multiples of `COMPILED_PREDICTION_MULTIPLE`
        (so that later scoring finds its widths compiled), `max_batch_widths`
        of them or else those whose padding saved pays for their compile
        (`PREDICTION_COMPILE_TOKENS` each): a prediction step's cost grows
        with its tokens, so a few more of them cost less than a compile.
        TensorFlow scores in one graph traced for every shape, torch
        eagerly: their batches are as long as their longest example
        (`pad_to_multiple_of`).
        """
        compiled_per_shape = self.jit_compile and not self._scores_in_one_graph
        return {
            "pad_to_multiple_of": prediction_width_multiple(
                self.pad_to_multiple_of, compiled_per_shape
            ),
            "full_batches": compiled_per_shape,
            **self._chosen_widths(compiled_per_shape, PREDICTION_COMPILE_TOKENS),
        }

    def _chosen_widths(self, compiled_per_shape, compile_tokens):
        """`max_widths` and `compile_tokens` of `batch_by_length` or `predict_by_length`."""
        if not compiled_per_shape:
            return {"max_widths": None, "compile_tokens": 0}
        if self.max_batch_widths is not None:
            return {"max_widths": self.max_batch_widths, "compile_tokens": 0}
        return {"max_widths": None, "compile_tokens": compile_tokens}

    @property
    def _scores_in_one_graph(self):
        """Whether scoring runs one TensorFlow graph for every batch shape, without XLA.

        On TensorFlow, compiling a program for each batch width with XLA
        cost more than XLA then saved on a dev set: a graph traced once with
        unknown batch size and width scored it in the time XLA's programs
        took once compiled, its batches needing no rounding, though at one
        width it is slower per batch (the README's Fine-tuning section has
        both measurements). With several replicas too: under a strategy,
        Keras' `predict_on_batch` gives every replica the whole batch and
        answers with all their outputs, each row once per replica.
        """
        return keras.backend.backend() == "tensorflow"

    def predict_features(self, model, features, batch_size, **options):
        """`model`'s predictions for packed `features`, batched by length as this run scores.

        `predict_by_length` with this run's `prediction_batching`, on
        TensorFlow in one graph traced for every batch shape (see
        `_scores_in_one_graph`), elsewhere with `model.predict_on_batch`,
        taking the widths of earlier calls where XLA compiled them and they
        pad less than a compile costs (`BertTask.compiled_widths`).

        Args:
            model: the task model.
            features: dict of int arrays `[examples, ..., sequence_length]`.
            batch_size: examples per batch.
            **options: `predict_by_length`'s `per_token_outputs` and `fill`.

        Returns:
            The predictions of all examples, in their order: an array or a
            dict of arrays.

        Example:
        >>> import tempfile
        >>> import numpy as np
        >>> from bert_keras.models.bert_classifier import BertClassifier
        >>> checkpoint = tempfile.mkdtemp() + "/tiny"
        >>> vocab = tempfile.mkdtemp() + "/vocab.txt"
        >>> _ = open(vocab, "w").write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
        >>> BertBackbone(5, 1, 2, 8, 16).save_to_preset(checkpoint, vocabulary_file=vocab)
        >>> run = FineTuningRun(tempfile.mkdtemp(), checkpoint, tempfile.mkdtemp())
        >>> model = run.build_model(lambda backbone: BertClassifier(backbone, 3), "classifier")
        >>> mask = np.array([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]])
        >>> features = {"token_ids": mask * 4, "segment_ids": mask * 0, "padding_mask": mask}
        >>> run.predict_features(model, features, batch_size=2).shape
        (3, 3)
        """
        step, compiled_widths = model.predict_on_batch, model.compiled_widths("predict")
        if self._scores_in_one_graph:  # traced once per model, for every call
            step = self._graph_steps.setdefault(id(model), _one_graph_step(model))
            compiled_widths = None  # not Keras' predict function, and nothing compiles per width
        return predict_by_length(
            step,
            features,
            batch_size,
            **options,
            **self.prediction_batching,
            compiled_widths=compiled_widths,
        )

    def training_batching(self, num_epochs):
        """`batch_by_length`'s options in training for `num_epochs` passes: widths and buckets.

        Where XLA compiles a program per width, the widths are
        `max_batch_widths` or else those whose padding saved in all passes
        pays for their compile (`TRAINING_COMPILE_TOKENS` each), counted on
        one pass; elsewhere each batch is as long as its longest example.
        Buckets without XLA hold `PAD_TO_MULTIPLE_OF` lengths each.

        Args:
            num_epochs: the passes over the data that training takes.

        Example:
        >>> import tempfile
        >>> checkpoint = tempfile.mkdtemp() + "/tiny"
        >>> vocab = tempfile.mkdtemp() + "/vocab.txt"
        >>> _ = open(vocab, "w").write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
        >>> BertBackbone(5, 1, 2, 8, 16).save_to_preset(checkpoint, vocabulary_file=vocab)
        >>> run = FineTuningRun(tempfile.mkdtemp(), checkpoint, tempfile.mkdtemp())
        >>> run.training_batching(num_epochs=2)["compile_tokens"] * 2 == (
        ...     TRAINING_COMPILE_TOKENS if run.jit_compile else 0)
        True
        """
        return {
            "pad_to_multiple_of": self.pad_to_multiple_of,
            "bucket": self.bucket_by_length,
            "bucket_width": PAD_TO_MULTIPLE_OF,
            **self._chosen_widths(self.jit_compile, TRAINING_COMPILE_TOKENS / num_epochs),
        }

    def build_model(self, build_task, head_name, output_layer="logits", reads_pooler=True):
        """The task model on the checkpoint's backbone, with its head when one fits.

        With `freeze_backbone`, the backbone is made non-trainable: the
        optimizer then sees only the head's weights. A task whose head does
        not read the pooler (`reads_pooler` False: tagging, question
        answering) keeps it as the checkpoint has it: not trained, so
        neither decayed (jax) nor warned of as getting no gradient
        (tensorflow, torch).

        Args:
            build_task: backbone -> task model (e.g. a `BertTokenClassifier`).
            head_name: the checkpoint head (see `Checkpoint.head_weights`)
                whose `kernel` and `bias` the output layer takes when their
                shapes match it; otherwise, or when None, the layer keeps its
                fresh weights.
            output_layer: name of the task model's output `Dense` layer.
            reads_pooler: whether the task's head reads the pooled output.

        Returns:
            The task model; `head_loaded` says whether the head was loaded.
        """
        config = {**self.checkpoint.backbone_config, "dtype": self.execution.dtype_policy}
        check_model_splits(config, self.replicas.model_splits)
        with self.replicas.scope():
            model = build_task(BertBackbone.from_config(config))
        heads = {} if head_name is None else {head_name: output_layer}
        loaded = apply_checkpoint(model, self.checkpoint, heads=heads, skip_mismatched_heads=True)
        self.head_loaded = bool(loaded)
        if self.freeze_backbone:
            model.backbone.trainable = False
        if not reads_pooler:
            model.backbone.pooler_dense.trainable = False
        self.replicas.prepare(model)
        return model

    def fit(
        self,
        model,
        dataset,
        num_examples,
        batch_size,
        learning_rate,
        num_epochs,
        warmup_proportion=0.1,
        verbose=2,
        history_points_per_epoch=10,
    ):
        """Fine-tunes `model` with the paper's AdamW recipe; returns the history.

        Each pass over the data is fitted as `history_points_per_epoch`
        Keras epochs of equal steps (fewer when a pass has fewer steps; the
        last one shorter where needed, so that training takes exactly the
        steps of `num_epochs` passes, see `fit_plan`), so the training
        curve has that many points per pass: each interval's logs (mean
        loss and metrics, `step`, `epoch` (passes so far), `learning_rate`,
        `examples_per_second`, `seconds`) go to OUTPUT_DIR/history.jsonl,
        replacing an earlier run's, drawn to OUTPUT_DIR/history.png. The
        first interval's excess seconds over the later steps' median pace
        (compilation, the first batches' tokenizing) are logged.

        Args:
            model: a `BertTask` (compiled here with its own loss and metrics).
            dataset: a finite, batched `tf.data.Dataset` of `(features,
                labels)` that reshuffles itself on every pass.
            num_examples: examples in one pass of `dataset`.
            batch_size: examples per batch of `dataset`.
            learning_rate: peak learning rate, reached after the warmup.
            num_epochs: passes over the data; may be fractional.
            warmup_proportion: fraction of the steps warming up linearly.
            verbose: `keras.Model.fit`'s verbosity.
            history_points_per_epoch: history records per pass over the data.

        Returns:
            The `History.history` dict: one entry per history interval.
        """
        if num_examples == 0:
            raise InputFileError(f"No training examples in {self.data_dir}.")
        self.replicas.check_batch_size(batch_size)
        if self.replicas.num_replicas > 1:  # each replica takes an equal share of every batch
            num_examples -= num_examples % batch_size  # a pass's short last batch is dropped
            if num_examples == 0:
                raise InputFileError(
                    f"No full batch of {batch_size} training examples in {self.data_dir}: "
                    f"{self.replicas.num_replicas} replicas train on full batches only."
                )
            dataset = dataset.filter(lambda *batch: _batch_size(batch) == batch_size)
            # Keras shares a batch among jax's processes by its static size.
            dataset = dataset.map(functools.partial(_of_batch_size, batch_size))
            dataset = self.replicas.local_share(dataset)
        asked = max(1, int(batches_per_pass(num_examples, batch_size) * num_epochs))
        # A call of more batches than the run has would stretch the run to fill it.
        steps_per_execution = min(self.execution.steps_per_execution, asked)
        epochs, steps_per_epoch, total_steps = fit_plan(
            num_examples, batch_size, num_epochs, history_points_per_epoch, steps_per_execution
        )
        if total_steps != asked:
            logging.warning(
                "%d steps (%s passes of %d examples) round up to %d: steps_per_execution=%d "
                "batches make each compiled call, so the run sees %.2f passes.",
                asked,
                f"{num_epochs:g}",
                num_examples,
                total_steps,
                steps_per_execution,
                total_steps / batches_per_pass(num_examples, batch_size),
            )
        callbacks = [
            StopAtStep(total_steps, steps_per_epoch),
            TrainingProgress(
                batch_size, batches_per_epoch=batches_per_pass(num_examples, batch_size)
            ),
            keras.callbacks.TerminateOnNaN(),
        ]
        if self.replicas.is_chief:
            history_file = os.path.join(self.output_dir, HISTORY_FILE)
            callbacks += [
                JsonLinesHistory(history_file, replace=True),
                HistoryPlot(self.output_dir),
            ]
        with self.replicas.scope():
            model.compile(
                optimizer=create_optimizer(
                    learning_rate,
                    num_train_steps=total_steps,
                    num_warmup_steps=int(warmup_proportion * total_steps),
                    global_clipnorm=self.replicas.clipnorm(GLOBAL_CLIPNORM),
                ),
                steps_per_execution=steps_per_execution,
                jit_compile=self.jit_compile,
            )
            history = model.fit(
                dataset.repeat(),
                epochs=epochs,
                steps_per_epoch=steps_per_epoch,
                shuffle=False,  # the dataset reshuffles itself each pass
                verbose=verbose,
                callbacks=callbacks,
            )
        _check_finite_loss(history.history)
        _log_first_interval_overhead(history.history)
        return history.history

    def checkpoint_label_names(self, head_name):
        """The checkpoint's names of its `head_name` head's outputs, in order (id2label), or None.

        A head trained elsewhere may order the same classes otherwise than
        the data's sorted labels; a run whose data has these classes takes
        the checkpoint's order, so that the head keeps its meaning.

        Example:
        >>> import tempfile
        >>> from bert_keras.checkpoints import read_checkpoint, write_checkpoint
        >>> from bert_keras.models.bert_backbone import BertBackbone
        >>> directory, vocab = tempfile.mkdtemp(), tempfile.mkdtemp() + "/vocab.txt"
        >>> _ = open(vocab, "w").write("[PAD]\\n[UNK]\\n[CLS]\\n[SEP]\\n[MASK]\\n")
        >>> BertBackbone(5, 1, 2, 8, 16).save_to_preset(directory + "/tiny", vocabulary_file=vocab)
        >>> checkpoint = read_checkpoint(directory + "/tiny")
        >>> checkpoint.head_weights["classifier"] = {"kernel": np.zeros((8, 2)), "bias": np.zeros(2)}
        >>> checkpoint.label_names = ["pos", "neg"]
        >>> write_checkpoint(checkpoint, directory + "/tuned")
        >>> run = FineTuningRun(tempfile.mkdtemp(), directory + "/tuned", tempfile.mkdtemp())
        >>> run.checkpoint_label_names("classifier"), run.checkpoint_label_names("token_classifier")
        (['pos', 'neg'], None)
        """
        head = self.checkpoint.head_weights.get(head_name)
        names = self.checkpoint.label_names
        if not head or names is None or len(names) != head["bias"].shape[-1]:
            return None
        return list(names)

    def earlier_files_kept(self):
        """The names in OUTPUT_DIR that an earlier run wrote and this one has not replaced.

        The programs log them at their end, so that an earlier run's results
        are not read as this run's.

        Example:
        >>> import tempfile
        >>> checkpoint, output_dir = tempfile.mkdtemp() + "/tiny", tempfile.mkdtemp()
        >>> vocab = tempfile.mkdtemp() + "/vocab.txt"
        >>> _ = open(vocab, "w").write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
        >>> BertBackbone(5, 1, 2, 8, 16).save_to_preset(checkpoint, vocabulary_file=vocab)
        >>> _ = open(output_dir + "/eval_results.json", "w").write("{}")
        >>> FineTuningRun(tempfile.mkdtemp(), checkpoint, output_dir).earlier_files_kept()
        ['eval_results.json']
        """
        now = _file_versions(self.output_dir)
        return sorted(
            name for name, version in self.earlier_files.items() if now.get(name) == version
        )

    def warn_of_earlier_files_kept(self):
        """Logs `earlier_files_kept` (the programs do at their end), where there are some."""
        kept = self.earlier_files_kept()
        if kept and self.replicas.is_chief:
            logging.warning(
                "%s: %s %s an earlier run's, not this run's.",
                self.output_dir,
                ", ".join(kept),
                "is" if len(kept) == 1 else "are",
            )

    def export(self, model, head_name, output_layer="logits", label_names=None, task_config=None):
        """Writes the fine-tuned model to OUTPUT_DIR/export, a checkpoint directory.

        It holds the backbone, the output layer as the checkpoint head
        `head_name`, the label names (config.json's id2label) and the
        tokenizer files: `BertClassifier.from_preset` (or the task's class)
        and transformers' matching class load it, and it serves as
        --init_checkpoint of a later run. Written atomically.

        Args:
            model: the fine-tuned task model.
            head_name: a checkpoint head name (`checkpoints.HEAD_NAMES`).
            output_layer: name of the model's output `Dense` layer.
            label_names: names of the outputs, in order, or None.
            task_config: what a SavedModel export needs to know of the
                inputs, e.g. `{"text_pair": True}` (`Checkpoint.task_config`);
                "max_seq_length" is added.

        Returns:
            The export directory.
        """
        checkpoint = model_checkpoint(
            model,
            heads={head_name: output_layer},
            backbone_config=exported_backbone_config(model.backbone),
            vocabulary_file=self.checkpoint.vocabulary_file,
            tokenizer_settings=self.checkpoint.tokenizer_settings,
            format=self.checkpoint.format,
            directory=self.checkpoint.directory,
            label_names=None if label_names is None else list(label_names),
            task_config={"max_seq_length": self.max_seq_length, **(task_config or {})},
        )
        directory = os.path.join(self.output_dir, EXPORT_DIR)
        if self.replicas.is_chief:  # of several processes, the first writes
            write_checkpoint(checkpoint, directory, overwrite=True)
        return directory

    def write_results(self, results):
        """Writes `results` (a JSON-able dict) to OUTPUT_DIR/eval_results.json; returns what it wrote.

        A metric that is undefined on the data (NaN: a correlation of
        constant predictions, or of one example) is written as null, which
        JSON has, and named in a warning.
        """
        undefined = [name for name, value in results.items() if _is_nan(value)]
        if undefined:
            logging.warning(
                "%s undefined on these %s examples (constant labels or predictions, or fewer "
                "than two examples); written as null.",
                ", ".join(undefined),
                results.get("examples", "scored"),
            )
        results = {name: None if name in undefined else value for name, value in results.items()}
        self.write_file(EVAL_RESULTS_FILE, json.dumps(results, indent=2, allow_nan=False) + "\n")
        return results

    def warn_if_head_untrained(self, head_name):
        """Logs that scoring uses a head of random weights: none fit from the checkpoint, none trained.

        Subclasses set `head_loaded` (the checkpoint's head fit) and
        `_trained` (this run trained) when they build and train the model.
        """
        if not (self.head_loaded or self._trained):
            logging.warning(
                "Scoring with a %s head of random weights: %s has none that fits the data and "
                "this run has not trained one.",
                head_name,
                self.checkpoint.directory,
            )

    def refuse_untrained_head(self, head_name, scoring_flags="--do_eval and --do_predict"):
        """Raises where the task model's head is new and the run is not to train it.

        `scoring_flags` names the program's flags that score, for the message.
        """
        if not self.head_loaded:
            raise ValueError(
                f"{self.checkpoint.directory} has no {head_name} head that fits, so "
                f"{scoring_flags} without --do_train would score one with random weights; "
                "--do_train trains one, or give a fine-tuned checkpoint."
            )

    def write_file(self, name, text):
        """Writes `text` to OUTPUT_DIR/`name`, atomically (in the first of several processes)."""
        if self.replicas.is_chief:
            write_text(os.path.join(self.output_dir, name), text)


def seconds_since(start):
    """Seconds since `start` (a `time.perf_counter()` reading), to the millisecond.

    Example:
    >>> import time
    >>> seconds_since(time.perf_counter()) < 1.0
    True
    """
    return round(time.perf_counter() - start, 3)


def batches_per_pass(num_examples, batch_size):
    """Batches in one pass over `num_examples`, the last one possibly short.

    Example:
    >>> batches_per_pass(num_examples=5, batch_size=2)
    3
    """
    return math.ceil(num_examples / batch_size)


def fit_plan(num_examples, batch_size, num_epochs, points_per_epoch, steps_per_execution=1):
    """(Keras epochs, steps per Keras epoch, steps): the passes asked for, cut into history intervals.

    The steps are those of the passes asked for, rounded up to whole
    compiled calls. Each pass over the data is cut into about
    `points_per_epoch` intervals (one per step when a pass has fewer steps),
    each a whole number of compiled calls; the last interval is shorter
    when they do not divide the steps (`StopAtStep` ends it).

    Example:
    >>> fit_plan(num_examples=1000, batch_size=10, num_epochs=2, points_per_epoch=10)
    (20, 10, 200)
    >>> fit_plan(num_examples=1000, batch_size=10, num_epochs=2, points_per_epoch=7)
    (14, 15, 200)
    """
    steps_per_pass = batches_per_pass(num_examples, batch_size)
    total_steps = max(1, int(steps_per_pass * num_epochs))
    total_steps = math.ceil(total_steps / steps_per_execution) * steps_per_execution
    interval = min(steps_per_pass, total_steps) / max(1, points_per_epoch)
    interval = max(1, math.ceil(interval / steps_per_execution)) * steps_per_execution
    return math.ceil(total_steps / interval), interval, total_steps


def _check_finite_loss(history):
    """Raises `TrainingDivergedError` where a history interval's loss is NaN or infinite."""
    for step, loss in zip(history.get("step", []), history.get("loss", [])):
        if not math.isfinite(loss):
            raise TrainingDivergedError(
                f"The training loss is {loss} by step {step:g}: the run diverged, so its model "
                "is neither scored nor exported. A lower --learning_rate (or bfloat16 in place "
                "of float16) may train."
            )


def _log_first_interval_overhead(history):
    seconds = history["seconds"]
    if len(seconds) < 2:
        return
    steps = [history["step"][0], *np.diff(history["step"])]
    later = statistics.median(s / n for s, n in zip(seconds[1:], steps[1:]))
    if seconds[0] <= later * steps[0]:  # nothing compiled (torch), or noise
        return
    logging.info(
        "The first %d steps took %.1f s, later steps %.3f s each: %.1f s of compiling and "
        "first-batch work.",
        steps[0],
        seconds[0],
        later,
        seconds[0] - later * steps[0],
    )


def _batch_size(batch):
    return tf.shape(tf.nest.flatten(batch)[0])[0]


def _of_batch_size(batch_size, *batch):
    """The batch, its tensors' first dimension known to be `batch_size`."""
    return tf.nest.map_structure(
        lambda tensor: tf.ensure_shape(tensor, [batch_size, *tensor.shape[1:]]), batch
    )


def _one_graph_step(model):
    """A batch of numpy features -> `model`'s outputs as numpy, in one graph for every shape.

    A graph is traced on the first batch of each set of feature names,
    ranks and dtypes, with every dimension unknown.
    """
    steps = {}

    def predict(batch):
        key = tuple(sorted((name, array.ndim, array.dtype.str) for name, array in batch.items()))
        if key not in steps:
            signature = {
                name: tf.TensorSpec([None] * array.ndim, tf.as_dtype(array.dtype))
                for name, array in batch.items()
            }
            steps[key] = tf.function(
                lambda inputs: model(inputs, training=False),
                input_signature=[signature],
                jit_compile=False,
            )
        return keras.tree.map_structure(lambda tensor: tensor.numpy(), steps[key](batch))

    return predict


def _tensorflow_has_accelerator():
    """Whether TensorFlow sees a GPU or a TPU."""
    return any(tf.config.list_logical_devices(kind) for kind in ("GPU", "TPU"))


def _sequence_length(max_seq_length, default, checkpoint):
    """`max_seq_length`, checked against the checkpoint's positions; or the default that fits."""
    positions = checkpoint.backbone_config.get("max_sequence_length", default)
    if max_seq_length is None:
        return min(default, positions)
    if max_seq_length > positions:
        raise ValueError(
            f"max_seq_length is {max_seq_length} but the checkpoint {checkpoint.directory} "
            f"has only {positions} position embeddings."
        )
    return max_seq_length


def _file_versions(directory):
    """Name -> (inode, modification time) of each entry in `directory` but the run's lock."""
    versions = {}
    for entry in os.scandir(directory):
        if entry.name != LOCK_FILE:
            status = entry.stat(follow_symlinks=False)
            versions[entry.name] = (status.st_ino, status.st_mtime_ns)
    return versions


def _is_nan(value):
    return isinstance(value, float) and math.isnan(value)
