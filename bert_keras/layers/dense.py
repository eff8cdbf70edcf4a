"""Dense layer whose bias is added inside the matmul on torch."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="bert_keras")
class Dense(keras.layers.Dense):
    """`keras.layers.Dense` that adds its bias in the matmul on torch.

    Keras computes `matmul(inputs, kernel)` and then adds the bias in a
    second kernel that reads and writes the whole output again. On torch this
    layer calls `torch.nn.functional.linear`, which adds the bias inside the
    matrix multiplication (`addmm`), as `torch.nn.Linear` does. The weights,
    their names and shapes, LoRA and the configuration are Keras' own, and
    the other backends (where XLA or Grappler fuse the add already), a layer
    without bias and quantized layers run Keras' code unchanged.

    Args:
        units: size of the last axis of the outputs.
        **kwargs: the other `keras.layers.Dense` arguments (activation,
            initializers, `use_bias`, dtype, name, ...).

    Call arguments:
        inputs: float tensor `[..., input_dim]`.

    Example:
    >>> import numpy as np
    >>> layer = Dense(3, kernel_initializer="ones", bias_initializer="ones")
    >>> np.asarray(keras.ops.convert_to_numpy(layer(np.ones((1, 2, 4), "float32")))).tolist()
    [[[5.0, 5.0, 5.0], [5.0, 5.0, 5.0]]]
    """

    def call(self, inputs, training=None):
        if keras.backend.backend() != "torch" or self.bias is None:
            return super().call(inputs, training=training)
        import torch

        kernel = ops.convert_to_tensor(self.kernel)  # the compute dtype under autocast
        outputs = torch.nn.functional.linear(inputs, kernel.T, ops.convert_to_tensor(self.bias))
        return self.activation(outputs)

    def quantize(self, mode=None, type_check=True, config=None):
        """Keras' `Dense.quantize`, which refuses subclasses unless told not to check.

        Only the float `call` differs here; a quantized layer runs Keras'
        `quantized_call`, so the check has nothing to guard.
        """
        del type_check
        super().quantize(mode, type_check=False, config=config)
