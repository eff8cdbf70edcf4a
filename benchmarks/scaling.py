"""Scaling efficiency of data-parallel pretraining: two replicas against twice one replica.

For the current KERAS_BACKEND, runs `tasks.pretrain` on records made from the
installed packages' docstrings, first on one device with batch B, then on two
replicas with batch 2B, and prints each run's examples/second (of its last
logged stretch, after compilation) and the efficiency
`two replicas / (2 x one replica)`:

- jax: two XLA CPU devices (`--xla_force_host_platform_device_count=2`), or
  the GPUs when there are two; `--distribution=data_parallel`;
- torch: two processes under `torchrun --nproc_per_node=2` (gloo on CPUs);
- tensorflow: MirroredStrategy takes GPUs; on a machine without two, the
  program sees one CPU device and the row says so.

On a CPU the two replicas share the cores the single one had to itself, so
the figure measures the overhead of splitting, not a speed-up.

    KERAS_BACKEND=jax python -m benchmarks.scaling --steps=40
"""

import json
import os
import subprocess
import sys
import tempfile

from absl import app
from absl import flags

from benchmarks import measurements
from benchmarks.common import BATCH_SIZE
from benchmarks.common import REPOSITORY
from benchmarks.common import SEQUENCE_LENGTH
from bert_keras.data.offline_text import docstring_corpus
from bert_keras.data.offline_text import vocab_file

_PRESET = flags.DEFINE_string("preset", "bert_tiny", "Backbone size.")
# --batch_size (per replica) and --sequence_length are the shared flags of benchmarks.common.
_STEPS = flags.DEFINE_integer(
    "steps", 40, "Steps per run; the second half is timed.", lower_bound=2
)


def _records(directory):
    corpus = os.path.join(directory, "corpus.txt")
    docstring_corpus(corpus, 2_000_000)
    command = [sys.executable, "-m", "tools.create_pretraining_data", f"--input_file={corpus}"]
    command += [f"--output_file={directory}/records.tfrecord", f"--vocab_file={vocab_file()}"]
    command += [f"--max_seq_length={SEQUENCE_LENGTH.value}", "--num_workers=1"]
    subprocess.run(command, cwd=REPOSITORY, check=True, capture_output=True)
    return f"{directory}/records.tfrecord*"


def _examples_per_second(directory, records, replicas, backend):
    """The last logged examples/second of a pretraining run on `replicas` replicas."""
    output_dir = os.path.join(directory, f"replicas_{replicas}")
    program = ["-m", "tasks.pretrain", f"--input_file={records}", f"--output_dir={output_dir}"]
    program += [f"--preset={_PRESET.value}", f"--max_seq_length={SEQUENCE_LENGTH.value}"]
    program += [f"--train_batch_size={BATCH_SIZE.value * replicas}"]
    program += [f"--num_train_steps={_STEPS.value}", "--num_warmup_steps=0"]
    program += [f"--save_checkpoints_steps={_STEPS.value // 2}"]
    environment = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
    if replicas == 1:
        command = [sys.executable, *program]
    elif backend == "torch":
        launcher = ["-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={replicas}"]
        command = [sys.executable, *launcher, *program, "--distribution=data_parallel"]
    else:
        command = [sys.executable, *program, "--distribution=data_parallel"]
        if backend == "jax":
            environment["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={replicas}"
    completed = subprocess.run(
        command, cwd=REPOSITORY, env=environment, capture_output=True, text=True
    )
    if completed.returncode != 0:
        return None, completed.stderr.strip().splitlines()[-1]
    with open(os.path.join(output_dir, "history.jsonl")) as file:
        last = [json.loads(line) for line in file if line.strip()][-1]
    return last["examples_per_second"], None


def _two_replicas_missing(backend):
    """Why `backend` cannot run two replicas here, or None."""
    if backend != "tensorflow":
        return None
    import tensorflow as tf

    if len(tf.config.list_physical_devices("GPU")) >= 2:
        return None
    return "MirroredStrategy sees one CPU device and fewer than two GPUs"


def main(argv):
    del argv
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    with tempfile.TemporaryDirectory() as directory:
        records = _records(directory)
        one, _ = _examples_per_second(directory, records, 1, backend)
        two, error = None, _two_replicas_missing(backend)
        if error is None:
            two, error = _examples_per_second(directory, records, 2, backend)
    print(f"{backend}: {_PRESET.value}, seq {SEQUENCE_LENGTH.value}, {BATCH_SIZE.value}/replica")
    print(f"  1 replica : {one:8.1f} examples/s")
    settings = f"{_PRESET.value}, seq {SEQUENCE_LENGTH.value}, {BATCH_SIZE.value}/replica"
    if two is None:
        print(f"  2 replicas: n/a ({error})")
    else:
        print(f"  2 replicas: {two:8.1f} examples/s   scaling efficiency {two / (2 * one):.2f}")
    row = measurements.measurement(
        "scaling",
        "2 replicas examples/s",
        two or 0.0,
        "2 x one replica",
        2 * one,
        backend=backend,
        settings=settings,
    )
    measurements.write_measurements(
        [row if two else {**row, "ours": None, "ratio": None, "error": error}]
    )


if __name__ == "__main__":
    app.run(main)
