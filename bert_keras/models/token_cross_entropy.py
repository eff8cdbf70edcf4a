"""Token tagging's loss: cross-entropy averaged over the labelled tokens of the whole batch."""

import keras
from keras import ops

from bert_keras.training.replica_losses import mean_over_replicas
from bert_keras.training.replica_losses import reported_as_global
from bert_keras.training.replica_losses import share_of_replicas

# Packed tokens that carry no label of their own: special tokens, padding,
# and a word's pieces after its first.
IGNORED_LABEL = -100
# The parent's settings this loss is built on, which its config records.
_FIXED = {"from_logits": True, "reduction": "sum", "axis": -1}


@keras.saving.register_keras_serializable(package="bert_keras")
class TokenCrossEntropy(keras.losses.SparseCategoricalCrossentropy):
    """Sparse cross-entropy from logits, averaged over the tokens whose label is not `ignore_class`.

    On one device it is Keras' `SparseCategoricalCrossentropy(from_logits=True,
    ignore_class=-100)`. Under data parallelism each replica divides its
    slice's sum by the replicas' mean count of labelled tokens
    (`bert_keras.training.replica_losses`), and under `tf.distribute`, which
    sums the replicas' gradients, by the replica count too, so the replicas
    train as one device on the whole batch; Keras' loss would average each
    slice's mean.

    Args:
        ignore_class: the label of tokens that count nothing (None: every
            token counts).
        name: the loss's name.
        **kwargs: `dtype`; and, as its config records them, `from_logits=True`,
            `reduction="sum"` and `axis=-1`, which are the only values it takes.

    Example:
    >>> import numpy as np
    >>> logits = np.log(np.array([[[0.8, 0.2], [0.5, 0.5], [0.1, 0.9]]], "float32"))
    >>> round(float(TokenCrossEntropy()(np.array([[0, -100, 1]]), logits)), 4)
    0.1643
    """

    def __init__(self, ignore_class=IGNORED_LABEL, name="token_cross_entropy", **kwargs):
        for argument, value in _FIXED.items():
            if kwargs.setdefault(argument, value) != value:
                raise ValueError(
                    f"TokenCrossEntropy takes {argument}={value!r} only, got {kwargs[argument]!r}: "
                    "it reads logits and reduces to the mean over labelled tokens itself (use "
                    "keras.losses.SparseCategoricalCrossentropy for other settings)."
                )
        super().__init__(ignore_class=ignore_class, name=name, **kwargs)
        self.ignore_class = ignore_class

    def __call__(self, y_true, y_pred, sample_weight=None):
        return reported_as_global(super().__call__(y_true, y_pred, sample_weight))

    def call(self, y_true, y_pred):
        per_token = super().call(y_true, y_pred)  # 0 where the label is ignore_class
        labelled = ops.ones_like(per_token)
        if self.ignore_class is not None:
            labelled = ops.cast(
                ops.not_equal(y_true, ops.cast(self.ignore_class, y_true.dtype)), per_token.dtype
            )
        count = mean_over_replicas(ops.sum(labelled), loss=per_token)
        # Keras divides only its mean reductions among tf.distribute's replicas.
        return share_of_replicas(ops.divide_no_nan(per_token, count))
