"""Multiple choice (SWAG): one [CLS] score per (context, choice) pair."""

import os

import keras
from keras import ops

from bert_keras.checkpoints.checkpoint import OWN_CONFIG_FILE
from bert_keras.checkpoints.checkpoint import read_json
from bert_keras.models.bert_backbone import INPUT_NAMES
from bert_keras.models.bert_task import BertTask
from bert_keras.models.bert_task import check_not_a_backbone_preset
from bert_keras.models.bert_task import dropout_dense
from bert_keras.models.input_checks import check_positive_count
from bert_keras.models.text_inputs import holds_dataset
from bert_keras.models.text_inputs import holds_text


@keras.saving.register_keras_serializable(package="bert_keras")
class BertMultipleChoice(BertTask):
    """Scores each choice through [CLS]; softmax across choices (Devlin et al. §4.4).

    Inputs are the backbone's three tensors with a choice axis,
    `[batch, num_choices, seq]`, one packed `[CLS] context [SEP] choice [SEP]`
    per choice. Outputs float32 logits `[batch, num_choices]`.

    Args:
        backbone: a `BertBackbone`.
        num_choices: number of choices per example (SWAG: 4).
        dropout: dropout before the scoring layer.
        preprocessor: optional `BertPreprocessor`; with one, `fit`, `evaluate`
            and `predict` take text as a pair `(contexts, choices)`:
            contexts `[batch]` and choices `[batch, num_choices]` strings.
        **kwargs: standard `keras.Model` arguments.

    Example:
    >>> import numpy as np
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> chooser = BertMultipleChoice(backbone, num_choices=4)
    >>> inputs = {"token_ids": np.ones((2, 4, 5)), "segment_ids": np.zeros((2, 4, 5)),
    ...           "padding_mask": np.ones((2, 4, 5))}
    >>> tuple(chooser.predict(inputs, verbose=0).shape)
    (2, 4)
    """

    checkpoint_head = "classifier"
    one_label_per_example = True
    output_layer_name = "choice_score"
    default_learning_rate = 2e-5

    def __init__(self, backbone, num_choices, dropout=0.1, **kwargs):
        check_positive_count("num_choices", num_choices)
        inputs = {
            name: keras.Input(shape=(num_choices, None), dtype="int32", name=name)
            for name in INPUT_NAMES
        }
        fold = FoldChoices(name="fold_choices")
        pooled_output = backbone.pooled_output(
            {name: fold(tensor) for name, tensor in inputs.items()}
        )  # [batch * num_choices, hidden]; the last block on [CLS] only
        scores = dropout_dense(
            pooled_output, 1, backbone.dtype_policy, dropout, "choice_score"
        )  # [batch * num_choices, 1]
        logits = UnfoldChoices(num_choices, name="choice_logits")(scores)
        super().__init__(backbone, inputs=inputs, outputs=logits, **kwargs)
        self.num_choices = num_choices
        self.label_classes = num_choices
        self.dropout = dropout

    def preset_task_config(self):
        """`BertTask.preset_task_config` and the choices, as `tasks.multiple_choice` records them."""
        return {
            **super().preset_task_config(),
            "task": "multiple_choice",
            "num_choices": self.num_choices,
        }

    @classmethod
    def from_preset(cls, preset, sequence_length=None, **kwargs):
        """`BertTask.from_preset`, with `num_choices` by default what the checkpoint recorded.

        `tasks.multiple_choice` records it in its export's bert_keras.json.

        Raises:
            ValueError: no `num_choices` given and none recorded in `preset`.

        Example:
        >>> import os, tempfile
        >>> directory = tempfile.mkdtemp() + "/swag"
        >>> vocabulary = os.path.join(tempfile.mkdtemp(), "vocab.txt")
        >>> _ = open(vocabulary, "w").write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
        >>> from bert_keras.models.bert_backbone import BertBackbone
        >>> BertBackbone(5, 1, 2, 8, 16).save_to_preset(directory, vocabulary_file=vocabulary)
        >>> BertMultipleChoice.from_preset(directory)
        Traceback (most recent call last):
        ...
        ValueError: ... records no num_choices (tasks.multiple_choice's export does): give num_choices.
        >>> BertMultipleChoice.from_preset(directory, num_choices=3).num_choices
        3
        """
        if "num_choices" not in kwargs:
            check_not_a_backbone_preset(cls, preset)
            kwargs["num_choices"] = recorded_num_choices(preset)
            if kwargs["num_choices"] is None:
                raise ValueError(
                    f"{preset} records no num_choices (tasks.multiple_choice's export does): "
                    "give num_choices."
                )
        return super().from_preset(preset, sequence_length, **kwargs)

    def _check_array_inputs(self, x, y=None, sample_weight=None, batch_size=None, source=""):
        """`BertTask`'s checks, and that each example (ids, or texts in lists) has `num_choices` choices."""
        super()._check_array_inputs(x, y, sample_weight, batch_size, source)
        token_ids = x.get("token_ids") if isinstance(x, dict) else None
        shape = tuple(getattr(token_ids, "shape", ()))
        if shape and (len(shape) != 3 or shape[1] not in (None, self.num_choices)):
            raise ValueError(
                f"{source}x['token_ids'] has the shape {shape}, but the model takes "
                f"[batch, num_choices={self.num_choices}, sequence] token ids."
            )
        if not isinstance(x, (tuple, dict)) and not holds_dataset(x) and holds_text(x):
            raise ValueError(
                f"{source}x is a {type(x).__name__} of texts; BertMultipleChoice takes text as a "
                "tuple (contexts, choices): contexts [batch] and choices [batch, num_choices] "
                "strings."
            )
        if not (isinstance(x, tuple) and len(x) == 2 and isinstance(x[1], list)):
            return
        for index, choices in enumerate(x[1]):
            if len(choices) != self.num_choices:
                raise ValueError(
                    f"{source}x[1][{index}] holds {len(choices)} choices, but the model takes "
                    f"num_choices={self.num_choices}."
                )

    def preprocess_text(self, texts):
        """Packs `(contexts [batch], choices [batch, num_choices])` as one pair per choice.

        Each choice becomes `[CLS] context [SEP] choice [SEP]`; the features
        are `[batch, num_choices, sequence_length]`, the model's inputs.
        """
        import tensorflow as tf

        if not isinstance(texts, tuple) or len(texts) != 2:
            raise ValueError(
                "BertMultipleChoice takes text as a pair (contexts, choices): contexts "
                "[batch] and choices [batch, num_choices] strings."
            )
        contexts, choices = (tf.convert_to_tensor(part, tf.string) for part in texts)
        if choices.shape.rank != 2 or choices.shape[-1] not in (None, self.num_choices):
            raise ValueError(
                f"choices must be [batch, num_choices={self.num_choices}] strings, got shape "
                f"{choices.shape}."
            )
        repeated_contexts = tf.repeat(contexts, self.num_choices)  # [batch * num_choices]
        features = self.preprocessor((repeated_contexts, tf.reshape(choices, [-1])))
        return {
            name: tf.reshape(feature, [-1, self.num_choices, tf.shape(feature)[-1]])
            for name, feature in features.items()
        }  # each [batch, num_choices, sequence_length]

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def get_config(self):
        return {**super().get_config(), "num_choices": self.num_choices, "dropout": self.dropout}


def recorded_num_choices(preset):
    """The num_choices of a checkpoint directory's bert_keras.json task, or None.

    Example:
    >>> import json, os, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> task = {"task": {"task": "multiple_choice", "num_choices": 4}}
    >>> _ = open(os.path.join(directory, "bert_keras.json"), "w").write(json.dumps(task))
    >>> recorded_num_choices(directory), recorded_num_choices(tempfile.mkdtemp())
    (4, None)
    """
    path = os.path.join(os.fspath(preset), OWN_CONFIG_FILE)
    if not os.path.isfile(path):
        return None
    task = read_json(path).get("task")
    return task.get("num_choices") if isinstance(task, dict) else None


@keras.saving.register_keras_serializable(package="bert_keras")
class FoldChoices(keras.layers.Layer):
    """`[batch, num_choices, seq]` → `[batch * num_choices, seq]`.

    Example:
    >>> import numpy as np
    >>> tuple(FoldChoices()(np.zeros((2, 4, 5), "int32")).shape)
    (8, 5)
    """

    def call(self, inputs):
        return ops.reshape(inputs, (-1, ops.shape(inputs)[-1]))

    def compute_output_spec(self, inputs):
        return keras.KerasTensor((None, inputs.shape[-1]), dtype=inputs.dtype)


@keras.saving.register_keras_serializable(package="bert_keras")
class UnfoldChoices(keras.layers.Layer):
    """Scores `[batch * num_choices, 1]` → float32 logits `[batch, num_choices]`.

    Example:
    >>> import numpy as np
    >>> tuple(UnfoldChoices(4)(np.zeros((8, 1), "float32")).shape)
    (2, 4)
    """

    def __init__(self, num_choices, **kwargs):
        super().__init__(**{"dtype": "float32", **kwargs})
        self.num_choices = num_choices

    def call(self, scores):
        return ops.reshape(ops.cast(scores, "float32"), (-1, self.num_choices))

    def compute_output_spec(self, scores):
        return keras.KerasTensor((None, self.num_choices), dtype="float32")

    def get_config(self):
        return {**super().get_config(), "num_choices": self.num_choices}
