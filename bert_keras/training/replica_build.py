"""Keras' TensorFlow build under `tf.distribute`, from one replica's slice of the first batch.

Before its first step under a strategy, Keras' TensorFlow trainer builds the
model (its metrics and optimizer variables) from the first batch, which it
gets by averaging the replicas' slices of it. When the batch does not split
evenly (3 examples on 2 replicas, or a dataset shorter than one batch), the
slices differ in size and the average fails inside TensorFlow (its `AddN`
op), though the steps themselves take such batches. The build needs only
the features' shapes past the batch axis, which one replica's slice has.
"""

import keras


class BuildsFromOneReplica:
    """Mixin for a `keras.Model` that builds under `tf.distribute` from one replica's slice.

    Example:
    >>> import numpy as np
    >>> class TinyModel(BuildsFromOneReplica, keras.Sequential):
    ...     pass
    >>> model = TinyModel([keras.Input((4,)), keras.layers.Dense(2, kernel_initializer="ones")])
    >>> model.compile(loss="mse")
    >>> model.evaluate(np.ones((3, 4)), np.full((3, 2), 4.0), verbose=0)
    0.0
    """

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        strategy = getattr(self, "_distribute_strategy", None)
        if iterator is not None and strategy is not None:
            import tensorflow as tf

            def one_slice(value):
                if isinstance(value, tf.distribute.DistributedValues):
                    return strategy.experimental_local_results(value)[0]
                return value

            for _, _, batches in iterator:
                data_batch = keras.tree.map_structure(one_slice, next(batches))
                break
            iterator = None
        return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)
