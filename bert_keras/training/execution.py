"""How a run trains: distribution, precision, compilation; and the flags every program takes for it.

Pretraining and the fine-tuning programs define the same flags with
`define_execution_flags` and check them with `Execution.validate`, so each
behaves the same everywhere. Imports neither Keras nor TensorFlow at module
level: a program checks its flags before the backend loads.
"""

import dataclasses
import os
import tempfile

from absl import flags
from absl import logging

from bert_keras.atomic_files import file_in_the_way

# The flags this module defines belong to the program that asks for them, so
# that its --help lists them (absl's key flags of the main module).
flags.disclaim_key_flags()

DISTRIBUTIONS = ("none", "data_parallel", "model_parallel")
MIXED_PRECISION_POLICIES = {
    "none": "float32",
    "bfloat16": "mixed_bfloat16",
    "float16": "mixed_float16",
}


@dataclasses.dataclass(frozen=True)
class Execution:
    """The settings that decide where and in which precision a model trains.

    Attributes:
        distribution: "none" (the default device), "data_parallel" or (jax)
            "model_parallel" (see `bert_keras.training.data_parallel`).
        mixed_precision: "none", "bfloat16" or "float16": the backbone's
            dtype policy is `MIXED_PRECISION_POLICIES[mixed_precision]`;
            variables stay float32 and float16 adds loss scaling.
        jit_compile: XLA-compile the training step where XLA can run it
            (`DataParallel.jit_compile`); None: where it pays, which the
            run decides (`FineTuningRun.jit_compile`; pretraining always).
        steps_per_execution: batches per compiled call (1 on torch).
        mesh_shape: (batch, model) device counts of "model_parallel", or
            None for (1, every device).
        compilation_cache_dir: a directory where XLA's compiled programs
            stay for later runs (jax; `use_compilation_cache`), or None.

    Example:
    >>> Execution(mixed_precision="bfloat16").dtype_policy
    'mixed_bfloat16'
    >>> Execution(mixed_precision="bfloat16").compute_dtype, Execution().compute_dtype
    ('bfloat16', 'float32')
    >>> Execution(steps_per_execution=0).validate()
    Traceback (most recent call last):
    ...
    ValueError: steps_per_execution is 0 but must be at least 1.
    """

    distribution: str = "none"
    mixed_precision: str = "none"
    jit_compile: bool | None = None
    steps_per_execution: int = 1
    mesh_shape: tuple = None
    compilation_cache_dir: str | None = None

    @property
    def dtype_policy(self):
        """The Keras dtype policy name of the backbone."""
        return MIXED_PRECISION_POLICIES[self.mixed_precision]

    @property
    def compute_dtype(self):
        """The dtype the backbone computes in: float32, or the mixed precision's."""
        return "float32" if self.mixed_precision == "none" else self.mixed_precision

    def validate(self):
        """Raises ValueError naming the first setting this backend cannot run."""
        _check_choice("distribution", self.distribution, DISTRIBUTIONS)
        _check_choice("mixed_precision", self.mixed_precision, MIXED_PRECISION_POLICIES)
        check_mesh_shape(self.mesh_shape, self.distribution)
        if self.steps_per_execution < 1:
            raise ValueError(
                f"steps_per_execution is {self.steps_per_execution} but must be at least 1."
            )
        import keras

        if self.compilation_cache_dir and keras.backend.backend() != "jax":
            raise ValueError(
                f"compilation_cache_dir is {self.compilation_cache_dir!r} but only jax keeps "
                f"XLA's compiled programs on disk, not {keras.backend.backend()}: leave it unset."
            )
        blocking = self.compilation_cache_dir and file_in_the_way(self.compilation_cache_dir)
        if blocking:
            raise ValueError(
                f"compilation_cache_dir is {self.compilation_cache_dir!r} but {blocking} is a "
                "file: name a directory."
            )
        if self.compilation_cache_dir:
            _check_writable_directory("compilation_cache_dir", self.compilation_cache_dir)
        left_off = self.jit_compile and xla_left_off(keras.backend.backend(), self.distribution)
        if left_off:
            logging.warning("jit_compile is True but %s: the flag is ignored.", left_off)
        if self.steps_per_execution > 1 and keras.backend.backend() == "torch":
            raise ValueError(
                f"steps_per_execution is {self.steps_per_execution} but Keras' torch backend runs "
                "one batch per call: use 1, or the jax or tensorflow backend."
            )

    def use_compilation_cache(self):
        """Keeps the programs XLA compiles in this process in `compilation_cache_dir` (jax).

        A later run that compiles the same program (the same model, batch
        width, precision and XLA flags) loads it from there instead: on
        jax, compiling each batch width is most of a short fine-tuning
        run's first steps. Every program goes in, however quick its
        compile. JAX runs what it finds there as it is, so the directory
        must be one that only trusted users can write. Does nothing when
        `compilation_cache_dir` is None.

        Example:
        >>> Execution().use_compilation_cache()  # no directory: nothing changes
        """
        if not self.compilation_cache_dir:
            return
        import jax

        jax.config.update("jax_compilation_cache_dir", self.compilation_cache_dir)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


@dataclasses.dataclass(frozen=True)
class ExecutionFlags:
    """The `absl.flags.FlagHolder`s `define_execution_flags` returns."""

    distribution: flags.FlagHolder
    mixed_precision: flags.FlagHolder
    jit_compile: flags.FlagHolder
    steps_per_execution: flags.FlagHolder
    mesh_shape: flags.FlagHolder
    compilation_cache_dir: flags.FlagHolder

    def execution(self):
        """The parsed flags as an `Execution`."""
        return Execution(
            distribution=self.distribution.value,
            mixed_precision=self.mixed_precision.value,
            jit_compile=self.jit_compile.value,
            steps_per_execution=self.steps_per_execution.value,
            mesh_shape=_mesh_shape(self.mesh_shape),
            compilation_cache_dir=self.compilation_cache_dir.value,
        )


def define_execution_flags(flag_values=flags.FLAGS, allow_override=False):
    """Defines --distribution, --mixed_precision, --jit_compile, --steps_per_execution,
    --mesh_shape and --compilation_cache_dir.

    Args:
        flag_values: the `absl.flags.FlagValues` to define them in.
        allow_override: absl's `allow_override`, for programs that share a
            process with others defining the same flags.

    Returns:
        `ExecutionFlags`.

    Example:
    >>> flag_values = flags.FlagValues()
    >>> execution_flags = define_execution_flags(flag_values)
    >>> _ = flag_values(["program", "--mixed_precision=bfloat16", "--nojit_compile"])
    >>> execution_flags.execution()
    Execution(distribution='none', mixed_precision='bfloat16', jit_compile=False, \
steps_per_execution=1, mesh_shape=None, compilation_cache_dir=None)
    """
    common = {"flag_values": flag_values, "allow_override": allow_override}
    execution_flags = ExecutionFlags(
        distribution=flags.DEFINE_enum(
            "distribution",
            "none",
            DISTRIBUTIONS,
            "data_parallel: split each batch among this machine's GPUs/TPUs (jax, tensorflow), "
            "and among processes on several machines (jax); model_parallel (jax): also split "
            "the large weights, on a --mesh_shape mesh (see bert_keras/training/data_parallel.py).",
            **common,
        ),
        mixed_precision=flags.DEFINE_enum(
            "mixed_precision",
            "none",
            list(MIXED_PRECISION_POLICIES),
            "Compute in bfloat16 or float16 (with loss scaling); weights stay float32.",
            **common,
        ),
        jit_compile=flags.DEFINE_bool(
            "jit_compile",
            None,
            "XLA-compile the training step (jax, tensorflow; Keras' torch backend runs eagerly "
            "either way). Unset: where it pays; fine-tuning on TensorFlow without a GPU or TPU "
            "runs its steps without XLA, which would compile each batch width anew.",
            **common,
        ),
        steps_per_execution=flags.DEFINE_integer(
            "steps_per_execution", 1, "Batches per compiled call (jax, tensorflow).", **common
        ),
        mesh_shape=flags.DEFINE_list(
            "mesh_shape",
            None,
            "model_parallel's device mesh, 'BATCH,MODEL' (e.g. 2,4); default 1,ALL_DEVICES.",
            **common,
        ),
        compilation_cache_dir=flags.DEFINE_string(
            "compilation_cache_dir",
            None,
            "jax: keep XLA's compiled programs in this directory, so that later runs of the same "
            "model, batch widths and flags load them instead of compiling. A directory only "
            "trusted users can write: JAX runs the programs it finds there.",
            **common,
        ),
    )
    flags.register_validator(  # at parsing, before TensorFlow and the backend load
        "mesh_shape",
        lambda counts: counts is None or all(_is_count(count) for count in counts),
        "--mesh_shape takes device counts such as 2,4.",
        flag_values=flag_values,
    )
    return execution_flags


def _is_count(text):
    """Whether `text` is a count in ASCII digits (`str.isdigit` takes "²" too, which `int` refuses)."""
    text = text.strip()
    return text.isascii() and text.isdigit()


def xla_left_off(backend, distribution):
    """Why the training step runs without XLA on `backend` with `distribution`, or None if it can.

    Keras turns XLA off under a `tf.distribute` strategy (forced on, it
    fails to reach the other replicas' variables:
    tensorflow.org/xla/known_issues), which TensorFlow's data_parallel uses
    on several devices (`tensorflow_devices`). On torch, Keras'
    `jit_compile=True` is `torch.compile`, which the programs leave off (its
    first step compiles for minutes on CPUs).

    Example:
    >>> xla_left_off("jax", "data_parallel") is None
    True
    >>> xla_left_off("torch", "none")
    "Keras' torch backend runs the training step eagerly here (torch.compile is left off)"
    """
    if backend == "torch":
        return (
            "Keras' torch backend runs the training step eagerly here (torch.compile is left off)"
        )
    if backend == "tensorflow" and distribution != "none" and len(tensorflow_devices()) > 1:
        return (
            f"Keras runs TensorFlow's MirroredStrategy (distribution={distribution!r}) without XLA"
        )
    return None


def tensorflow_devices():
    """The logical devices TensorFlow's data_parallel trains on: the GPUs, else the CPUs.

    Example:
    >>> len(tensorflow_devices()) >= 1
    True
    """
    import tensorflow as tf

    return tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")


def check_mesh_shape(mesh_shape, distribution):
    """Raises ValueError unless `mesh_shape` is None or two positive counts for model_parallel.

    Example:
    >>> check_mesh_shape((2, 4), "model_parallel")
    >>> check_mesh_shape((-1, -4), "model_parallel")
    Traceback (most recent call last):
    ...
    ValueError: mesh_shape is (-1, -4) but must be two positive device counts, (batch, model).
    """
    if mesh_shape is None:
        return
    if distribution != "model_parallel":
        raise ValueError(
            f"mesh_shape is {mesh_shape} but distribution is {distribution!r}: "
            "only model_parallel takes a mesh."
        )
    if len(mesh_shape) != 2 or not all(isinstance(size, int) and size >= 1 for size in mesh_shape):
        raise ValueError(
            f"mesh_shape is {mesh_shape} but must be two positive device counts, (batch, model)."
        )


def _check_writable_directory(name, directory):
    """Makes `directory` unless it exists and writes a scratch file there; ValueError if it can't.

    JAX would only warn, once per program, and keep nothing.
    """
    try:
        os.makedirs(directory, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as error:
        raise ValueError(
            f"{name} is {directory!r} but it cannot be made or written in: {error.strerror}."
        ) from None


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"{name} is {value!r} but must be one of {list(choices)}.")


def _mesh_shape(holder):
    return None if holder.value is None else tuple(int(count) for count in holder.value)
