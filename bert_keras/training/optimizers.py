"""BERT's optimizer recipe, configured from Keras' own optimizers."""

import keras

from bert_keras.training.fused_adamw import FusedAdamW
from bert_keras.training.schedules import LinearWarmupLinearDecay

# Variable names (not paths) that get no weight decay: layer-norm scale and
# offset, and every bias — as the original excludes "LayerNorm" and "bias".
NO_WEIGHT_DECAY_NAMES = ("gamma", "beta", "bias")
OPTIMIZERS = ("adamw", "lamb")
GLOBAL_CLIPNORM = 1.0  # the original's clip_by_global_norm


def create_optimizer(
    learning_rate,
    num_train_steps=None,
    num_warmup_steps=0,
    optimizer="adamw",
    weight_decay=0.01,
    epsilon=1e-6,
    global_clipnorm=GLOBAL_CLIPNORM,
    gradient_accumulation_steps=None,
):
    """The paper's optimizer: decoupled weight decay, warmup, linear decay, clipping.

    AdamW (beta_1 0.9, beta_2 0.999, epsilon 1e-6; `FusedAdamW`, Keras' AdamW
    with torch's fused update on torch) or LAMB for large batches;
    weight decay 0.01 applied to every variable except layer-norm and bias
    variables; learning rate warmed up linearly over `num_warmup_steps`, then
    decayed linearly to 0 at `num_train_steps`; gradients clipped to a global
    norm of 1.0.

    Args:
        learning_rate: peak learning rate.
        num_train_steps: optimizer steps until the learning rate reaches 0;
            None keeps the learning rate constant (no warmup, no decay).
        num_warmup_steps: warmup steps.
        optimizer: "adamw" or "lamb".
        weight_decay: decoupled weight decay rate.
        epsilon: Adam's epsilon.
        global_clipnorm: clip gradients to this global norm; None disables.
        gradient_accumulation_steps: accumulate gradients over this many
            batches before each update (Keras' built-in accumulation).

    Returns:
        A configured `keras.optimizers.Optimizer`.

    Example:
    >>> optimizer = create_optimizer(1e-4, num_train_steps=1000, num_warmup_steps=100)
    >>> type(optimizer).__name__, optimizer.global_clipnorm
    ('FusedAdamW', 1.0)
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {list(OPTIMIZERS)}, got {optimizer!r}.")
    if num_train_steps is not None:
        learning_rate = LinearWarmupLinearDecay(
            learning_rate,
            num_train_steps,
            num_warmup_steps,
            batches_per_step=gradient_accumulation_steps or 1,
        )
    common = {
        "learning_rate": learning_rate,
        "weight_decay": weight_decay,
        "epsilon": epsilon,
        "global_clipnorm": global_clipnorm,
        "gradient_accumulation_steps": gradient_accumulation_steps,
    }
    if optimizer == "adamw":
        result = FusedAdamW(beta_1=0.9, beta_2=0.999, **common)
    else:
        result = keras.optimizers.Lamb(beta_1=0.9, beta_2=0.999, **common)
    result.exclude_from_weight_decay(var_names=list(NO_WEIGHT_DECAY_NAMES))
    return result
