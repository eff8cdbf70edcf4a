"""What every task model shares: a backbone, its dtype, raw text input, its serialisation."""

import functools
import inspect
import itertools
import os
import re
import tempfile
import types
import warnings

import keras
import numpy as np
from absl import logging

from bert_keras.checkpoints import read_checkpoint
from bert_keras.checkpoints import tokenizer_settings
from bert_keras.checkpoints import write_checkpoint
from bert_keras.checkpoints.vocabulary import write_vocabulary
from bert_keras.layers.dense import Dense
from bert_keras.layers.dropout import Dropout
from bert_keras.layers.initializers import bert_kernel_initializer
from bert_keras.models.bert_backbone import INPUT_NAMES
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_backbone import quantized_policy_map
from bert_keras.models.checkpoint_weights import apply_checkpoint
from bert_keras.models.checkpoint_weights import exported_backbone_config
from bert_keras.models.checkpoint_weights import model_checkpoint
from bert_keras.models.dataset_release import without_autotuning_thread
from bert_keras.models.input_checks import check_array_inputs
from bert_keras.models.input_checks import check_class_ids
from bert_keras.models.input_checks import check_dataset_labels
from bert_keras.models.input_checks import check_masked_positions
from bert_keras.models.input_checks import check_one_label_per_example
from bert_keras.models.input_checks import check_positive_count
from bert_keras.models.input_checks import class_ids_checked_in_graph
from bert_keras.models.input_checks import labels_of_one_output
from bert_keras.models.presets import BACKBONE_PRESETS
from bert_keras.models.text_inputs import DEFAULT_BATCH_SIZE
from bert_keras.models.text_inputs import TextPacker
from bert_keras.models.text_inputs import dataset_labels
from bert_keras.models.text_inputs import first_examples
from bert_keras.models.text_inputs import holds_dataset
from bert_keras.models.text_inputs import holds_text
from bert_keras.models.text_inputs import split_for_validation
from bert_keras.models.text_inputs import text_dataset
from bert_keras.models.text_inputs import with_segment_ids_checked
from bert_keras.training.garbage_collection import QuantizeCollectingOnce
from bert_keras.training.optimizer_build import build_optimizer
from bert_keras.training.optimizer_build import compile_as_saved
from bert_keras.training.optimizers import create_optimizer
from bert_keras.training.replica_build import BuildsFromOneReplica

# The original run_classifier.py's --max_seq_length.
DEFAULT_SEQUENCE_LENGTH = 128
# Keras' optimizer warning where only the pooler, which the task never reads, has no gradients.
_NO_GRADIENTS_FOR_THE_POOLER_ALONE = (
    "Gradients do not exist for variables "
    + re.escape(str([f"pooler_dense/{name}" for name in ("kernel", "bias")]))
    + " "
)


def _restored_on_failure(method):
    """`method`, a Keras loop, after whose failure the model is as it was or as its last step left it.

    A call that fails (an input the model refuses, a bad batch, an
    interrupt) may have chosen widths it never compiled, which later calls
    would pad to: the widths chosen are kept as compiled only if it
    returns. On jax, the model's variables are put back
    (`_put_back_variables`).
    """

    @functools.wraps(method)
    def kept_on_success(self, *args, **kwargs):
        known = {
            step: (function, {shape: set(widths) for shape, widths in by_shape.items()})
            for step, (function, by_shape) in self._widths_of_steps.items()
        }
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            self._widths_of_steps = known
            self._put_back_variables()
            raise
        finally:
            _set_untracked(self, "_values_taken_out", ())

    return kept_on_success


def _label_names_of_head(model, checkpoint):
    """The checkpoint's label names where `model` took its named head from it, else None."""
    names = checkpoint.label_names  # read only where they fit the checkpoint's head
    took_head = model.checkpoint_head in checkpoint.head_weights
    if names is None or not took_head or getattr(model, "num_classes", None) != len(names):
        return None
    return tuple(names)


def _set_untracked(model, name, value):
    """Sets an attribute that Keras' tracking must not see (it would own the variables in it)."""
    object.__setattr__(model, name, value)


class BertTask(QuantizeCollectingOnce, BuildsFromOneReplica, keras.Model):
    """Base of the Functional task models built on a `BertBackbone`.

    Subclasses build their graph in `__init__` and call
    `super().__init__(backbone, inputs=..., outputs=...)`. This class follows
    the backbone's dtype policy (so `compile()` adds loss scaling under
    mixed_float16) and serialises the backbone (and preprocessor) inside
    `get_config()`; subclasses add their own constructor arguments to the
    config. `compile()` fills in what is left "auto": the paper's AdamW recipe
    (see `bert_keras.training.optimizers.create_optimizer`) at the task's default
    learning rate, and the task's loss and metrics.

    With a `preprocessor` attached, `fit`, `evaluate` and `predict` also take
    raw text: a list, numpy array or tensor of strings, a tuple
    `(texts_a, texts_b)` of two such for sentence pairs, or a batched
    `tf.data.Dataset` of texts, `(texts, labels)` or `(texts, labels,
    sample_weights)`. The preprocessor runs inside `tf.data` (batched,
    in-graph, in parallel), so the model itself only sees token ids, under
    every backend. Inputs that are already ids are used as they are. Calling
    the model directly (`model(inputs)`) takes ids only.

    Args:
        backbone: a `BertBackbone`.
        inputs: the Functional model's inputs.
        outputs: its outputs.
        preprocessor: a `BertPreprocessor` (or any layer mapping a batch of
            texts to the model's inputs in TensorFlow), or None.
        **kwargs: standard `keras.Model` arguments.

    Example:
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> inputs = backbone_inputs()
    >>> task = BertTask(backbone, inputs=inputs,
    ...                 outputs=backbone(inputs)["pooled_output"])
    >>> task.backbone is backbone, task.preprocessor
    (True, None)
    """

    # The `Checkpoint.head_weights` entry whose kernel and bias the output
    # layer named `output_layer_name` takes in `from_preset`.
    checkpoint_head = None
    output_layer_name = "logits"
    # `from_preset`'s preprocessor pads each batch of raw text to its longest
    # text (rounded up); a task whose outputs have a length axis pads to the
    # sequence length instead, so that `predict` can stack its batches.
    pads_batches_by_length = True
    # How many classes the labels are ids of, where they are: `fit` and
    # `evaluate` check them (`_check_array_inputs`).
    label_classes = None
    one_label_per_example = False  # else labels per token
    # Whether the outputs depend on the backbone's pooler: loading a checkpoint
    # without one warns only where they do.
    reads_pooled_output = True
    # The names of the head's outputs (config.json id2label), where `from_preset`
    # read a checkpoint that has them; `save_to_preset` writes them back.
    label_names = None

    def __init__(self, backbone, inputs, outputs, preprocessor=None, **kwargs):
        check_preprocessor_fits(preprocessor, backbone)
        unknown = sorted(set(kwargs) - {"name", "trainable", "dtype"})
        if unknown:  # which keras.Model would drop, a mistyped argument too
            raise TypeError(
                f"{type(self).__name__} got unexpected keyword arguments {unknown}; it takes its "
                "own arguments (see its docstring), preprocessor, name, trainable and dtype."
            )
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.dtype_policy = backbone.dtype_policy
        self.backbone = backbone
        self.preprocessor = preprocessor
        self._widths_of_steps = {}  # "train", "test", "predict" -> (Keras' function, widths)
        _set_untracked(self, "_values_taken_out", ())  # see `_put_back_variables`
        self._filling_tokens = {}  # predict_by_length's: what filling small calls has cost
        self._text_packer = (None, None)  # (id of the preprocessor it packs with, TextPacker)

    default_learning_rate = 5e-5
    computes_its_own_loss = False  # True where `compute_loss` needs no compiled loss

    def compile(
        self,
        optimizer="auto",
        loss="auto",
        metrics="auto",
        learning_rate=None,
        num_train_steps=None,
        warmup_proportion=0.1,
        **kwargs,
    ):
        """`keras.Model.compile` with the task's defaults for "auto" arguments.

        Args:
            optimizer: an optimizer, or "auto": AdamW, weight decay 0.01 off
                layer norms and biases, epsilon 1e-6, clipping at global norm
                1.0; with `num_train_steps`, linear warmup over
                `warmup_proportion` of the steps then linear decay to 0.
            loss: a loss, or "auto" for the task's.
            metrics: metrics, or "auto" for the task's; none where `loss`
                reads its labels otherwise than the task's does (one-hot
                rows, say, where the task's read class ids).
            learning_rate: peak learning rate of the "auto" optimizer;
                the task's `default_learning_rate` when None. With another
                optimizer, an error (it has its own).
            num_train_steps: total optimizer steps, for the "auto"
                optimizer's schedule.
            warmup_proportion: fraction of `num_train_steps` spent warming up.
            **kwargs: passed on to `keras.Model.compile`.
        """
        if optimizer != "auto" and (learning_rate, num_train_steps) != (None, None):
            raise ValueError(
                f"{type(self).__name__}.compile got learning_rate or num_train_steps with an "
                'optimizer of its own; they set the optimizer="auto" one: give them to yours.'
            )
        if optimizer == "auto":
            steps = num_train_steps
            optimizer = create_optimizer(
                learning_rate or self.default_learning_rate,
                num_train_steps=steps,
                num_warmup_steps=int(warmup_proportion * steps) if steps else 0,
            )
        if metrics == "auto":
            metrics = self._default_metrics_for(loss)
        super().compile(
            optimizer=optimizer,
            loss=self.default_loss() if loss == "auto" else loss,
            metrics=metrics,
            **kwargs,
        )
        self._widths_of_steps = {}  # Keras makes new step functions, which compile anew
        self._filling_tokens = {}

    def compile_from_config(self, config):
        """Compiles a model loaded from a `.keras` file as it was saved (`compile_as_saved`)."""
        compile_as_saved(self, config)

    def _default_metrics_for(self, loss):
        """The task's metrics where `loss` reads labels as the task's loss does, else none.

        None would keep the metrics of an earlier `compile` (Keras' way), so
        "none" is an empty list.
        """
        if loss == "auto" or reads_class_ids(loss) == reads_class_ids(self.default_loss()):
            return self.default_metrics()
        return []

    def default_loss(self):
        """The task's loss; None when the model computes its own."""
        return None

    def default_metrics(self):
        """The task's metrics."""
        return None

    @classmethod
    def from_preset(cls, preset, sequence_length=None, **kwargs):
        """The task model on a checkpoint's backbone, head and vocabulary.

        Loads the backbone from any directory `BertBackbone.from_preset`
        reads, takes the checkpoint's matching head when its shape fits (e.g.
        a Hugging Face `BertForSequenceClassification` with as many labels),
        and attaches a `BertPreprocessor` built from the directory's
        vocab.txt and casing, so the model takes raw text.

        Args:
            preset: a checkpoint directory. A `BertBackbone` preset name
                (`bert_tiny`, ...) is refused: it names a size with fresh
                weights and no vocabulary, so build the task on it instead,
                `BertClassifier(BertBackbone.from_preset("bert_tiny"), 2)`.
            sequence_length: the preprocessor's packed length. None: the
                length the checkpoint was fine-tuned at, as its export
                serves it (`task_config["max_seq_length"]`), else 128 (the
                original run_classifier.py's default) or the backbone's
                `max_sequence_length` if that is shorter. Longer than
                `max_sequence_length` is an error.
            **kwargs: the task's constructor arguments (e.g. `num_classes`,
                by default the checkpoint head's outputs when it has the
                task's head); `preprocessor=None` attaches none.

        Example:
        >>> import os, tempfile
        >>> directory = tempfile.mkdtemp() + "/tiny"
        >>> vocabulary = os.path.join(tempfile.mkdtemp(), "vocab.txt")
        >>> _ = open(vocabulary, "w").write(
        ...     "\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "ok"]))
        >>> BertBackbone(6, 1, 2, 8, 16).save_to_preset(
        ...     directory, vocabulary_file=vocabulary)
        >>> from bert_keras.models.bert_classifier import BertClassifier
        >>> classifier = BertClassifier.from_preset(directory, num_classes=2)
        >>> classifier.predict(["ok", "ok ok"], verbose=0).shape
        (2, 2)
        """
        check_not_a_backbone_preset(cls, preset)
        checkpoint = read_checkpoint(preset)
        if "num_classes" in inspect.signature(cls).parameters and "num_classes" not in kwargs:
            kwargs["num_classes"] = checkpoint.num_labels(heads=(cls.checkpoint_head,))
            if kwargs["num_classes"] is None:
                raise ValueError(
                    f"{preset} has no {cls.checkpoint_head} head to take the number of classes "
                    "from: give num_classes."
                )
        backbone = checkpoint_backbone(checkpoint, kwargs)
        if "preprocessor" not in kwargs:
            default_length = checkpoint.task_config.get(
                "max_seq_length", min(DEFAULT_SEQUENCE_LENGTH, backbone.max_sequence_length)
            )
            kwargs["preprocessor"] = checkpoint_preprocessor(
                checkpoint,
                default_length if sequence_length is None else sequence_length,
                by_length=cls.pads_batches_by_length,
            )
            if kwargs["preprocessor"] is None:
                logging.warning(
                    "%s has no vocabulary (vocab.txt or tokenizer.json): %s takes token ids, not text.",
                    preset,
                    cls.__name__,
                )
        model = cls(backbone, **kwargs)
        apply_checkpoint(
            model,
            checkpoint,
            heads=cls.checkpoint_heads(),
            skip_mismatched_heads=True,
        )
        model.label_names = _label_names_of_head(model, checkpoint)
        return model

    def save_to_preset(self, directory, overwrite=False, label_names=None):
        """Writes the model as a checkpoint directory its class's `from_preset` reads back.

        The directory holds the backbone, the task's head (see
        `checkpoint_heads`) and, with a preprocessor, its vocabulary,
        tokenizer settings and packed length, in the format of the
        fine-tuning programs' exports: `type(model).from_preset(directory)`
        predicts as `model` does, transformers' matching class
        (`BertForSequenceClassification`, ...) loads it, and
        `tools.export_saved_model` serves it. Written to a temporary sibling
        directory that is renamed into place, so an interrupted save leaves
        nothing half-written.

        Args:
            directory: output directory; must not exist or be empty unless
                `overwrite`.
            overwrite: replace a non-empty `directory`.
            label_names: the names of the head's outputs, in order (config.json
                id2label; a classifier's classes or a tagger's tags). None:
                `label_names`, those of the checkpoint `from_preset` read.

        Example:
        >>> import tempfile
        >>> from bert_keras.models.bert_classifier import BertClassifier
        >>> from bert_keras.text.preprocessor import BertPreprocessor
        >>> from bert_keras.text.tokenizer import BertTokenizer
        >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "ok"])
        >>> classifier = BertClassifier(BertBackbone(6, 1, 2, 8, 16), num_classes=3,
        ...                             preprocessor=BertPreprocessor(tokenizer, 12))
        >>> directory = tempfile.mkdtemp() + "/classifier"
        >>> classifier.save_to_preset(directory)
        >>> restored = BertClassifier.from_preset(directory)
        >>> restored.num_classes, restored.preprocessor.sequence_length
        (3, 12)
        """
        with tempfile.TemporaryDirectory() as scratch:
            checkpoint = self.preset_checkpoint(scratch, label_names)
            write_checkpoint(checkpoint, directory, overwrite=overwrite)

    def preset_checkpoint(self, scratch_directory, label_names=None):
        """The `Checkpoint` `save_to_preset` writes; its vocab.txt is written in `scratch_directory`.

        Example:
        >>> import tempfile
        >>> from bert_keras.models.bert_classifier import BertClassifier
        >>> checkpoint = BertClassifier(BertBackbone(6, 1, 2, 8, 16), num_classes=3
        ...                             ).preset_checkpoint(tempfile.mkdtemp())
        >>> checkpoint.head_weights["classifier"]["kernel"].shape, checkpoint.vocabulary_file
        ((8, 3), None)
        """
        names = self.label_names if label_names is None else label_names
        return model_checkpoint(
            self,
            heads=self.checkpoint_heads(),
            backbone_config=exported_backbone_config(self.backbone),
            task_config=self.preset_task_config(),
            label_names=None if names is None else list(names),
            **preprocessor_checkpoint_fields(self.preprocessor, scratch_directory),
        )

    def preset_task_config(self):
        """What `save_to_preset` records of the task besides its weights
        (`Checkpoint.task_config`): the preprocessor's packed length."""
        if self.preprocessor is None:
            return {}
        return {"max_seq_length": int(self.preprocessor.sequence_length)}

    @classmethod
    def checkpoint_heads(cls):
        """The heads `from_preset` loads: `Checkpoint.head_weights` name -> the layer's name.

        Example:
        >>> from bert_keras.models.bert_classifier import BertClassifier
        >>> BertClassifier.checkpoint_heads()
        {'classifier': 'logits'}
        """
        return {cls.checkpoint_head: cls.output_layer_name} if cls.checkpoint_head else {}

    def preprocess_text(self, texts):
        """The model's inputs for a batch of raw texts, in TensorFlow (runs in `tf.data`).

        Subclasses whose inputs are not one packed sequence per example
        override this (see `BertMultipleChoice`).
        """
        return self.preprocessor(texts)

    def _inputs_of_text(self, texts):
        """`preprocess_text`, refusing segments the backbone has no embedding for.

        Pairs are refused as `tf.data` traces this, before any step (on jax,
        a failure inside Keras' loop leaves the variables without values);
        any other segment past the backbone's fails in the graph.
        """
        num_segments = self.backbone.num_segments
        if isinstance(texts, (tuple, list)) and num_segments < 2:
            raise ValueError(
                f"{type(self).__name__} got pairs of texts, but its backbone has one segment "
                f"(num_segments {num_segments}) and a pair's second text is segment 1: give "
                "single texts."
            )
        return with_segment_ids_checked(self.preprocess_text(texts), num_segments)

    @_restored_on_failure
    def fit(
        self,
        x=None,
        y=None,
        batch_size=None,
        *,
        sample_weight=None,
        validation_data=None,
        validation_split=0.0,
        shuffle=True,
        **kwargs,
    ):
        """`keras.Model.fit`; with a preprocessor, `x` and `validation_data` may be text.

        The optimizer is built before the first step (`build_optimizer`), so
        that TensorFlow traces the training step once.
        """
        self._check_a_loss_for("fit")
        x = _generator_without_text(x)
        y, sample_weight = labels_of_one_output(y), labels_of_one_output(sample_weight)
        self._check_array_inputs(x, y, sample_weight, batch_size)
        y = self._labels_as_read(y)
        validation_batch_size = kwargs.pop("validation_batch_size", None) or batch_size
        x = self._with_dataset_labels_checked(x)
        if self._takes_as_text(x):
            self._check_labels_given(x, y, "fit")
            if validation_split and validation_data is None:  # else, as in Keras, it is ignored
                self._check_arrays_to_split(x)
                (x, y, sample_weight), validation_data = split_for_validation(
                    (x, y, sample_weight), validation_split
                )
            validation_split = 0.0
            x = self._training_text_dataset(
                x, y, sample_weight, batch_size, shuffle, kwargs.get("epochs", 1)
            )
            # The dataset reshuffles itself each epoch.
            y, sample_weight, batch_size, shuffle = None, None, None, False
        validation_data = self._validation_dataset(validation_data, validation_batch_size)
        if isinstance(validation_data, tuple):  # arrays, which Keras batches
            kwargs["validation_batch_size"] = validation_batch_size
        build_optimizer(self)
        with warnings.catch_warnings():
            if not self.reads_pooled_output:  # Keras would ask whether a loss was forgotten
                warnings.filterwarnings("ignore", message=_NO_GRADIENTS_FOR_THE_POOLER_ALONE)
            return super().fit(
                without_autotuning_thread(x),
                y,
                batch_size=batch_size,
                sample_weight=sample_weight,
                validation_data=validation_data,
                validation_split=validation_split,
                shuffle=shuffle,
                **kwargs,
            )

    def _get_jax_state(
        self,
        trainable_variables=False,
        non_trainable_variables=False,
        optimizer_variables=False,
        metrics_variables=False,
        purge_model_variables=False,
    ):
        """Keras' jax loops' state; the values a loop takes out of the variables are noted first.

        See `_put_back_variables`.
        """
        if purge_model_variables:
            taken = []
            for wanted, variables in (
                (trainable_variables, lambda: self.trainable_variables),
                (non_trainable_variables, lambda: self.non_trainable_variables),
                (optimizer_variables, lambda: self.optimizer.variables),
                (metrics_variables, lambda: self.metrics_variables),  # none before `compile`
            ):
                if wanted:
                    taken += [(variable, variable._value) for variable in variables()]
            _set_untracked(self, "_values_taken_out", taken)
        return super()._get_jax_state(
            trainable_variables=trainable_variables,
            non_trainable_variables=non_trainable_variables,
            optimizer_variables=optimizer_variables,
            metrics_variables=metrics_variables,
            purge_model_variables=purge_model_variables,
        )

    def _put_back_variables(self):
        """After a Keras loop failed on jax: the variables' values of its last step, or those it took.

        Keras' jax loops take the values out of the variables while they
        run and put the last step's back at the end; `evaluate` and
        `predict` do not where they fail, and no loop does where it fails
        before its first step ends (`fit`'s validation too): the model
        would be left without its weights. Values that a step consumed are
        not put back.
        """
        if keras.backend.backend() != "jax":
            return
        self.jax_state_sync()
        self._jax_state = None
        for variable, value in self._values_taken_out:
            if variable._value is None and value is not None and not value.is_deleted():
                variable._value = value

    def _check_arrays_to_split(self, x):
        """Refuses `validation_split` of a dataset, which Keras cannot split either."""
        if holds_dataset(x):
            raise ValueError(
                f"{type(self).__name__}.fit got validation_split with a tf.data.Dataset, which "
                "cannot be split: pass validation_data, or the texts as a list or array."
            )

    def _check_a_loss_for(self, method):
        """Refuses `fit` or `evaluate` without a loss, before Keras' loop (jax's fails in it unrestored).

        Keras refuses it on tensorflow and torch, but on jax trains on and
        evaluates a loss of 0 (only weight decay moves the weights).
        """
        if self.computes_its_own_loss or getattr(self, "_compile_loss", None) or self.losses:
            return
        if not self.compiled:
            raise ValueError(
                f"{type(self).__name__} is not compiled: call compile() (its defaults are the "
                f"task's loss, metrics and optimizer) before {method}."
            )
        raise ValueError(
            f"{type(self).__name__} has no loss to {'train on' if method == 'fit' else method}: "
            "it was compiled with loss=None"
            + ("" if self.default_loss() is None else " (loss='auto' gives the task's)")
            + "; pass compile(loss=...)."
        )

    @_restored_on_failure
    def evaluate(self, x=None, y=None, batch_size=None, *, sample_weight=None, **kwargs):
        """`keras.Model.evaluate`; with a preprocessor, `x` may be text."""
        x = _generator_without_text(x)
        y, sample_weight = labels_of_one_output(y), labels_of_one_output(sample_weight)
        self._check_array_inputs(x, y, sample_weight, batch_size)
        self._check_a_loss_for("evaluate")
        y = self._labels_as_read(y)
        x = self._with_dataset_labels_checked(x)
        if self._takes_as_text(x):
            self._check_labels_given(x, y, "evaluate")
            if self._packs_texts_once(x):
                x, y, sample_weight = self._first_batches((x, y, sample_weight), batch_size, kwargs)
            x = self._labelled_text_dataset(x, y, sample_weight, batch_size)
            y = sample_weight = batch_size = None
        return super().evaluate(
            without_autotuning_thread(x),
            y,
            batch_size=batch_size,
            sample_weight=sample_weight,
            **kwargs,
        )

    def _labels_as_read(self, y):
        """Array labels `y`, checked, in the form the loss reads them (subclasses map theirs).

        Class ids `[examples, 1]` become `[examples]`, one rank whatever the
        call gives: Keras' TensorFlow step, traced for labels of one rank,
        retraces for the other with an unknown rank, which its sparse loss
        cannot take.
        """
        if not self.one_label_per_example or not isinstance(y, (list, np.ndarray)):
            return y
        labels = np.asarray(y)
        return labels[:, 0] if labels.ndim == 2 and labels.shape[1] == 1 else y

    @_restored_on_failure
    def predict(self, x, batch_size=None, **kwargs):
        """`keras.Model.predict`; with a preprocessor, `x` may be text.

        Texts in arrays or lists are packed once, then batched shortest
        first, each batch as wide as its longest text needs
        (`predict_by_length` with `prediction_batching`, and where XLA
        compiles each width, the widths of earlier calls where they pad
        less than a compile costs); the predictions come back in the
        texts' order. With `steps`, the first `steps` batches of the texts
        are predicted, as Keras takes them from arrays. `callbacks` and
        `verbose` act as in Keras' loop; a callback's `outputs` are each
        batch as predicted (sorted, and a filled batch with its copies).
        """
        x = _generator_without_text(x)
        self._check_array_inputs(x, batch_size=batch_size)
        if not self._takes_as_text(x):
            return super().predict(without_autotuning_thread(x), batch_size=batch_size, **kwargs)
        if not self._packs_texts_once(x):
            dataset = text_dataset(self._inputs_of_text, x, batch_size=batch_size)
            return super().predict(without_autotuning_thread(dataset), **kwargs)
        batch_size = batch_size or DEFAULT_BATCH_SIZE
        features = self._packed_texts(self._first_batches(x, batch_size, kwargs))
        if not self._predicts_batch_by_batch:
            predictions = self._predict_in_keras_loop(features, batch_size, **kwargs)
        else:
            predictions = self._predict_batch_by_batch(features, batch_size, **kwargs)
        return self._text_predictions(features, predictions)

    def _text_predictions(self, features, predictions):
        """The predictions for texts packed into `features` (subclasses clear their padding)."""
        del features
        return predictions

    def _predict_batch_by_batch(self, features, batch_size, verbose="auto", callbacks=None):
        """Predictions for packed `features`, each length-sorted batch through `predict_on_batch`.

        The batches are numpy slices, so a short call costs no more than its
        steps; Keras' loop would first build a `tf.data` pipeline to feed it.
        The callbacks and the progress bar are Keras' own.
        """
        from bert_keras.data.length_batching import predict_by_length

        if not isinstance(callbacks, keras.callbacks.CallbackList):
            callbacks = keras.callbacks.CallbackList(
                callbacks,
                add_progbar=verbose != 0,
                verbose=verbose,
                epochs=1,
                steps=-(-len(features["padding_mask"]) // batch_size),
                model=self,
            )
        steps = itertools.count()

        def predict_batch(batch):
            step = next(steps)
            callbacks.on_predict_batch_begin(step)
            outputs = keras.Model.predict_on_batch(self, batch)
            callbacks.on_predict_batch_end(step, {"outputs": outputs})
            return outputs

        self._trace_predict_function_for_any_shape(features)
        callbacks.on_predict_begin()
        predictions = predict_by_length(
            predict_batch,
            features,
            batch_size,
            **self.prediction_batching,
            compiled_widths=self.compiled_widths("predict"),
            filling_tokens=self._filling_tokens,
        )
        callbacks.on_predict_end()
        return predictions

    def _predict_in_keras_loop(self, features, batch_size, **kwargs):
        """Predictions for packed `features` batched by length in a `tf.data` pipeline, in Keras' loop."""
        from bert_keras.data.length_batching import in_input_order
        from bert_keras.data.length_batching import length_sorted_dataset

        order, dataset = length_sorted_dataset(
            features,
            batch_size,
            **self.prediction_batching,
            compiled_widths=self.compiled_widths("predict"),
            filling_tokens=self._filling_tokens,
        )
        predictions = super().predict(without_autotuning_thread(dataset), **kwargs)
        return keras.tree.map_structure(lambda array: in_input_order(array, order), predictions)

    @property
    def _predicts_batch_by_batch(self):
        """Whether `predict` on texts feeds `predict_on_batch` itself: where it runs on one device.

        Keras' loop shares batches among replicas (a TensorFlow strategy's,
        or a `keras.distribution`'s devices); `predict_on_batch` does not.
        """
        if keras.distribution.distribution() is not None:
            return False
        return keras.backend.backend() != "tensorflow" or (
            self.distribute_strategy.num_replicas_in_sync == 1
        )

    def predict_on_batch(self, x):
        """`keras.Model.predict_on_batch`; with a preprocessor, `x` may be a batch of texts.

        Texts go through `predict`, as one batch, and so does any batch
        where Keras' loop shares batches among devices: under a TensorFlow
        strategy of several replicas, Keras' `predict_on_batch` gives every
        replica the whole batch and answers with all their outputs, each
        row once per replica.
        """
        if self._takes_as_text(x):  # `predict` checks them
            return self.predict(x, batch_size=len(x[0] if isinstance(x, tuple) else x), verbose=0)
        self._check_array_inputs(x)
        if not self._predicts_batch_by_batch:  # checked: Keras' loop, as one batch
            return super().predict(x, batch_size=len(keras.tree.flatten(x)[0]), verbose=0)
        return super().predict_on_batch(x)

    @staticmethod
    def _first_batches(arrays, batch_size, keras_options):
        """`arrays` cut to Keras' `steps` (popped from `keras_options`) batches, in input order.

        Texts are sorted by length after the cut, so that `steps` takes the
        examples it would take from arrays Keras batches itself.
        """
        steps = keras_options.pop("steps", None)
        check_positive_count("steps", steps)  # 0 or -1 cut no texts or the wrong ones
        if steps is None:
            return arrays
        return first_examples(arrays, steps * (batch_size or DEFAULT_BATCH_SIZE))

    def _trace_predict_function_for_any_shape(self, features):
        """On TensorFlow, traces `predict_on_batch`'s function once, for batches of any shape.

        Keras' `tf.function` retraces on each new batch shape until it has
        generalized them: three traces for batches of many widths and a
        short last one. Traced first with every dimension of `features`
        unknown, it serves them all.
        """
        if keras.backend.backend() != "tensorflow" or self.run_eagerly:
            return
        import tensorflow as tf

        self.make_predict_function()
        any_shape = keras.tree.map_structure(
            lambda array: tf.TensorSpec([None] * array.ndim, tf.as_dtype(array.dtype)), features
        )
        self.predict_function.get_concrete_function([(any_shape,)])

    @property
    def prediction_batching(self):
        """`length_sorted_dataset`'s options in `predict` on texts.

        Where XLA compiles a program per input shape (`jit_compile`), a short
        last batch is filled up to a full one, which then needs no program of
        its own (and a call of a few texts up to the rows of a program
        compiled before, until such filling has cost a compile), and the
        widths are multiples of `COMPILED_PREDICTION_MULTIPLE` whose padding
        saved pays for their compile (`PREDICTION_COMPILE_TOKENS` each), so
        that later calls find theirs compiled. Otherwise each batch
        is as wide as its longest text; in mixed precision widths are
        multiples of 8 (the tensor cores' tile).

        Example:
        >>> from bert_keras.models.bert_classifier import BertClassifier
        >>> classifier = BertClassifier(BertBackbone(10, 1, 2, 8, 16), num_classes=2)
        >>> classifier.prediction_batching["full_batches"] == classifier.jit_compile
        True
        >>> classifier.prediction_batching["pad_to_multiple_of"] == (8 if classifier.jit_compile else 1)
        True
        """
        from bert_keras.data.length_batching import PREDICTION_COMPILE_TOKENS
        from bert_keras.data.length_batching import prediction_width_multiple

        compiled_per_shape = bool(self.jit_compile)
        return {
            "pad_to_multiple_of": prediction_width_multiple(
                self._width_multiple, compiled_per_shape
            ),
            "full_batches": compiled_per_shape,
            "compile_tokens": PREDICTION_COMPILE_TOKENS if compiled_per_shape else 0,
        }

    @property
    def _width_multiple(self):
        """Batch widths are multiples of this, by the model's compute dtype."""
        from bert_keras.data.length_batching import precision_width_multiple

        return precision_width_multiple(self.compute_dtype)

    def _labelled_text_dataset(self, x, y, sample_weight, batch_size):
        """Texts `x` with their labels and weights, for `evaluate`: batched as `predict` does.

        Shortest first where the model pads batches by length, without
        filling the last batch (its copies would count twice); a dataset
        goes through `text_dataset` as it is.
        """
        if not self._packs_texts_once(x) or y is None:
            return text_dataset(
                self._inputs_of_text,
                x,
                y,
                sample_weight,
                batch_size,
                check_labels=self._labels_check,
            )
        from bert_keras.data.length_batching import length_sorted_dataset

        features, y, sample_weight = self._labelled_features(
            self._packed_texts(x), y, sample_weight
        )
        _, dataset = length_sorted_dataset(
            features,
            batch_size or DEFAULT_BATCH_SIZE,
            **{**self.prediction_batching, "full_batches": False},
            compiled_widths=self.compiled_widths("test"),
            columns=_label_columns(y, sample_weight),
        )
        return dataset

    def _with_dataset_labels_checked(self, x):
        """A `tf.data.Dataset` of the model's inputs, its class-id labels checked as they pass.

        As `_check_array_inputs` checks array labels and `text_dataset` a
        dataset of texts' (`_labels_check`); on jax, a class id out of range
        would otherwise train on a wrong loss. Anything else is returned as is.
        """
        if not holds_dataset(x) or holds_text(x):
            return x
        labels = dataset_labels(x)
        if not labels or not hasattr(labels[0], "dtype"):  # none, or one per output
            return x

        def checked(features, labels, *rest):
            return (features, self._labels_check(labels), *rest)

        return x.map(checked)

    def _labels_check(self, labels):
        """A dataset's labels, checked in `tf.data` as `_check_array_inputs` checks array labels."""
        loss = self.loss
        if not self.label_classes or not reads_class_ids(loss):
            return labels
        return class_ids_checked_in_graph(
            labels, self.label_classes, ignored_label=ignored_class(loss)
        )

    def _labelled_features(self, features, y, sample_weight):
        """`(features, y, sample_weight)` for texts packed into `features`, before Keras' loop.

        Subclasses check array labels against the packed texts, or fill in
        what the packing decides (see `BertMaskedLM`).
        """
        return features, y, sample_weight

    def compiled_widths(self, step):
        """The batch widths XLA compiled Keras' `step` function for, by batch shape without the width.

        A dict such as `{(32,): {31, 55}}`, for `length_sorted_dataset`,
        `predict_by_length` or `batch_by_length`, whose later calls then
        take these widths wherever they pad less than a compile costs, and
        add those they choose. `fit`, `evaluate` and `predict` on texts do
        so. Kept while Keras keeps its step function; compiling the model
        again starts afresh. None where nothing compiles per shape.

        Args:
            step: "train", "test" or "predict".

        Example:
        >>> from bert_keras.models.bert_classifier import BertClassifier
        >>> classifier = BertClassifier(BertBackbone(10, 1, 2, 8, 16), num_classes=2)
        >>> widths = classifier.compiled_widths("predict")
        >>> widths == {} if classifier.jit_compile else widths is None
        True
        """
        if not self.jit_compile:
            return None
        function = getattr(self, f"{step}_function")
        known_function, widths = self._widths_of_steps.get(step, (None, {}))
        if known_function is not None and known_function is not function:
            widths = {}  # a function Keras made since: nothing compiled yet
        # The first call chooses widths before Keras makes the function that compiles them.
        self._widths_of_steps[step] = (function or known_function, widths)
        return widths

    def _training_text_dataset(self, x, y, sample_weight, batch_size, shuffle, epochs):
        """Texts `x` with their labels and weights, for `fit`: packed once, batched by length.

        Where the model pads batches by length, the texts are packed once
        and each (reshuffled) batch is as wide as its longest text, or where
        XLA compiles each input shape, as the narrowest of the widths whose
        padding saved in all `epochs` pays for their compile
        (`batch_by_length` with `TRAINING_COMPILE_TOKENS`, as the fine-tuning
        programs train), or the widths earlier calls compiled where they pad
        less than a compile costs. A dataset goes through `text_dataset` as
        it is.
        """
        if not self._packs_texts_once(x) or y is None:
            return text_dataset(
                self._inputs_of_text,
                x,
                y,
                sample_weight,
                batch_size,
                shuffle,
                check_labels=self._labels_check,
            )
        import tensorflow as tf

        from bert_keras.data.length_batching import TRAINING_COMPILE_TOKENS
        from bert_keras.data.length_batching import batch_by_length

        features, y, sample_weight = self._labelled_features(
            self._packed_texts(x), y, sample_weight
        )
        dataset = tf.data.Dataset.from_tensor_slices((features, *_label_columns(y, sample_weight)))
        if shuffle:
            dataset = dataset.shuffle(dataset.cardinality(), reshuffle_each_iteration=True)
        batches = batch_by_length(
            dataset,
            batch_size or DEFAULT_BATCH_SIZE,
            pad_to_multiple_of=self._width_multiple,
            compile_tokens=TRAINING_COMPILE_TOKENS / max(epochs, 1) if self.jit_compile else 0,
            compiled_widths=self.compiled_widths("train"),
        )
        return batches.prefetch(tf.data.AUTOTUNE)

    def _packed_texts(self, x):
        """Texts `x` packed into the model's inputs (numpy), by a `TextPacker` kept per preprocessor."""
        preprocessor_id, packer = self._text_packer
        if preprocessor_id != id(self.preprocessor):
            packer = TextPacker(self.preprocess_text)
            self._text_packer = (id(self.preprocessor), packer)
        features = packer(x)
        # A pair's second text is segment 1, which a checkpoint of one segment lacks.
        self.backbone.check_array_ids(features, "the packed texts")
        return features

    def _packs_texts_once(self, x):
        """Whether texts `x` are packed once and batched by length: arrays, not a dataset.

        Only for models whose outputs have no length axis (`pads_batches_by_length`).
        """
        return self.pads_batches_by_length and not holds_dataset(x)

    def _check_array_inputs(self, x, y=None, sample_weight=None, batch_size=None, source=""):
        """A clear error for bad array-like inputs, labels or batch size (see `input_checks`).

        Labels are checked as class ids where the loss reads them so (a
        sparse cross-entropy, as the tasks' own are); its `ignore_class` passes.
        """
        check_array_inputs(x, y, sample_weight, batch_size, source)
        check_dataset_labels(x, source)
        self.backbone.check_array_ids(x, f"{source}x")
        check_masked_positions(x, f"{source}x")
        loss = self.loss
        if y is None or not self.label_classes or isinstance(y, dict):
            return
        if not reads_class_ids(loss):
            return
        if self.one_label_per_example:
            check_one_label_per_example(y, f"{source}y")
        check_class_ids(y, self.label_classes, f"{source}y", ignored_class(loss))

    def _takes_as_text(self, x):
        if not holds_text(x):
            return False
        self._check_preprocessor_for_text()
        return True

    def _check_labels_given(self, x, y, method):
        """Refuses texts without labels (a dataset holds its own), before Keras' loop."""
        if holds_dataset(x) and not dataset_labels(x):
            raise ValueError(
                f"{type(self).__name__}.{method} got a tf.data.Dataset of texts without labels "
                f"(elements {x.element_spec}; two string parts are a pair of texts): give "
                "elements (texts, labels) or ((texts_a, texts_b), labels), labels as numbers."
            )
        if y is None and not holds_dataset(x):
            raise ValueError(
                f"{type(self).__name__}.{method} got texts but y is None: give their labels as y "
                "(or a tf.data.Dataset of (texts, labels)); predict takes texts alone."
            )

    def _check_preprocessor_for_text(self):
        if self.preprocessor is None:
            raise ValueError(
                f"{type(self).__name__} got text but has no preprocessor: build it with "
                "preprocessor=BertPreprocessor(tokenizer, sequence_length), or give token ids."
            )

    def _validation_dataset(self, validation_data, batch_size):
        if isinstance(validation_data, tuple):
            x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(validation_data)
            self._check_array_inputs(x, y, sample_weight, batch_size, "validation_data: ")
            y = self._labels_as_read(y)
            if self._takes_as_text(x):
                if y is None:
                    raise ValueError(
                        f"{type(self).__name__}.fit got validation_data of texts without labels: "
                        "give it as (texts, labels), or a tf.data.Dataset of (texts, labels)."
                    )
                validation_data = self._labelled_text_dataset(x, y, sample_weight, batch_size)
            else:
                validation_data = (x, y) if sample_weight is None else (x, y, sample_weight)
        elif validation_data is not None and self._takes_as_text(validation_data):
            validation_data = text_dataset(
                self._inputs_of_text, validation_data, check_labels=self._labels_check
            )
        else:
            validation_data = self._with_dataset_labels_checked(validation_data)
        return without_autotuning_thread(validation_data)

    def get_config(self):
        config = {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.layers.serialize(self.backbone),
            "preprocessor": (
                None if self.preprocessor is None else keras.layers.serialize(self.preprocessor)
            ),
        }
        policy_map = quantized_policy_map(self)
        if policy_map is not None:
            # The quantized layers of the backbone and of the head, by path.
            config["dtype"] = keras.dtype_policies.serialize(policy_map)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        backbone_config = config["backbone"]
        if "dtype" in config:
            # The heads take the backbone's policy, so it carries their paths too.
            backbone_config = {
                **backbone_config,
                "config": {**backbone_config["config"], "dtype": config.pop("dtype")},
            }
        config["backbone"] = keras.layers.deserialize(backbone_config)
        if config.get("preprocessor") is not None:
            # Registers the class for Keras: task models import TensorFlow only for text.
            import bert_keras.text.preprocessor  # noqa: F401

            config["preprocessor"] = keras.layers.deserialize(config["preprocessor"])
        return cls(**config)


def check_preprocessor_fits(preprocessor, backbone):
    """Raises a ValueError where `preprocessor` packs texts longer than `backbone` has positions.

    A preprocessor without a `sequence_length` cuts no text: a long one
    would fail inside Keras' loop (on jax, leaving the model's variables
    without their values).

    Example:
    >>> from bert_keras.text.preprocessor import BertPreprocessor
    >>> from bert_keras.text.tokenizer import BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    >>> check_preprocessor_fits(BertPreprocessor(tokenizer, None), BertBackbone(5, 1, 2, 8, 16))
    Traceback (most recent call last):
    ...
    ValueError: The preprocessor packs texts of any length (sequence_length None), but the backbone ...
    """
    if not hasattr(preprocessor, "sequence_length"):
        return
    length, positions = preprocessor.sequence_length, backbone.max_sequence_length
    if length is None:
        raise ValueError(
            f"The preprocessor packs texts of any length (sequence_length None), but the backbone "
            f"has {positions} positions (max_sequence_length): give the preprocessor a "
            f"sequence_length of at most {positions}, which cuts longer texts."
        )
    if length > positions:
        raise ValueError(
            f"The preprocessor packs sequences of {length} tokens (sequence_length), but the "
            f"backbone has {positions} positions (max_sequence_length)."
        )


def checkpoint_backbone(checkpoint, task_arguments):
    """The backbone of `checkpoint`, in the `dtype` popped from a task's `task_arguments`, if any.

    A task model's dtype policy is its backbone's, so `from_preset(...,
    dtype="mixed_bfloat16")` builds the backbone so.

    Example:
    >>> import tempfile
    >>> directory = tempfile.mkdtemp() + "/tiny"
    >>> BertBackbone(6, 1, 2, 8, 16).save_to_preset(directory)
    >>> arguments = {"num_classes": 2, "dtype": "mixed_bfloat16"}
    >>> checkpoint_backbone(read_checkpoint(directory), arguments).dtype_policy.name, arguments
    ('mixed_bfloat16', {'num_classes': 2})
    """
    dtype = task_arguments.pop("dtype", None)
    overrides = {} if dtype is None else {"dtype": dtype}
    return BertBackbone.from_config({**checkpoint.backbone_config, **overrides})


def check_not_a_backbone_preset(task_class, preset):
    """Raises a ValueError where a task's `from_preset` gets a `BertBackbone` preset's name.

    Such a preset is a size built with fresh weights and no vocabulary: a
    task model on it would have neither trained weights nor a preprocessor,
    so the task is built on the backbone instead (keras-hub's task presets
    carry a vocabulary; these do not). A directory of that name is read.

    Example:
    >>> from bert_keras.models.bert_classifier import BertClassifier
    >>> check_not_a_backbone_preset(BertClassifier, "bert_tiny")
    Traceback (most recent call last):
    ...
    ValueError: 'bert_tiny' is a BertBackbone preset (a size, with fresh weights and no vocabulary)...
    """
    if isinstance(preset, str) and preset in BACKBONE_PRESETS and not os.path.exists(preset):
        raise ValueError(
            f"{preset!r} is a BertBackbone preset (a size, with fresh weights and no vocabulary), "
            f"not a checkpoint directory: build the task on it, {task_class.__name__}("
            f"BertBackbone.from_preset({preset!r}), ...), which takes token ids, or give "
            f"{task_class.__name__}.from_preset a checkpoint directory."
        )


def reads_class_ids(loss):
    """Whether `loss` reads its labels as class ids: a sparse categorical cross-entropy.

    Example:
    >>> reads_class_ids("sparse_categorical_crossentropy"), reads_class_ids("mse")
    (True, False)
    """
    sparse = isinstance(loss, keras.losses.SparseCategoricalCrossentropy)
    return sparse or (isinstance(loss, str) and loss == "sparse_categorical_crossentropy")


def ignored_class(loss):
    """The label a sparse cross-entropy `loss` leaves out (its `ignore_class`), or None."""
    if isinstance(loss, keras.losses.SparseCategoricalCrossentropy):
        return loss.get_config().get("ignore_class")
    return None


def _generator_without_text(x):
    """A Python generator `x` as it was, refused if its first element holds text.

    Texts from a generator would reach Keras' loop as strings, which it
    cannot feed a model (on jax, failing mid-loop, it leaves the variables
    without their values). The first element is read to tell, and yielded
    again first.
    """
    if not isinstance(x, types.GeneratorType):
        return x
    try:
        first = next(x)
    except StopIteration:
        return (element for element in ())
    if holds_text(first):
        raise ValueError(
            "x is a generator that yields text; task models take text in arrays or lists, as "
            "a tuple (texts, text_pairs) of them, or in a batched tf.data.Dataset "
            "(tf.data.Dataset.from_generator makes one)."
        )

    def elements():
        yield first
        yield from x

    return elements()


def _label_columns(y, sample_weight):
    """`(labels,)` or `(labels, sample_weights)`, lists made numpy arrays."""
    columns = (y,) if sample_weight is None else (y, sample_weight)
    return tuple(np.asarray(column) if isinstance(column, list) else column for column in columns)


def checkpoint_preprocessor(checkpoint, sequence_length, by_length=False, **tokenizer_overrides):
    """A `BertPreprocessor` from a checkpoint's vocab.txt and tokenizer settings, or None.

    Args:
        checkpoint: a `bert_keras.checkpoints.Checkpoint`.
        sequence_length: the packed length.
        by_length: pad each batch to its longest text, rounded up to a
            multiple of `PAD_TO_MULTIPLE_OF`, rather than to `sequence_length`.
        **tokenizer_overrides: `BertTokenizer` arguments replacing the
            checkpoint's (see `checkpoint_tokenizer`).

    Raises:
        ModuleNotFoundError: TensorFlow or tensorflow-text is not installed.

    Example:
    >>> import os, tempfile
    >>> from bert_keras.checkpoints import read_checkpoint
    >>> directory = tempfile.mkdtemp() + "/tiny"
    >>> vocabulary = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> _ = open(vocabulary, "w").write(
    ...     "\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Ok"]))
    >>> BertBackbone(6, 1, 2, 8, 16).save_to_preset(
    ...     directory, vocabulary_file=vocabulary, lowercase=False)
    >>> preprocessor = checkpoint_preprocessor(read_checkpoint(directory), 4)
    >>> preprocessor("Ok")["token_ids"].numpy().tolist()
    [2, 5, 3, 0]
    """
    if checkpoint.vocabulary_file is None:
        return None
    tokenizer = checkpoint_tokenizer(checkpoint, **tokenizer_overrides)
    from bert_keras.data.length_batching import PAD_TO_MULTIPLE_OF
    from bert_keras.text.preprocessor import BertPreprocessor

    if not by_length:
        return BertPreprocessor(tokenizer, sequence_length=sequence_length)
    return BertPreprocessor(
        tokenizer,
        sequence_length=sequence_length,
        padding="longest",
        pad_to_multiple_of=PAD_TO_MULTIPLE_OF,
    )


def preprocessor_checkpoint_fields(preprocessor, directory):
    """The `Checkpoint` fields of a `BertPreprocessor`'s tokenizer, its vocab.txt written in `directory`.

    Example:
    >>> import tempfile
    >>> from bert_keras.text.preprocessor import BertPreprocessor
    >>> from bert_keras.text.tokenizer import BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], lowercase=False)
    >>> fields = preprocessor_checkpoint_fields(BertPreprocessor(tokenizer, 8), tempfile.mkdtemp())
    >>> fields["tokenizer_settings"]["lowercase"], open(fields["vocabulary_file"]).read().split()
    (False, ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'])
    >>> preprocessor_checkpoint_fields(None, tempfile.mkdtemp())
    {}
    """
    if preprocessor is None:
        return {}
    tokenizer = preprocessor.tokenizer
    path = os.path.join(directory, "vocab.txt")
    write_vocabulary(tokenizer.get_vocabulary(), path)
    return {
        "vocabulary_file": path,
        "tokenizer_settings": tokenizer_settings(
            lowercase=tokenizer.lowercase,
            strip_accents=tokenizer.strip_accents,
            tokenize_chinese_chars=tokenizer.tokenize_chinese_chars,
            max_input_chars_per_word=tokenizer.max_input_chars_per_word,
        ),
    }


def checkpoint_tokenizer(checkpoint, **overrides):
    """The `BertTokenizer` of a checkpoint: its vocabulary and tokenizer settings.

    Args:
        checkpoint: a `Checkpoint` with a `vocabulary_file`.
        **overrides: `BertTokenizer` arguments replacing the checkpoint's.

    Raises:
        FileNotFoundError: the checkpoint has no vocabulary (see
            `bert_keras.checkpoints.vocabulary_file`).
        ModuleNotFoundError: TensorFlow or tensorflow-text is not installed.

    Example:
    >>> import os, tempfile
    >>> from bert_keras.checkpoints import Checkpoint, tokenizer_settings
    >>> tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Ok"]
    >>> vocabulary = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> _ = open(vocabulary, "w").write("\\n".join(tokens))
    >>> checkpoint = Checkpoint({}, {}, vocabulary_file=vocabulary,
    ...                         tokenizer_settings=tokenizer_settings(lowercase=False))
    >>> checkpoint_tokenizer(checkpoint)("Ok").numpy().tolist()
    [5]
    """
    # The text modules import TensorFlow, which models fed token ids do without.
    try:
        from bert_keras.text.tokenizer import BertTokenizer
    except ModuleNotFoundError as error:
        if error.name not in ("tensorflow", "tensorflow_text"):
            raise
        raise ModuleNotFoundError(
            f"Raw text needs TensorFlow and tensorflow-text, and {error.name} cannot be "
            f"imported ({error}). Install them, or feed the model token ids: "
            "from_preset(..., preprocessor=None) attaches no preprocessor.",
            name=error.name,
        ) from error
    if checkpoint.vocabulary_file is None:
        raise FileNotFoundError(
            f"{checkpoint.directory or 'The checkpoint'} has no vocabulary: no vocab.txt, nor "
            "a tokenizer.json of a WordPiece model, nor a keras-hub preset's vocabulary.txt."
        )
    return BertTokenizer(
        checkpoint.vocabulary_file, **{**checkpoint.tokenizer_settings, **overrides}
    )


def backbone_inputs(*extra_names):
    """Symbolic int32 inputs `[batch, seq]` named as the backbone's, plus `extra_names`.

    Example:
    >>> sorted(backbone_inputs("masked_positions"))
    ['masked_positions', 'padding_mask', 'segment_ids', 'token_ids']
    """
    return {
        name: keras.Input(shape=(None,), dtype="int32", name=name)
        for name in (*INPUT_NAMES, *extra_names)
    }


def dropout_dense(features, units, dtype, dropout, name):
    """Dropout then a BERT-initialised dense layer named `name` (a task's output layer).

    Example:
    >>> import keras
    >>> features = keras.Input(shape=(8,))
    >>> tuple(dropout_dense(features, 3, "float32", 0.1, "logits").shape)
    (None, 3)
    """
    features = Dropout(dropout, dtype=dtype, name=f"{name}_dropout")(features)
    return Dense(units, kernel_initializer=bert_kernel_initializer(), dtype=dtype, name=name)(
        features
    )


def float32_logits(logits, name="float32_logits"):
    """Casts logits to float32 under any dtype policy.

    Example:
    >>> import keras
    >>> float32_logits(keras.Input(shape=(2,), dtype="float16")).dtype
    'float32'
    """
    return keras.layers.Activation("linear", dtype="float32", name=name)(logits)
