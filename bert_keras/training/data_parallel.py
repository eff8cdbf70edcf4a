"""Data parallelism with each backend's own engine: a machine's devices, or (JAX) several machines'.

JAX shards each batch over a `keras.distribution.DataParallel` mesh (XLA's
GSPMD computes the global batch's loss and gradients); TensorFlow replicates
the model with `tf.distribute.MirroredStrategy`, which Keras' `fit` drives.
Both take the accelerators when there are any, else the CPU devices (one,
unless the process made more: `--xla_force_host_platform_device_count` or
`tf.config.set_logical_device_configuration`).
Keras' torch backend has no distribution, so asking for it there is an error.

Several machines (JAX only): start the same command on each with Keras'
variables `KERAS_DISTRIBUTION_JOB_ADDRESSES` (the coordinator's host:port),
`KERAS_DISTRIBUTION_NUM_PROCESSES` and `KERAS_DISTRIBUTION_PROCESS_ID`;
`keras.distribution.initialize` joins them (`jax.distributed`), the mesh
spans every process's devices and each process reads its share of every
batch. TensorFlow's `MultiWorkerMirroredStrategy` does not run under Keras
3's `fit` (keras-team/keras#20585), so there it is refused.
"""

import contextlib
import os

import keras

from bert_keras.training.execution import DISTRIBUTIONS

NUM_PROCESSES_VARIABLE = "KERAS_DISTRIBUTION_NUM_PROCESSES"


class DataParallel:
    """Builds and trains a Keras model on every device, a slice of each batch per device.

    Build, compile, restore and `fit` the model under `scope()`. The batch
    that `fit` receives is the global one and must divide evenly among the
    `num_replicas` devices.

    Args:
        distribution: "none" (the default device only) or "data_parallel".

    Attributes:
        num_replicas: devices that share each batch, over all processes.
        num_processes: processes training the model together.
        is_chief: whether this process writes the run's files (process 0).

    Raises:
        ValueError: an unknown distribution, or "data_parallel" on Keras'
            torch backend, or on several TensorFlow processes.

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
            raise ValueError(
                f"distribution is {distribution!r} but must be one of {list(DISTRIBUTIONS)}."
            )
        self._engine = None
        self.num_replicas = 1
        self.num_processes = 1
        self.is_chief = True
        if distribution == "data_parallel":
            self._engine, self.num_replicas = _data_parallel_engine(keras.backend.backend())
            if keras.backend.backend() == "jax":
                import jax

                self.num_processes = jax.process_count()
                self.is_chief = jax.process_index() == 0

    def wait_for_all_processes(self, name):
        """Returns once every process got here (at once with one process)."""
        if self.num_processes > 1:
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices(name)

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
        if (
            global_clipnorm is None
            or self.num_replicas == 1
            or keras.backend.backend() != "tensorflow"
        ):
            return global_clipnorm
        return global_clipnorm / self.num_replicas

    def jit_compile(self, requested=True):
        """Keras' `jit_compile` for a model trained under `scope()`: `requested` where XLA can run it.

        That is jax, and tensorflow on one device: Keras turns XLA off under a
        `tf.distribute` strategy, and forced on there it fails to reach the
        other replicas' variables (tensorflow.org/xla/known_issues). Keras'
        torch backend runs eagerly: torch.compile does not run these models
        through Keras 3.

        Example:
        >>> DataParallel("none").jit_compile() == (keras.backend.backend() != "torch")
        True
        """
        backend = keras.backend.backend()
        if backend == "torch" or (backend == "tensorflow" and self._engine is not None):
            return False
        return requested

    def check_batch_size(self, batch_size, name="train_batch_size"):
        """Raises ValueError when `batch_size` does not split evenly among the replicas."""
        if batch_size % self.num_replicas:
            raise ValueError(
                f"{name} is {batch_size} but must be a multiple of the {self.num_replicas} devices "
                f"that data_parallel splits each batch among."
            )


def _data_parallel_engine(backend):
    several_processes = int(os.environ.get(NUM_PROCESSES_VARIABLE, "1")) > 1
    if backend == "jax":
        import jax

        if several_processes and not jax.distributed.is_initialized():
            keras.distribution.initialize()
        distribution = keras.distribution.DataParallel()
        return distribution, distribution.device_mesh.devices.size
    if backend == "tensorflow":
        if several_processes:
            raise ValueError(
                f"{NUM_PROCESSES_VARIABLE} asks for several processes, which data_parallel runs on "
                "the jax backend only: MultiWorkerMirroredStrategy fails under Keras 3's fit "
                "(keras-team/keras#20585)."
            )
        import tensorflow as tf

        devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
        strategy = tf.distribute.MirroredStrategy([device.name for device in devices])
        return strategy, strategy.num_replicas_in_sync
    raise ValueError(
        f"distribution='data_parallel' needs the jax or tensorflow backend: Keras' {backend} "
        "backend has no distribution API."
    )
