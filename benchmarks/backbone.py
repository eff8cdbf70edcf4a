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
import statistics
import subprocess
import sys
import time

from absl import app
from absl import flags

from bert_keras.training.host_memory import restart_with_huge_page_malloc

BACKENDS = ("tensorflow", "jax", "torch")

FLAGS = flags.DEFINE_list("backends", list(BACKENDS), "Keras backends to measure.")
_SIZES = flags.DEFINE_list("sizes", ["bert_tiny", "bert_small"], "Presets to measure.")
_BATCH_SIZE = flags.DEFINE_integer("batch_size", 32, "Sequences per batch.")
_SEQUENCE_LENGTH = flags.DEFINE_integer("sequence_length", 128, "Tokens per sequence.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Timed rounds per measurement; the median is kept.")
_DTYPE = flags.DEFINE_string(
    "dtype", "float32", "Keras dtype policy of both backbones, e.g. mixed_bfloat16."
)
_WORKER = flags.DEFINE_string("worker_backend", None, "Internal: measure in this process.")


def _make_inputs(batch_size, sequence_length, vocabulary_size):
    import numpy as np

    rng = np.random.default_rng(0)
    lengths = rng.integers(sequence_length // 2, sequence_length + 1, size=batch_size)
    positions = np.arange(sequence_length)[None, :]
    padding_mask = (positions < lengths[:, None]).astype("int32")
    return {
        "token_ids": rng.integers(1000, vocabulary_size, (batch_size, sequence_length)).astype(
            "int32"
        )
        * padding_mask,
        "segment_ids": (positions >= lengths[:, None] // 2).astype("int32") * padding_mask,
        "padding_mask": padding_mask,
    }


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


def interleaved_median_seconds(calls, repeats):
    """Median seconds per call of each of `calls` ({name: function}), interleaved in rounds.

    Two untimed calls each first compile and warm up. In every round each
    function runs twice in a row and the second call is timed: on a CPU a step
    right after another model's step ran up to 60% slower (its memory had been
    handed to the other model), which training, one step after another, never
    sees. Odd rounds run in reverse order (AABBCC CCBBAA ...), so no function
    always follows the same other one.

    Example:
    >>> sorted(interleaved_median_seconds({"a": lambda: None, "b": lambda: None}, repeats=3))
    ['a', 'b']
    """
    for function in calls.values():
        function()  # compile / warm up
        function()
    timings = {name: [] for name in calls}
    names = list(calls)
    for round_index in range(repeats):
        for name in names[::-1] if round_index % 2 else names:
            calls[name]()
            start = time.perf_counter()
            calls[name]()
            timings[name].append(time.perf_counter() - start)
    return {name: statistics.median(seconds) for name, seconds in timings.items()}


def _measure_in_this_process(preset):
    import numpy as np

    backbones = _build_pair(preset)
    inputs = _make_inputs(_BATCH_SIZE.value, _SEQUENCE_LENGTH.value, 30522)
    labels = np.zeros((_BATCH_SIZE.value,), "int32")
    results = {}
    for mode in ("forward", "train_step"):
        calls = {}
        for name, backbone in backbones.items():
            if mode == "forward":
                calls[name] = lambda b=backbone: b.predict_on_batch(inputs)
            else:
                model = _classifier(backbone)
                calls[name] = lambda m=model: m.train_on_batch(inputs, labels)
        seconds = interleaved_median_seconds(calls, _REPEATS.value)
        results[mode] = {name: _BATCH_SIZE.value / s for name, s in seconds.items()}
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
    command += [f"--sizes={','.join(_SIZES.value)}", f"--batch_size={_BATCH_SIZE.value}"]
    command += [f"--sequence_length={_SEQUENCE_LENGTH.value}", f"--repeats={_REPEATS.value}"]
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
        f"batch {_BATCH_SIZE.value}, sequence length {_SEQUENCE_LENGTH.value}, "
        f"{_DTYPE.value}, median of {_REPEATS.value} rounds, {len(os.sched_getaffinity(0))} CPU cores"
    )
    rows = []
    for backend in FLAGS.value:
        rows += _run_backend(backend)
    _print_table(rows)


if __name__ == "__main__":
    restart_with_huge_page_malloc()
    app.run(main)
