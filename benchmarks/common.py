"""What several benchmarks share: their common flags, timing and inputs.

Importing this module defines the flags below, so every benchmark that times
models takes them under the same names with the same defaults.

    from benchmarks import common

    seconds = common.interleaved_median_seconds(steps, common.REPEATS.value)
"""

import os
import statistics
import time

from absl import flags

# The repository's root, for benchmarks that start its programs.
REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

KERAS_BACKENDS = ("tensorflow", "jax", "torch")

BATCH_SIZE = flags.DEFINE_integer("batch_size", 32, "Sequences per batch.", lower_bound=1)
# [CLS] and [SEP] take two positions of every sequence.
SEQUENCE_LENGTH = flags.DEFINE_integer(
    "sequence_length", 128, "Tokens per sequence.", lower_bound=2
)
REPEATS = flags.DEFINE_integer(
    "repeats", 5, "Timed rounds per measurement; the median is kept.", lower_bound=1
)


def devices(backend):
    """What the measurement ran on: the CPU cores, and the backend's and torch's GPU if any.

    Example:
    >>> devices("tensorflow").split(",")[0].endswith("CPU cores")
    True
    """
    import torch

    names = [f"{len(os.sched_getaffinity(0))} CPU cores"]
    if backend == "jax":
        import jax

        names += [
            f"jax on {device.device_kind}" for device in jax.devices() if device.platform == "gpu"
        ]
    if torch.cuda.is_available():
        names.append(f"torch on {torch.cuda.get_device_name()}")
    return ", ".join(names)


def random_backbone_inputs(batch_size, sequence_length, vocabulary_size):
    """A batch of backbone inputs: random ids, rows padded to random lengths.

    Each row holds between half and all of `sequence_length` tokens, the
    second half of them in segment B. Seeded: the same batch every call.

    Example:
    >>> inputs = random_backbone_inputs(batch_size=2, sequence_length=8, vocabulary_size=2000)
    >>> sorted(inputs), inputs["token_ids"].shape
    (['padding_mask', 'segment_ids', 'token_ids'], (2, 8))
    """
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


def interleaved_median_seconds(calls, repeats):
    """Median seconds per call of each of `calls` ({name: function}), interleaved in rounds.

    Two untimed calls each first compile and warm up. In every round each
    function runs twice in a row and the second call is timed: on a CPU a step
    right after another model's step can run much slower (its memory had been
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


def seconds_of(function):
    """Seconds that calling `function` took.

    Example:
    >>> seconds_of(lambda: None) < 1.0
    True
    """
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def transformers_train_step(model, learning_rate, num_steps, warmup_steps):
    """One step of the paper's fine-tuning recipe for a transformers model: inputs -> loss.

    AdamW (epsilon 1e-6, weight decay 0.01 off biases and LayerNorm), the
    learning rate warming up linearly over `warmup_steps` then decaying
    linearly to 0 at `num_steps`, gradients clipped to a global norm of 1.0:
    what `bert_keras.training.optimizers.create_optimizer` builds.

    Example:
    >>> import torch
    >>> class Tiny(torch.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.linear = torch.nn.Linear(2, 1)
    ...     def forward(self, x):
    ...         return type("Out", (), {"loss": self.linear(x).pow(2).mean()})()
    >>> step = transformers_train_step(Tiny(), 0.1, num_steps=10, warmup_steps=1)
    >>> step({"x": torch.ones(4, 2)}) > 0
    True
    """
    import torch
    import transformers

    parameters = list(model.named_parameters())
    no_decay = [value for name, value in parameters if name.endswith("bias") or "LayerNorm" in name]
    decay = [value for name, value in parameters if not any(value is v for v in no_decay)]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
        lr=learning_rate,
        eps=1e-6,
    )
    schedule = transformers.get_linear_schedule_with_warmup(optimizer, warmup_steps, num_steps)

    def step(inputs):
        loss = model(**inputs).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()  # waits for the device

    return step
