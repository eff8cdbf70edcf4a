"""Data parallelism with each backend's own engine: a machine's devices, or several machines'.

JAX shards each batch over a `keras.distribution.DataParallel` mesh (XLA's
GSPMD computes the global batch's loss and gradients); TensorFlow replicates
the model with `tf.distribute.MirroredStrategy`, which Keras' `fit` drives.
Both take the accelerators when there are any, else the CPU devices (one,
unless the process made more: `--xla_force_host_platform_device_count` or
`tf.config.set_logical_device_configuration`). On one TensorFlow device
there is no strategy, so the run is the one without the flag (a strategy of
one device would reshuffle `fit`'s datasets with other seeds and leave XLA
off).
On torch, Keras has no distribution API: the processes that torchrun starts
(one per device, on one machine or several) train together through
`bert_keras.training.torch_processes`; without torchrun it is an error.

Several machines on JAX: start the same command on each with Keras'
variables `KERAS_DISTRIBUTION_JOB_ADDRESSES` (the coordinator's host:port),
`KERAS_DISTRIBUTION_NUM_PROCESSES` and `KERAS_DISTRIBUTION_PROCESS_ID`;
`keras.distribution.initialize` joins them (`jax.distributed`), the mesh
spans every process's devices and each process reads its share of every
batch. TensorFlow's `MultiWorkerMirroredStrategy` does not run under Keras
3's `fit` (keras-team/keras#20585), so there it is refused: use jax or torch.
"""

import contextlib
import os
import sys

import keras
from absl import logging

from bert_keras.training.execution import DISTRIBUTIONS
from bert_keras.training.execution import check_mesh_shape
from bert_keras.training.execution import tensorflow_devices
from bert_keras.training.execution import xla_left_off
from bert_keras.training.torch_processes import WORLD_SIZE_VARIABLE
from bert_keras.training.torch_processes import TorchProcesses
from bert_keras.training.torch_processes import launched_by_torchrun

NUM_PROCESSES_VARIABLE = "KERAS_DISTRIBUTION_NUM_PROCESSES"
# The axes of model_parallel's device mesh: each batch splits along the
# first, the model's large weights along the second.
MESH_AXES = ("batch", "model")


class DataParallel:
    """Builds and trains a Keras model on every device, a slice of each batch per device.

    Build, compile, restore and `fit` the model under `scope()`. The batch
    that `fit` receives is the global one and must divide evenly among the
    `num_replicas` devices.

    On jax, "model_parallel" also splits the model's large weights among
    the devices of each batch slice (`keras.distribution.ModelParallel` on a
    (batch, model) `DeviceMesh`): `layout_map` says which weights, and
    `num_replicas` is then the mesh's batch size.

    Args:
        distribution: "none" (the default device only), "data_parallel" or
            "model_parallel".
        mesh_shape: (batch, model) device counts of "model_parallel"; their
            product must be the number of devices. Default: (1, devices).
        layout_map: device mesh -> `keras.distribution.LayoutMap`, for
            "model_parallel" (e.g. `bert_keras.models.layout_map.bert_layout_map`).

    Attributes:
        num_replicas: devices that share each batch, over all processes.
        model_splits: devices that share each weight `layout_map` splits
            (the mesh's model size; 1 without "model_parallel").
        num_processes: processes training the model together.
        is_chief: whether this process writes the run's files (process 0).

    Raises:
        ValueError: an unknown distribution, "data_parallel" on Keras'
            torch backend or on several TensorFlow processes,
            "model_parallel" off jax, or a mesh that does not fit the devices.

    Example:
    >>> replicas = DataParallel("none")
    >>> replicas.num_replicas
    1
    >>> with replicas.scope():
    ...     model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> replicas.check_batch_size(4)
    """

    def __init__(self, distribution="none", mesh_shape=None, layout_map=None):
        if distribution not in DISTRIBUTIONS:
            raise ValueError(
                f"distribution is {distribution!r} but must be one of {list(DISTRIBUTIONS)}."
            )
        check_mesh_shape(mesh_shape, distribution)
        if distribution == "none":
            _check_one_process()
        self.distribution = distribution
        self._engine = None
        self.num_replicas = 1
        self.model_splits = 1
        self.num_processes = 1
        self.is_chief = True
        if distribution == "data_parallel":
            self._engine, self.num_replicas = _data_parallel_engine(keras.backend.backend())
        elif distribution == "model_parallel":
            self._engine, (self.num_replicas, self.model_splits) = _model_parallel_engine(
                keras.backend.backend(), mesh_shape, layout_map
            )
        if isinstance(self._engine, TorchProcesses):
            self.num_processes = self._engine.world_size
            self.is_chief = self._engine.rank == 0
        elif self._engine is not None and keras.backend.backend() == "jax":
            import jax

            self.num_processes = jax.process_count()
            self.is_chief = jax.process_index() == 0
        if distribution != "none" and self.num_replicas == 1:
            logging.warning(
                "distribution=%r found one device: the run trains as it would without it%s.",
                distribution,
                "" if self._engine is not None else " (TensorFlow's MirroredStrategy is left off)",
            )

    def prepare(self, model):
        """Readies a model built under `scope()` for training (torch: process 0's weights, hooks)."""
        if isinstance(self._engine, TorchProcesses):
            self._engine.prepare(model)

    def local_share(self, dataset):
        """The part of each global batch of `dataset` this process feeds `fit` (torch: a slice)."""
        if isinstance(self._engine, TorchProcesses):
            return self._engine.local_share(dataset)
        return dataset

    def wait_for_all_processes(self, name):
        """Returns once every process got here (at once with one process)."""
        if isinstance(self._engine, TorchProcesses):
            self._engine.barrier()
        elif self.num_processes > 1:
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

        That is jax, and tensorflow on one device; elsewhere False
        (`bert_keras.training.execution.xla_left_off` says why, and
        `Execution.validate` warns when `--jit_compile` asked for it). On
        torch, Keras' `jit_compile=True` is `torch.compile`, which
        `benchmarks.pretraining --jit_compile` times but the programs leave
        off (unmeasured on GPUs so far).

        Example:
        >>> DataParallel("none").jit_compile() == (keras.backend.backend() != "torch")
        True
        """
        if xla_left_off(keras.backend.backend(), self.distribution):
            return False
        return requested

    def check_batch_size(self, batch_size, name="train_batch_size"):
        """Raises ValueError when `batch_size` does not split evenly among the replicas."""
        if batch_size % self.num_replicas:
            raise ValueError(
                f"{name} is {batch_size} but must be a multiple of the {self.num_replicas} devices "
                f"that data_parallel splits each batch among."
            )


def _check_one_process():
    """Refuses a run of several processes that is not told to share its work."""
    for variable in (WORLD_SIZE_VARIABLE, NUM_PROCESSES_VARIABLE):
        if int(os.environ.get(variable, "1")) > 1:
            raise ValueError(
                f"{variable} is {os.environ[variable]}: several processes were started, but "
                "distribution is 'none', so each would train the whole run and write the same "
                "files. Give --distribution=data_parallel, or start one process."
            )


def _several_processes():
    return int(os.environ.get(NUM_PROCESSES_VARIABLE, "1")) > 1


def _join_jax_processes():
    import jax

    if _several_processes() and not jax.distributed.is_initialized():
        keras.distribution.initialize()


def _data_parallel_engine(backend):
    several_processes = _several_processes()
    if backend == "jax":
        _join_jax_processes()
        distribution = keras.distribution.DataParallel()
        return distribution, distribution.device_mesh.devices.size
    if backend == "tensorflow":
        if several_processes:
            raise ValueError(
                f"{NUM_PROCESSES_VARIABLE} asks for several processes, which data_parallel runs on "
                "the jax backend only: MultiWorkerMirroredStrategy fails under Keras 3's fit "
                "(keras-team/keras#20585)."
            )
        devices = tensorflow_devices()
        if len(devices) == 1:
            # A MirroredStrategy of one device reseeds the reshuffling of `fit`'s
            # datasets and turns XLA off: the run would take other batches and steps.
            return None, 1
        import tensorflow as tf

        strategy = tf.distribute.MirroredStrategy([device.name for device in devices])
        return strategy, strategy.num_replicas_in_sync
    if backend == "torch" and launched_by_torchrun():
        processes = TorchProcesses()
        return processes, processes.world_size
    raise ValueError(
        f"distribution='data_parallel' on Keras' {backend} backend needs processes started by "
        f"torchrun (e.g. torchrun --nproc_per_node=2 {_this_program()} ...): Keras has no "
        f"distribution API on {backend}."
    )


def _this_program():
    """How torchrun would start this program: `-m` and its module, or its script."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None:
        return f"-m {spec.name.removesuffix('.__main__')}"
    return os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "PROGRAM"


def _model_parallel_engine(backend, mesh_shape, layout_map):
    if backend != "jax":
        raise ValueError(
            f"distribution='model_parallel' needs the jax backend: Keras' {backend} backend has no "
            "model parallelism (use data_parallel, or the jax backend)."
        )
    if layout_map is None:
        raise ValueError("distribution='model_parallel' needs a layout_map.")
    _join_jax_processes()
    devices = keras.distribution.list_devices()
    mesh_shape = tuple(mesh_shape or (1, len(devices)))
    if len(mesh_shape) != 2 or mesh_shape[0] * mesh_shape[1] != len(devices):
        raise ValueError(
            f"mesh_shape is {mesh_shape} but must be (batch, model) device counts whose product "
            f"is the {len(devices)} devices."
        )
    mesh = keras.distribution.DeviceMesh(mesh_shape, MESH_AXES, devices)
    distribution = keras.distribution.ModelParallel(
        layout_map=layout_map(mesh), batch_dim_name=MESH_AXES[0]
    )
    return distribution, mesh_shape
