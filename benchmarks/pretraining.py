"""Pretraining step throughput: BertPretrainer against keras-hub's BertMaskedLM and transformers.

For the current KERAS_BACKEND, measures sequences/second of one training step
(forward, backward, AdamW update with clipping) of

- bert_keras: `BertPretrainer` (masked LM on the gathered positions + NSP),
  the optimizer of `create_optimizer`, XLA where `tasks.pretrain` uses it
  (jax, tensorflow);
- keras_hub: `keras_hub.models.BertMaskedLM` on a `keras_hub.models.BertBackbone`
  of the same config, same batch, same optimizer, same XLA setting (it has no
  NSP head);
- transformers: `BertForPreTraining` in torch (masked LM over every position,
  labels -100 where unmasked, + NSP), `torch.optim.AdamW` and
  `clip_grad_norm_(1.0)`; on CUDA when torch sees a GPU.

A timing is one `train_on_batch` (transformers: one step), or with
`--timed_steps=N` N steps of `fit` (transformers: N steps, then one wait
for the device), as the training programs run: no host sync between
steps, and none of the state copying Keras does around each
`train_on_batch`. The three are timed in interleaved rounds (two timings
of each per round, the second timed) so background load hits them alike,
and the median per step is kept. `--dropout` and `--attention_dropout`
change the rates (BERT's 0.1) for ablations; on torch, `--jit_compile`
times both Keras models' steps under `torch.compile` (transformers' loop
stays eager, as its users run it).
Device placement is the backends' own: the same command measures on a GPU
where one is visible.

Model FLOPs utilisation uses the model's training FLOPs per sequence,
3 x the forward FLOPs (a multiply-add is 2 FLOPs):

    6 * seq * L * (4 H^2 + 2 H I)        encoder matmuls (QKV, output, FFN)
  + 12 * L * seq^2 * H                   attention scores and context
  + 6 * P * (H^2 + H V)                  masked-LM transform + decoder, P gathered positions
  + 6 * (H^2 + 2 H)                      pooler + NSP

with L layers, H hidden, I intermediate, V vocabulary, P predictions, divided
by `--peak_tflops` (printed "n/a" without it). transformers' decoder runs on
all `seq` positions, more work for the same result; its MFU counts only the
FLOPs above, so the three columns compare useful work. bert_keras does less
than this count as well: its last encoder block computes only the [CLS] and
masked rows that the heads read (keys and values still on every position).
The count stays the whole model's, the figure NVIDIA's and MLPerf's MFU use.
The "GFLOP done" column is what each implementation computes instead (its
last block, its decoder rows), and "work ratio" that over bert_keras's: no
implementation can outrun another by more than the work ratio at equal
matmul speed.

    KERAS_BACKEND=jax python -m benchmarks.pretraining --preset=bert_small --repeats=5
    KERAS_BACKEND=torch python -m benchmarks.pretraining --mixed_precision=bfloat16 --peak_tflops=989

With `--profile_steps=N`, each implementation's costliest operations over N
more steps follow the table (`benchmarks.step_profiles`): GPU kernels where a
GPU ran them.
"""

import os

from absl import app
from absl import flags

from benchmarks import common
from benchmarks import flag_checks
from benchmarks import measurements
from benchmarks import step_profiles
from bert_keras.training.host_memory import restart_with_training_malloc

_PRESET = flags.DEFINE_string("preset", "bert_small", "Backbone size.")
# --sequence_length, --batch_size and --repeats are the shared flags of benchmarks.common.
flags.DEFINE_alias("seq_length", "sequence_length")
_PREDICTIONS = flags.DEFINE_integer(
    "predictions", 20, "Masked positions per sequence.", lower_bound=1
)
_MIXED_PRECISION = flags.DEFINE_enum(
    "mixed_precision", "none", ["none", "bfloat16", "float16"], "Compute dtype of all three."
)
_PEAK_TFLOPS = flags.DEFINE_float("peak_tflops", None, "The device's peak TFLOP/s, for MFU.")
flag_checks.require_positive(_PEAK_TFLOPS)
# bert_keras is the reference every rate is compared with, so it always runs.
SKIPPABLE = ("keras_hub", "transformers")
_SKIP = flags.DEFINE_list("skip", [], f"Implementations to leave out, of {', '.join(SKIPPABLE)}.")
flag_checks.require_known_names(_SKIP, SKIPPABLE)
_TIMED_STEPS = flags.DEFINE_integer(
    "timed_steps",
    1,
    "Training steps per timing: 1 times one `train_on_batch`; more time `fit` over that many "
    "batches, as the training programs run (no wait for the device between steps).",
    lower_bound=1,
)
_DROPOUT = flags.DEFINE_float(
    "dropout",
    None,
    "Every dropout rate of all three models (default: BERT's 0.1).",
    lower_bound=0.0,
    upper_bound=1.0,
)
_ATTENTION_DROPOUT = flags.DEFINE_float(
    "attention_dropout",
    None,
    "bert_keras's and transformers' attention-probability dropout (default: --dropout's).",
    lower_bound=0.0,
    upper_bound=1.0,
)
_JIT_COMPILE = flags.DEFINE_bool(
    "jit_compile",
    None,
    "Both Keras models' `jit_compile` (default: what `tasks.pretrain` runs, XLA on jax and "
    "tensorflow, eager torch); on torch, --jit_compile is `torch.compile`.",
)
_PROFILE_STEPS = flags.DEFINE_integer(
    "profile_steps",
    0,
    "After timing, profile this many timings (--timed_steps each) of each implementation "
    "(jax, torch).",
    lower_bound=0,
)
_PROFILE_ROWS = flags.DEFINE_integer(
    "profile_rows", step_profiles.ROWS, "Operations listed per profile.", lower_bound=1
)
_PROFILE_DIR = flags.DEFINE_string(
    "profile_dir", "build/profiles", "Where the profiles' trace files go, one folder each."
)


def training_flops_per_sequence(
    config, seq_length, predictions, last_block_rows=None, masked_lm_rows=None
):
    """Training FLOPs per sequence (see the module docstring).

    The defaults count the model FLOPs: every row through the last encoder
    block, the masked-LM head on the `predictions` rows. `last_block_rows`
    counts a last block whose queries and feed-forward net run on that many
    rows only (keys and values on all); `masked_lm_rows` a head run on that
    many rows.

    Example:
    >>> config = {"num_layers": 1, "hidden_dim": 2, "intermediate_dim": 8, "vocabulary_size": 10}
    >>> training_flops_per_sequence(config, seq_length=4, predictions=1)
    1728
    >>> training_flops_per_sequence(config, seq_length=4, predictions=1, masked_lm_rows=4)
    2160
    """
    layers, hidden = config["num_layers"], config["hidden_dim"]
    intermediate, vocabulary = config["intermediate_dim"], config["vocabulary_size"]
    full_block = _block_flops(hidden, intermediate, seq_length, query_rows=seq_length)
    last_block = _block_flops(
        hidden, intermediate, seq_length, query_rows=last_block_rows or seq_length
    )
    masked_lm = 6 * (masked_lm_rows or predictions) * (hidden**2 + hidden * vocabulary)
    pooler_and_next_sentence = 6 * (hidden**2 + 2 * hidden)
    return (layers - 1) * full_block + last_block + masked_lm + pooler_and_next_sentence


def _block_flops(hidden, intermediate, seq_length, query_rows):
    """One encoder block, keys and values on `seq_length` rows, the rest on `query_rows`."""
    key_value = 6 * seq_length * 2 * hidden**2
    query_output_feed_forward = 6 * query_rows * (2 * hidden**2 + 2 * hidden * intermediate)
    attention = 12 * query_rows * seq_length * hidden
    return key_value + query_output_feed_forward + attention


def _flops_done(config):
    """What each implementation computes per sequence (NSP's few FLOPs counted for all)."""
    seq_length, predictions = common.SEQUENCE_LENGTH.value, _PREDICTIONS.value
    return {
        "bert_keras": training_flops_per_sequence(
            config, seq_length, predictions, last_block_rows=1 + predictions
        ),
        "keras_hub": training_flops_per_sequence(config, seq_length, predictions),
        "transformers": training_flops_per_sequence(
            config, seq_length, predictions, masked_lm_rows=seq_length
        ),
    }


def _batch(config):
    import numpy as np

    batch_size, seq_length = common.BATCH_SIZE.value, common.SEQUENCE_LENGTH.value
    predictions = _PREDICTIONS.value
    inputs = common.random_backbone_inputs(batch_size, seq_length, config["vocabulary_size"])
    rng = np.random.default_rng(1)
    lengths = inputs["padding_mask"].sum(axis=1)
    positions = np.stack(
        [
            np.sort(rng.choice(np.arange(1, length - 1), predictions, replace=False))
            for length in lengths
        ]
    ).astype("int32")  # [batch, predictions]
    rows = np.arange(batch_size)[:, None]
    return {
        **inputs,
        "masked_positions": positions,
        "masked_lm_ids": inputs["token_ids"][rows, positions],
        "masked_lm_weights": np.ones((batch_size, predictions), "float32"),
        "next_sentence_labels": rng.integers(0, 2, batch_size).astype("int32"),
    }


def _keras_policy():
    return {"none": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}[
        _MIXED_PRECISION.value
    ]


def _jit_compile():
    """--jit_compile, by default what `tasks.pretrain` compiles with, for both Keras models."""
    from bert_keras.training.data_parallel import DataParallel

    if _JIT_COMPILE.value is not None:
        return _JIT_COMPILE.value
    return DataParallel("none").jit_compile()


def _optimizer():
    from bert_keras.training.optimizers import create_optimizer

    return create_optimizer(1e-4, num_train_steps=10_000, num_warmup_steps=100)


def _dropout_rates():
    """The backbones' dropout arguments that the flags set."""
    rates = {"dropout": _DROPOUT.value, "attention_dropout": _ATTENTION_DROPOUT.value}
    return {name: rate for name, rate in rates.items() if rate is not None}


def _keras_steps(model, features, labels, sample_weight=None):
    """One timing of a compiled Keras model: `train_on_batch`, or `fit` over `--timed_steps`.

    `keras.Model.fit` itself: keras-hub's task models override `fit` to
    preprocess through tf.data or grain, which a model without a
    preprocessor does not need.
    """
    import keras
    import numpy as np
    from keras import tree

    steps = _TIMED_STEPS.value
    if steps == 1:
        return lambda: model.train_on_batch(features, labels, sample_weight=sample_weight)
    x, y, weights = tree.map_structure(
        lambda array: None if array is None else np.concatenate([array] * steps),
        (features, labels, sample_weight),
    )
    return lambda: keras.Model.fit(
        model,
        x,
        y,
        sample_weight=weights,
        batch_size=common.BATCH_SIZE.value,
        shuffle=False,
        verbose=0,
    )


def _bert_keras_step(config, batch):
    from bert_keras.models.bert_backbone import BertBackbone
    from bert_keras.models.bert_pretrainer import BertPretrainer

    model = BertPretrainer(BertBackbone(**config, **_dropout_rates(), dtype=_keras_policy()))
    model.compile(optimizer=_optimizer(), jit_compile=_jit_compile())
    features = {
        name: batch[name]
        for name in ("token_ids", "segment_ids", "padding_mask", "masked_positions")
    }
    labels = {
        name: batch[name] for name in ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")
    }
    return _keras_steps(model, features, labels)


def _keras_hub_step(config, batch):
    import keras
    import keras_hub

    dropout = {"dropout": _DROPOUT.value} if _DROPOUT.value is not None else {}
    backbone = keras_hub.models.BertBackbone(**config, **dropout, dtype=_keras_policy())
    model = keras_hub.models.BertMaskedLM(backbone, preprocessor=None)
    model.compile(
        optimizer=_optimizer(),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=[keras.metrics.SparseCategoricalAccuracy()],
        jit_compile=_jit_compile(),
    )
    features = {
        "token_ids": batch["token_ids"],
        "segment_ids": batch["segment_ids"],
        "padding_mask": batch["padding_mask"],
        "mask_positions": batch["masked_positions"],
    }
    return _keras_steps(model, features, batch["masked_lm_ids"], batch["masked_lm_weights"])


def _transformers_step(config, batch):
    import numpy as np
    import torch
    import transformers

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = transformers.BertForPreTraining(
        transformers.BertConfig(
            vocab_size=config["vocabulary_size"],
            hidden_size=config["hidden_dim"],
            num_hidden_layers=config["num_layers"],
            num_attention_heads=config["num_heads"],
            intermediate_size=config["intermediate_dim"],
            max_position_embeddings=config["max_sequence_length"],
            hidden_act="gelu_new",
            **_transformers_dropout(),
        )
    ).to(device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, eps=1e-6, weight_decay=0.01)
    labels = np.full(batch["token_ids"].shape, -100, "int64")
    np.put_along_axis(labels, batch["masked_positions"], batch["masked_lm_ids"], axis=1)
    tensors = {
        "input_ids": torch.tensor(batch["token_ids"], dtype=torch.long, device=device),
        "token_type_ids": torch.tensor(batch["segment_ids"], dtype=torch.long, device=device),
        "attention_mask": torch.tensor(batch["padding_mask"], dtype=torch.long, device=device),
        "labels": torch.tensor(labels, device=device),
        "next_sentence_label": torch.tensor(
            batch["next_sentence_labels"], dtype=torch.long, device=device
        ),
    }
    autocast_dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(
        _MIXED_PRECISION.value
    )
    scaler = torch.amp.GradScaler(device, enabled=autocast_dtype == torch.float16)

    def step():
        for _ in range(_TIMED_STEPS.value):
            loss = one_step()
        return loss.item()  # waits for the device

    def one_step():
        with torch.autocast(
            device, dtype=autocast_dtype or torch.float32, enabled=autocast_dtype is not None
        ):
            loss = model(**tensors).loss
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        return loss

    return step


def _transformers_dropout():
    rates = _dropout_rates()
    hidden = rates.get("dropout")
    attention = rates.get("attention_dropout", hidden)
    return {
        name: rate
        for name, rate in (
            ("hidden_dropout_prob", hidden),
            ("attention_probs_dropout_prob", attention),
        )
        if rate is not None
    }


def main(argv):
    del argv
    _check_predictions()
    import keras

    config = _backbone_config()
    batch = _batch(config)
    builders = {
        "bert_keras": _bert_keras_step,
        "keras_hub": _keras_hub_step,
        "transformers": _transformers_step,
    }
    steps = {
        name: build(config, batch) for name, build in builders.items() if name not in _SKIP.value
    }
    timings = common.interleaved_median_seconds(steps, common.REPEATS.value)
    seconds = {name: value / _TIMED_STEPS.value for name, value in timings.items()}
    flops = training_flops_per_sequence(config, common.SEQUENCE_LENGTH.value, _PREDICTIONS.value)
    print(
        f"backend {keras.backend.backend()}, {_PRESET.value}, batch {common.BATCH_SIZE.value}, seq "
        f"{common.SEQUENCE_LENGTH.value}, {_PREDICTIONS.value} predictions, precision {_MIXED_PRECISION.value}, "
        f"median of {common.REPEATS.value} interleaved rounds of {_timing()}, "
        f"{_dropout_text()}, jit_compile {_jit_compile()}, {common.devices(keras.backend.backend())}; "
        f"{flops / 1e9:.2f} GFLOP per sequence"
    )
    done = _flops_done(config)
    header = (
        f"{'implementation':<14} {'sequences/s':>12} {'bert_keras / this':>18} "
        f"{'GFLOP done':>11} {'work ratio':>11} {'MFU':>7}"
    )
    print(header)
    print("-" * len(header))
    ours = common.BATCH_SIZE.value / seconds["bert_keras"]
    for name, value in seconds.items():
        rate = common.BATCH_SIZE.value / value
        mfu = (
            "n/a"
            if not _PEAK_TFLOPS.value
            else f"{100 * rate * flops / (_PEAK_TFLOPS.value * 1e12):.2f}%"
        )
        print(
            f"{name:<14} {rate:>12.1f} {ours / rate:>18.2f} {done[name] / 1e9:>11.2f} "
            f"{done[name] / done['bert_keras']:>11.2f} {mfu:>7}"
        )
    if _PROFILE_STEPS.value:
        _print_profiles(steps, keras.backend.backend())
    settings = (
        f"{_PRESET.value}, batch {common.BATCH_SIZE.value}, seq {common.SEQUENCE_LENGTH.value}, "
        f"{_PREDICTIONS.value} predictions, precision {_MIXED_PRECISION.value}, "
        f"median of {common.REPEATS.value} rounds of {_timing()}, {_dropout_text()}"
    )
    measurements.write_measurements(
        [
            measurements.measurement(
                "pretraining",
                "train step seq/s",
                ours,
                peer,
                common.BATCH_SIZE.value / seconds[peer],
                backend=keras.backend.backend(),
                settings=settings,
            )
            for peer in seconds
            if peer != "bert_keras"
        ]
    )


def _backbone_config():
    """`--preset`'s backbone config; raises UsageError where the preset is unknown or holds
    fewer positions than `--sequence_length`."""
    from bert_keras.models.presets import backbone_preset_config

    try:
        config = backbone_preset_config(_PRESET.value)
    except ValueError as error:
        raise app.UsageError(f"--preset={_PRESET.value}: {error}") from error
    if common.SEQUENCE_LENGTH.value > config["max_sequence_length"]:
        raise app.UsageError(
            f"--sequence_length is {common.SEQUENCE_LENGTH.value}, but --preset={_PRESET.value} "
            f"has {config['max_sequence_length']} positions."
        )
    return config


def _check_predictions():
    """Raises UsageError where the shortest random sequence has fewer maskable positions than asked.

    A row holds half to all of `--sequence_length` tokens (`common.random_backbone_inputs`);
    [CLS] and [SEP] are never masked.
    """
    maskable = max(0, common.SEQUENCE_LENGTH.value // 2 - 2)
    if _PREDICTIONS.value > maskable:
        raise app.UsageError(
            f"--predictions is {_PREDICTIONS.value}, but the shortest sequence of "
            f"--sequence_length={common.SEQUENCE_LENGTH.value} has {maskable} positions to mask."
        )


def _timing():
    steps = _TIMED_STEPS.value
    return "one train_on_batch" if steps == 1 else f"fit over {steps} steps"


def _dropout_text():
    rates = _dropout_rates()
    if not rates:
        return "dropout 0.1"
    return ", ".join(f"{name.replace('_', ' ')} {rate:g}" for name, rate in rates.items())


def _print_profiles(steps, backend):
    """Each implementation's costliest operations over `--profile_steps` steps."""
    for name, step in steps.items():
        engine = "torch" if name == "transformers" else backend
        if engine not in ("jax", "torch"):
            print(f"\n{name}: no profile on {engine} (jax and torch only)")
            continue
        directory = os.path.join(_PROFILE_DIR.value, f"{name}_{engine}")
        table = step_profiles.profile_table(
            step,
            _PROFILE_STEPS.value,
            engine,
            directory,
            rows=_PROFILE_ROWS.value,
            steps_per_call=_TIMED_STEPS.value,
        )
        profiled = _PROFILE_STEPS.value * _TIMED_STEPS.value
        print(f"\n{name} ({engine}), {profiled} steps profiled, trace in {directory}:")
        print(table)


if __name__ == "__main__":
    restart_with_training_malloc()
    app.run(main)
