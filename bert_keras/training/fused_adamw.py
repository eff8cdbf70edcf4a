"""Keras' AdamW, with its update one fused kernel on the torch backend."""

import keras


@keras.saving.register_keras_serializable(package="bert_keras")
class FusedAdamW(keras.optimizers.AdamW):
    """`keras.optimizers.AdamW` whose torch step reads each weight once.

    Keras' AdamW on torch updates the weights through a chain of `_foreach`
    operations that each read and write every weight and slot, and clips
    gradients with two operations per variable. Here, on torch, the
    gradients are clipped with `torch._foreach_norm` and the Adam update is
    torch's fused kernel (`torch.optim.adam.adam(fused=True)`). Its epsilon is
    rescaled at every step so that the update is Keras' (to float rounding):
    `lr * sqrt(1 - beta_2^t) / (1 - beta_1^t) * m / (sqrt(v) + epsilon)`.
    Weight decay, the learning rate schedule, gradient accumulation, loss
    scaling and the slots are Keras' own, so checkpoints move between
    backends. On jax and tensorflow, where XLA fuses the update anyway, and
    in a step that `torch.compile` traces (`model.compile(jit_compile=True)`
    on torch), where the compiler fuses it, this is Keras' AdamW unchanged.
    Takes `keras.optimizers.AdamW`'s arguments.

    Example:
    >>> import numpy as np
    >>> weight = keras.Variable(np.ones(3, "float32"))
    >>> optimizer = FusedAdamW(learning_rate=0.1, weight_decay=0.0)
    >>> optimizer.apply([keras.ops.ones(3)], [weight])
    >>> np.round(keras.ops.convert_to_numpy(weight).astype(float), 4).tolist()
    [0.9, 0.9, 0.9]
    """

    def build(self, var_list):
        super().build(var_list)
        for variable in var_list:
            # Keras decides on first use, by a regular expression over the name, which
            # `torch.compile` fails to trace under Python 3.12; decided here, a traced
            # step reads the cached answer.
            self._use_weight_decay(variable)

    def _clip_gradients(self, grads):
        if not _eager_torch() or self.clipnorm or self.clipvalue or not self.global_clipnorm:
            return super()._clip_gradients(grads)
        return _torch_clip_by_global_norm(grads, self.global_clipnorm)

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        if not _eager_torch() or self.amsgrad:
            return super()._backend_update_step(grads, trainable_variables, learning_rate)
        return self._torch_fused_update(grads, trainable_variables, learning_rate)

    def _torch_fused_update(self, grads, trainable_variables, learning_rate):
        import torch
        from torch.optim.adam import adam

        weights = [variable.value for variable in trainable_variables]
        slots = [self._get_variable_index(variable) for variable in trainable_variables]
        step = float(keras.ops.convert_to_numpy(self.iterations)) + 1
        with torch.no_grad():
            adam(
                weights,
                list(grads),
                [self._momentums[index].value for index in slots],
                [self._velocities[index].value for index in slots],
                [],
                # The kernel adds 1 to each before it reads them.
                [torch.full((), step - 1, device=weight.device) for weight in weights],
                fused=True,
                amsgrad=False,
                beta1=self.beta_1,
                beta2=self.beta_2,
                lr=keras.ops.cast(learning_rate, "float32"),
                weight_decay=0.0,  # Keras' decoupled decay has already been applied
                # torch adds epsilon to sqrt(v / (1 - beta_2^t)), Keras to sqrt(v).
                eps=self.epsilon / (1 - self.beta_2**step) ** 0.5,
                maximize=False,
            )


def _eager_torch():
    """On torch, outside `torch.compile`'s tracing: the fused kernel needs the step as a number."""
    if keras.backend.backend() != "torch":
        return False
    import torch

    return not torch.compiler.is_compiling()


def _torch_clip_by_global_norm(grads, clip_norm):
    """Keras' `clip_by_global_norm`, as two fused passes: NaN or inf norms give NaN."""
    import torch

    with torch.no_grad():
        norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
        scale = clip_norm * torch.clamp(1.0 / norm, max=1.0 / clip_norm) + (norm - norm)
        return torch._foreach_mul(grads, scale)
