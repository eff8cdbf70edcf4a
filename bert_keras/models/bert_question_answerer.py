"""Extractive question answering: start and end logits over the sequence."""

import keras
import numpy as np
from keras import ops

from bert_keras.layers.dense import Dense
from bert_keras.layers.initializers import bert_kernel_initializer
from bert_keras.models.bert_task import BertTask
from bert_keras.models.bert_task import backbone_inputs
from bert_keras.models.bert_task import ignored_class
from bert_keras.models.bert_task import reads_class_ids
from bert_keras.models.input_checks import check_one_label_per_example
from bert_keras.models.input_checks import check_one_text_per_example
from bert_keras.models.input_checks import check_token_positions
from bert_keras.models.text_inputs import holds_dataset
from bert_keras.models.text_inputs import holds_text


@keras.saving.register_keras_serializable(package="bert_keras")
class BertQuestionAnswerer(BertTask):
    """Sequence output → dense(2) → start and end logits (Devlin et al. §4.2).

    Outputs a dict of float32 `start_logits` and `end_logits`, each
    `[batch, seq]`. Padding positions get a very low logit, so no span starts
    or ends there. For SQuAD v2.0 the [CLS] position (index 0) stands for "no
    answer": label unanswerable questions with start = end = 0. The default
    loss is the mean of the start and end cross-entropies.

    Args:
        backbone: a `BertBackbone`.
        preprocessor: optional `BertPreprocessor`; with one, `fit`, `evaluate`
            and `predict` take `(questions, contexts)` pairs of strings. Span
            labels index the packed tokens; `BertPreprocessor.call_with_offsets`
            maps them to text (as `bert_keras.finetuning.squad` does).
        **kwargs: standard `keras.Model` arguments.

    Span labels, in `fit` and `evaluate` (arrays, or in a dataset's
    elements), are a dict `{"start_logits": starts, "end_logits": ends}` or
    a pair `(starts, ends)`, as transformers takes `start_positions` and
    `end_positions`; each holds one token position per example. (Keras would
    match a pair to the outputs in the sorted order of their names, end
    first: the model maps it by position instead.)

    Example:
    >>> import numpy as np
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> reader = BertQuestionAnswerer(backbone)
    >>> inputs = {"token_ids": np.ones((2, 5)), "segment_ids": np.zeros((2, 5)),
    ...           "padding_mask": np.ones((2, 5))}
    >>> tuple(reader.predict(inputs, verbose=0)["start_logits"].shape)
    (2, 5)
    """

    checkpoint_head = "question_answering"
    output_layer_name = "span_logits"
    pads_batches_by_length = False  # per-token span logits
    reads_pooled_output = False

    def __init__(self, backbone, **kwargs):
        inputs = backbone_inputs()
        sequence_output = backbone(inputs)["sequence_output"]
        span_logits = Dense(
            2,
            kernel_initializer=bert_kernel_initializer(),
            dtype=backbone.dtype_policy,
            name="span_logits",
        )(sequence_output)  # [batch, seq, 2]
        start_logits, end_logits = SpanLogits(name="span_split")(
            span_logits, inputs["padding_mask"]
        )
        super().__init__(
            backbone,
            inputs=inputs,
            outputs={"start_logits": start_logits, "end_logits": end_logits},
            **kwargs,
        )

    def _check_array_inputs(self, x, y=None, sample_weight=None, batch_size=None, source=""):
        """`BertTask`'s checks, and that each span label indexes a token of its packed example."""
        if y is not None and not isinstance(y, dict) and not _is_label_pair(y):
            raise ValueError(
                f"{source}y is {_described(y)}; BertQuestionAnswerer's span labels are a dict "
                "{'start_logits': starts, 'end_logits': ends} or a pair (starts, ends), each "
                "one token position per example."
            )
        y = span_labels(y)
        super()._check_array_inputs(x, y, sample_weight, batch_size, source)
        check_one_text_per_example(
            x, f"{source}x", "questions and contexts as a tuple (questions, contexts)"
        )
        if not isinstance(x, (tuple, dict)) and not holds_dataset(x) and holds_text(x):
            raise ValueError(
                f"{source}x is a {type(x).__name__} of texts; BertQuestionAnswerer takes text as "
                "a tuple (questions, contexts), each [batch] strings: an answer is a span of "
                "the context."
            )
        if not isinstance(y, dict):
            return
        losses = {name: self._loss_of(name) for name in ("start_logits", "end_logits") if name in y}
        losses = {name: loss for name, loss in losses.items() if reads_class_ids(loss)}
        lengths = self._packed_lengths(x) if losses else None
        if lengths is None:
            return
        for name, loss in losses.items():
            check_one_label_per_example(y[name], f"{source}y[{name!r}]")
            check_token_positions(y[name], lengths, f"{source}y[{name!r}]", ignored_class(loss))

    def _labels_as_read(self, y):
        """Span labels in a pair `(starts, ends)` as the dict of the outputs they label."""
        return span_labels(super()._labels_as_read(y))

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """Keras' loss, span labels given as a pair `(starts, ends)` mapped by position."""
        return super().compute_loss(x, span_labels(y), y_pred, sample_weight, training=training)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        """Keras' metrics, span labels given as a pair `(starts, ends)` mapped by position."""
        return super().compute_metrics(x, span_labels(y), y_pred, sample_weight)

    def _loss_of(self, name):
        """The compiled loss of output `name` (one loss may serve both)."""
        return self.loss.get(name) if isinstance(self.loss, dict) else self.loss

    def _packed_lengths(self, x):
        """Each example's packed tokens, where `x` holds them in arrays or lists; else None."""
        if holds_text(x):
            if holds_dataset(x) or self.preprocessor is None:  # the latter: an error follows
                return None
            x = self._packed_texts(x)
        if not isinstance(x, dict) or "padding_mask" not in x:
            return None
        return np.sum(np.asarray(x["padding_mask"]), axis=-1)

    def default_loss(self):
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        return {"start_logits": loss, "end_logits": loss}

    def compile(self, *args, **kwargs):
        kwargs.setdefault("loss_weights", {"start_logits": 0.5, "end_logits": 0.5})
        super().compile(*args, **kwargs)


def span_labels(y):
    """Span labels `y` by output name: a pair `(starts, ends)` as a dict; anything else as it is.

    Keras matches labels in a tuple or list to a dict of outputs in the
    sorted order of the outputs' names (`end_logits` first), so a pair in
    the order transformers takes (`start_positions`, `end_positions`)
    would train each output on the other's labels.

    Example:
    >>> span_labels(([3, 1], [5, 1]))
    {'start_logits': [3, 1], 'end_logits': [5, 1]}
    >>> span_labels({"end_logits": [5], "start_logits": [3]})
    {'end_logits': [5], 'start_logits': [3]}
    """
    if _is_label_pair(y):
        return {"start_logits": y[0], "end_logits": y[1]}
    return y


def _is_label_pair(y):
    """Whether `y` is a tuple or list of two label arrays (not of two numbers, nor pairs)."""
    if not isinstance(y, (tuple, list)) or len(y) != 2:
        return False
    return all(
        isinstance(part, (list, tuple)) or len(getattr(part, "shape", ())) >= 1 for part in y
    )


def _described(y):
    shape = getattr(y, "shape", None)
    if shape is not None:
        return f"a {type(y).__name__} of the shape {tuple(shape)}"
    if isinstance(y, (list, tuple)):
        return f"a {type(y).__name__} of {len(y)}"
    return f"a {type(y).__name__}"


@keras.saving.register_keras_serializable(package="bert_keras")
class SpanLogits(keras.layers.Layer):
    """Splits `[batch, seq, 2]` logits into float32 start and end, padding masked.

    Example:
    >>> import numpy as np
    >>> start, end = SpanLogits()(np.zeros((1, 3, 2), "float32"), np.array([[1, 1, 0]]))
    >>> float(start[0, 2]) < -1e8
    True
    """

    def __init__(self, **kwargs):
        super().__init__(**{"dtype": "float32", **kwargs})

    def call(self, span_logits, padding_mask):
        span_logits = ops.cast(span_logits, "float32")
        padding = ops.cast(ops.logical_not(ops.cast(padding_mask, "bool")), "float32")
        start_logits, end_logits = ops.unstack(span_logits, 2, axis=-1)
        return start_logits - 1e9 * padding, end_logits - 1e9 * padding

    def compute_output_spec(self, span_logits, padding_mask):
        # Two distinct tensors: one spec returned twice would make the
        # Functional graph read both outputs from the same (last) slot.
        shape = span_logits.shape[:-1]
        return keras.KerasTensor(shape, dtype="float32"), keras.KerasTensor(shape, dtype="float32")
