"""BERT's learning-rate schedule: linear warmup, then linear decay to zero."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="bert_keras")
class LinearWarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Rises linearly from 0 to `peak_learning_rate`, then falls linearly to 0.

    The learning rate at step `s` is `peak * s / warmup_steps` during warmup
    and `peak * (total_steps - s) / (total_steps - warmup_steps)` after it
    (the original BERT's `optimization.py` and Hugging Face's
    `get_linear_schedule_with_warmup`); 0 from `total_steps` on. Keras ships
    polynomial and cosine decays but no linear warmup in front of a linear
    decay, hence this class.

    Args:
        peak_learning_rate: the learning rate reached at the end of warmup.
        total_steps: the step at which the learning rate reaches 0.
        warmup_steps: number of warmup steps; 0 starts at the peak.
        batches_per_step: the batches of one optimizer step, when gradients
            accumulate. Keras evaluates the schedule at every batch and
            updates at the last of each step's: step `k`'s update reads the
            schedule at batch `k * batches_per_step + batches_per_step - 1`,
            which this counts as step `k`, so the updates follow the
            schedule as without accumulation.

    Example:
    >>> schedule = LinearWarmupLinearDecay(1e-4, total_steps=100, warmup_steps=10)
    >>> [round(float(schedule(step)), 8) for step in (0, 5, 10, 55, 100)]
    [0.0, 5e-05, 0.0001, 5e-05, 0.0]
    """

    def __init__(self, peak_learning_rate, total_steps, warmup_steps=0, batches_per_step=1):
        if not 0 <= warmup_steps <= total_steps or total_steps <= 0:
            raise ValueError(
                f"Need 0 <= warmup_steps <= total_steps and total_steps > 0; got "
                f"warmup_steps={warmup_steps}, total_steps={total_steps}."
            )
        self.peak_learning_rate = peak_learning_rate
        self.total_steps = total_steps
        self.warmup_steps = warmup_steps
        self.batches_per_step = batches_per_step

    def __call__(self, step):
        step = ops.floor(ops.cast(step, "float32") / self.batches_per_step)
        warmup = ops.cast(max(self.warmup_steps, 1), "float32")
        decay = ops.cast(max(self.total_steps - self.warmup_steps, 1), "float32")
        warming = step / warmup
        decaying = (ops.cast(self.total_steps, "float32") - step) / decay
        fraction = ops.where(step < self.warmup_steps, warming, decaying)
        return self.peak_learning_rate * ops.clip(fraction, 0.0, 1.0)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
            "batches_per_step": self.batches_per_step,
        }
