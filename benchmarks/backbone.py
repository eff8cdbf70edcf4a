"""Backbone throughput: bert_keras's BertBackbone against keras-hub's.

For each backend and each size, measures sequences/second of a forward pass
(`predict_on_batch`) and of a training step (`train_on_batch` of backbone +
pooled-output classifier, Adam) for both backbones built with the same
config, in the same process, interleaved so that background load hits both
alike. Prints one table per run and the ratio ours / keras-hub.

    python -m benchmarks.backbone                      # every backend
    python -m benchmarks.backbone --backends=jax --sizes=bert_tiny
"""

import json
import os
import subprocess
import sys

from absl import app
from absl import flags

from benchmarks import common
from benchmarks import flag_checks
from benchmarks import measurements
from bert_keras.models.presets import BACKBONE_PRESETS
from bert_keras.training.host_memory import restart_with_training_malloc

BACKENDS = common.KERAS_BACKENDS

_BACKENDS = flags.DEFINE_list("backends", list(BACKENDS), "Keras backends to measure.")
flag_checks.require_known_names(_BACKENDS, BACKENDS)
flag_checks.require_some(_BACKENDS)
_SIZES = flags.DEFINE_list("sizes", ["bert_tiny", "bert_small"], "Presets to measure.")
flag_checks.require_known_names(_SIZES, tuple(BACKBONE_PRESETS))
flag_checks.require_some(_SIZES)
_DTYPE = flags.DEFINE_enum(
    "dtype",
    "float32",
    ["float32", "mixed_bfloat16", "mixed_float16", "bfloat16", "float16"],
    "Keras dtype policy of both backbones.",
)
_WORKER = flags.DEFINE_string("worker_backend", None, "Internal: measure in this process.")


def _classifier(backbone):
    import keras

    inputs = {name: keras.Input(shape=(None,), dtype="int32", name=name) for name in backbone.input}
    logits = keras.layers.Dense(2)(backbone(inputs)["pooled_output"])
    model = keras.Model(inputs, logits)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-5),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def _build_pair(preset):
    import keras_hub

    from bert_keras.models.bert_backbone import BertBackbone
    from bert_keras.models.presets import backbone_preset_config

    config = backbone_preset_config(preset)
    ours = BertBackbone(**config, dtype=_DTYPE.value)
    theirs = keras_hub.models.BertBackbone(**config, dtype=_DTYPE.value)
    return {"bert_keras": ours, "keras_hub": theirs}


def _measure_in_this_process(preset):
    import numpy as np

    backbones = _build_pair(preset)
    batch_size = common.BATCH_SIZE.value
    inputs = common.random_backbone_inputs(batch_size, common.SEQUENCE_LENGTH.value, 30522)
    labels = np.zeros((batch_size,), "int32")
    results = {}
    for mode in ("forward", "train_step"):
        calls = {}
        for name, backbone in backbones.items():
            if mode == "forward":
                calls[name] = lambda b=backbone: b.predict_on_batch(inputs)
            else:
                model = _classifier(backbone)
                calls[name] = lambda m=model: m.train_on_batch(inputs, labels)
        seconds = common.interleaved_median_seconds(calls, common.REPEATS.value)
        results[mode] = {name: batch_size / s for name, s in seconds.items()}
    return results


def _run_worker(backend):
    rows = []
    for preset in _SIZES.value:
        for mode, by_name in _measure_in_this_process(preset).items():
            rows.append({"backend": backend, "preset": preset, "mode": mode, **by_name})
    print("RESULT " + json.dumps(rows), flush=True)


def _run_backend(backend):
    environment = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="2")
    command = [sys.executable, "-m", "benchmarks.backbone", f"--worker_backend={backend}"]
    command += [f"--sizes={','.join(_SIZES.value)}", f"--batch_size={common.BATCH_SIZE.value}"]
    command += [
        f"--sequence_length={common.SEQUENCE_LENGTH.value}",
        f"--repeats={common.REPEATS.value}",
    ]
    command += [f"--dtype={_DTYPE.value}"]
    completed = subprocess.run(command, env=environment, capture_output=True, text=True)
    for line in completed.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise RuntimeError(f"{backend} benchmark failed:\n{completed.stderr[-3000:]}")


def _print_table(rows):
    header = (
        f"{'backend':<11} {'preset':<11} {'mode':<11} "
        f"{'bert_keras seq/s':>17} {'keras_hub seq/s':>16} {'ratio':>6}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        ratio = row["bert_keras"] / row["keras_hub"]
        print(
            f"{row['backend']:<11} {row['preset']:<11} {row['mode']:<11} "
            f"{row['bert_keras']:>17.1f} {row['keras_hub']:>16.1f} {ratio:>6.2f}"
        )


def main(argv):
    del argv
    if _WORKER.value:
        _run_worker(_WORKER.value)
        return
    print(
        f"batch {common.BATCH_SIZE.value}, sequence length {common.SEQUENCE_LENGTH.value}, "
        f"{_DTYPE.value}, median of {common.REPEATS.value} rounds, "
        f"{len(os.sched_getaffinity(0))} CPU cores"
    )
    rows = []
    for backend in _BACKENDS.value:
        rows += _run_backend(backend)
    _print_table(rows)
    measurements.write_measurements(_measurement_rows(rows))


def _measurement_rows(rows):
    settings = (
        f"batch {common.BATCH_SIZE.value}, seq {common.SEQUENCE_LENGTH.value}, {_DTYPE.value}, "
        f"median of {common.REPEATS.value}"
    )
    return [
        measurements.measurement(
            "backbone",
            f"{row['preset']} {row['mode'].replace('_', ' ')} seq/s",
            row["bert_keras"],
            "keras-hub",
            row["keras_hub"],
            backend=row["backend"],
            settings=settings,
        )
        for row in rows
    ]


if __name__ == "__main__":
    restart_with_training_malloc()
    app.run(main)
