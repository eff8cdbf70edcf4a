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
        super()._check_array_inputs(x, y, sample_weight, batch_size, source)
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
