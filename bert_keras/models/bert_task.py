"""What every task model shares: a backbone, its dtype, its serialisation."""

import keras

from bert_keras.layers.dropout import Dropout
from bert_keras.layers.initializers import bert_kernel_initializer
from bert_keras.models.bert_backbone import INPUT_NAMES
from bert_keras.training.optimizers import create_optimizer


class BertTask(keras.Model):
    """Base of the Functional task models built on a `BertBackbone`.

    Subclasses build their graph in `__init__` and call
    `super().__init__(backbone, inputs=..., outputs=...)`. This class follows
    the backbone's dtype policy (so `compile()` adds loss scaling under
    mixed_float16) and serialises the backbone inside `get_config()`;
    subclasses add their own constructor arguments to the config.
    `compile()` fills in what is left "auto": the paper's AdamW recipe (see
    `bert_keras.training.create_optimizer`) at the task's default learning
    rate, and the task's loss and metrics.

    Example:
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> inputs = backbone_inputs()
    >>> task = BertTask(backbone, inputs=inputs,
    ...                 outputs=backbone(inputs)["pooled_output"])
    >>> task.backbone is backbone
    True
    """

    def __init__(self, backbone, inputs, outputs, **kwargs):
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        self.dtype_policy = backbone.dtype_policy
        self.backbone = backbone

    default_learning_rate = 5e-5

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
            metrics: metrics, or "auto" for the task's.
            learning_rate: peak learning rate of the "auto" optimizer;
                the task's `default_learning_rate` when None.
            num_train_steps: total optimizer steps, for the schedule.
            warmup_proportion: fraction of `num_train_steps` spent warming up.
            **kwargs: passed on to `keras.Model.compile`.
        """
        if optimizer == "auto":
            steps = num_train_steps
            optimizer = create_optimizer(
                learning_rate or self.default_learning_rate,
                num_train_steps=steps,
                num_warmup_steps=int(warmup_proportion * steps) if steps else 0,
            )
        super().compile(
            optimizer=optimizer,
            loss=self.default_loss() if loss == "auto" else loss,
            metrics=self.default_metrics() if metrics == "auto" else metrics,
            **kwargs,
        )

    def default_loss(self):
        """The task's loss; None when the model computes its own."""
        return None

    def default_metrics(self):
        """The task's metrics."""
        return None

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.layers.serialize(self.backbone),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["backbone"] = keras.layers.deserialize(config["backbone"])
        return cls(**config)


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
    return keras.layers.Dense(
        units, kernel_initializer=bert_kernel_initializer(), dtype=dtype, name=name
    )(features)


def float32_logits(logits, name="float32_logits"):
    """Casts logits to float32 under any dtype policy.

    Example:
    >>> import keras
    >>> float32_logits(keras.Input(shape=(2,), dtype="float16")).dtype
    'float32'
    """
    return keras.layers.Activation("linear", dtype="float32", name=name)(logits)
