"""One garbage collection for a model's `quantize`, where Keras runs one per layer.

A Keras layer that drops a variable (as each `Dense` and `Embedding` does
when it quantizes) calls `gc.collect()` so that the device frees the old
buffer. Every such call walks every object Python tracks, which with
TensorFlow, jax or torch imported is most of the time `quantize` takes on a
BERT model. Here the objects alive before `quantize`
are frozen out of those calls and collected once at its end, so the old
float weights are freed when `quantize` returns rather than layer by layer.
"""

import contextlib
import gc


@contextlib.contextmanager
def collected_once():
    """Leaves the objects alive now out of the body's collections; collects them once after.

    A caller that froze objects itself (`gc.freeze()`, as servers do before
    forking) keeps its freeze: then the body runs as it is.

    Example:
    >>> import gc
    >>> frozen_before = gc.get_freeze_count()
    >>> with collected_once():
    ...     gc.get_freeze_count() > 0
    True
    >>> gc.get_freeze_count() <= frozen_before
    True
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.collect()


class QuantizeCollectingOnce:
    """Mixin for a `keras.Model` whose `quantize` runs under `collected_once()`.

    Example:
    >>> import keras
    >>> class TinyModel(QuantizeCollectingOnce, keras.Sequential):
    ...     pass
    >>> model = TinyModel([keras.Input((4,)), keras.layers.Dense(2)])
    >>> model.quantize("int8")
    >>> model.layers[0].quantization_mode
    'int8'
    """

    def quantize(self, mode=None, **kwargs):
        with collected_once():
            super().quantize(mode, **kwargs)
