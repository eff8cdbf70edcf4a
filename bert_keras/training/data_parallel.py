"""Data parallelism over one machine's devices, with each backend's own engine.

JAX shards each batch over a `keras.distribution.DataParallel` mesh (XLA's
GSPMD computes the global batch's loss and gradients); TensorFlow replicates
the model with `tf.distribute.MirroredStrategy`, which Keras' `fit` drives.
Both take the accelerators when there are any, else the CPU devices (one,
unless the process made more: `--xla_force_host_platform_device_count` or
`tf.config.set_logical_device_configuration`).
Keras' torch backend has no distribution, so asking for it there is an error.
"""

import contextlib

import keras

DISTRIBUTIONS = ("none", "data_parallel")


class DataParallel:
    """Builds and trains a Keras model on every local device, a slice of each batch per device.

    Build, compile, restore and `fit` the model under `scope()`. The batch
    that `fit` receives is the global one and must divide evenly among the
    `num_replicas` devices.

    Args:
        distribution: "none" (the default device only) or "data_parallel".

    Raises:
        ValueError: an unknown distribution, or "data_parallel" on Keras'
            torch backend.

    Example:
    >>> replicas = DataParallel("none")
    >>> replicas.num_replicas
    1
    >>> with replicas.scope():
    ...     model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> replicas.check_batch_size(4)
    """

    def __init__(self, distribution="none"):
        if distribution not in DISTRIBUTIONS:
            raise ValueError(f"distribution is {distribution!r} but must be one of {list(DISTRIBUTIONS)}.")
        self.distribution = distribution
        self._engine = None
        self.num_replicas = 1
        if distribution == "data_parallel":
            self._engine, self.num_replicas = _data_parallel_engine(keras.backend.backend())

    def scope(self):
        """The context under which to build, restore and train the model."""
        return contextlib.nullcontext() if self._engine is None else self._engine.scope()

    def clipnorm(self, global_clipnorm):
        """The optimizer's `global_clipnorm` that clips each replica's gradient at `global_clipnorm`.

        On JAX the mesh computes the global batch's gradient, clipped as on
        one device. Keras' TensorFlow optimizer clips each replica's share
        (its loss is divided by the replica count) before summing them:
        clipping those shares at `global_clipnorm / replicas` averages
        replica gradients each clipped at `global_clipnorm`, as the original
        BERT's TPU shards do.

        Example:
        >>> DataParallel("none").clipnorm(1.0)
        1.0
        """
        if global_clipnorm is None or self.num_replicas == 1 or keras.backend.backend() != "tensorflow":
            return global_clipnorm
        return global_clipnorm / self.num_replicas

    def check_batch_size(self, batch_size, name="train_batch_size"):
        """Raises ValueError when `batch_size` does not split evenly among the replicas."""
        if batch_size % self.num_replicas:
            raise ValueError(
                f"{name} is {batch_size} but must be a multiple of the {self.num_replicas} devices "
                f"that data_parallel splits each batch among."
            )


def _data_parallel_engine(backend):
    if backend == "jax":
        distribution = keras.distribution.DataParallel()
        return distribution, distribution.device_mesh.devices.size
    if backend == "tensorflow":
        import tensorflow as tf

        devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
        strategy = tf.distribute.MirroredStrategy([device.name for device in devices])
        return strategy, strategy.num_replicas_in_sync
    raise ValueError(
        f"distribution='data_parallel' needs the jax or tensorflow backend: Keras' {backend} "
        "backend has no distribution API."
    )
