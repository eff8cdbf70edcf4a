"""Keep the cyclic garbage collector off the objects a program keeps until it exits.

Importing TensorFlow, Keras and a backend makes millions of Python objects
that live as long as the process. Python's cyclic garbage collector walks
them again and again: while they are made (its full collections grow with
the heap), and several times more when the interpreter shuts down, after the
program's work is done. `gc.freeze` moves every object alive into a
generation the collector no longer visits. A program pauses the collector
over its heavy imports and then freezes what they made
(`long_lived_objects`), and freezes everything as it exits
(`freeze_heap_at_exit`); the README's Pretraining section has what each
saves. Frozen objects are still freed when their last reference goes; one
that ends in a reference cycle stays until the process ends. Python never
promised to finalize objects alive at exit, so nothing a program writes
depends on the collector: outputs are closed by the program itself
(`bert_keras.atomic_files`).

A Keras layer that drops a variable (as each `Dense` and `Embedding` does
when it quantizes) calls `gc.collect()` so that the device frees the old
buffer; with those imports' objects not frozen, each such call walks all of
them, most of the time `quantize` takes on a BERT model. Our models'
`quantize` freezes the objects alive at its start and collects once at its
end (`collected_once`).
"""

import atexit
import contextlib
import gc


@contextlib.contextmanager
def long_lived_objects():
    """Runs the block with the collector paused, then freezes the objects alive.

    For the imports of a program, whose objects live as long as it does.
    The collector's earlier state (enabled or not) comes back afterwards.

    Example:
    >>> import gc
    >>> with long_lived_objects():
    ...     import json
    >>> gc.get_freeze_count() > 0, gc.isenabled()
    (True, True)
    >>> gc.unfreeze()  # this example's doing undone
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def freeze_heap_at_exit():
    """Registers `gc.freeze` to run at exit, after the exit handlers registered later.

    Call it first thing in a program's `if __name__ == "__main__":`. Exit
    handlers run last registered first, so the ones that libraries register
    later (logging's flush, JAX's and TensorFlow's clean-ups) run before it.

    Example (as in `tasks/classify.py`):

        if __name__ == "__main__":
            restart_with_training_malloc()
            freeze_heap_at_exit()
            app.run(main)
    """
    atexit.register(gc.freeze)


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
