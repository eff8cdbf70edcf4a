"""The optimizer's variables created before `fit` traces its first step, so TensorFlow traces it once.

Keras on TensorFlow without a distribution strategy leaves building the
optimizer to the first training step, inside its `tf.function`. A
`tf.function` whose first trace creates variables is traced a second time
without them, so the whole training step (forward, backward, the update
of every weight) is traced twice, seconds each for a BERT model. Building
the optimizer beforehand, as Keras itself does on jax and torch and under
a TensorFlow strategy, leaves one trace and the same variables. A
checkpoint's optimizer state also needs them built before it loads.
"""

import contextlib

import keras

from bert_keras.training.replica_losses import tensorflow_replicas


def build_optimizer(model):
    """Creates the compiled optimizer's variables for `model`'s trainable weights, once.

    On TensorFlow they are created in the scope of the model's distribution
    strategy, as Keras creates them there. A no-op where there is no
    optimizer or it is built already.

    Args:
        model: a built `keras.Model`, compiled or not.

    Example:
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    >>> model.compile(optimizer="adam", loss="mse")
    >>> build_optimizer(model)
    >>> model.optimizer.built, len(model.optimizer.variables) > 2
    (True, True)
    """
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None or optimizer.built:
        return
    with _strategy_scope(model):
        optimizer.build(model.trainable_variables)


def compile_as_saved(model, config):
    """Compiles `model`, loaded from a `.keras` file, as it was saved: its `compile_from_config`.

    Keras skips models whose `compile` is overridden (the task models'
    and Bert4Rec's are); the saved config holds the resolved optimizer,
    loss and metrics, so they go straight to `keras.Model.compile`. The
    optimizer is built so that its saved state (moments, iterations) loads
    into it. A saved `jit_compile` of True is taken as "auto" on torch and
    under several TensorFlow replicas, so that a file saved on jax runs
    neither under `torch.compile` nor XLA across replicas.

    Example:
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    >>> model.compile(optimizer="adam", loss="mse")
    >>> restored = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    >>> compile_as_saved(restored, model.get_compile_config())
    >>> restored.loss, restored.optimizer.built
    ('mse', True)
    """
    arguments = keras.saving.deserialize_keras_object(config)
    if "jit_compile" in arguments:
        arguments["jit_compile"] = _loading_jit_compile(arguments["jit_compile"])
    keras.Model.compile(model, **arguments)
    if model.built:
        build_optimizer(model)


def _loading_jit_compile(saved):
    """The `jit_compile` to compile a loaded model with, given the one its file holds.

    Keras saves `jit_compile` as the saving backend resolved "auto": True on
    jax. On torch True means `torch.compile`, which Keras' torch default
    leaves off and which recompiles for every batch shape, minutes a
    `predict`; under a `tf.distribute` strategy of several replicas XLA
    cannot reach the other replicas' variables, and Keras' "auto" leaves it
    off. There a saved True is taken as "auto". After loading,
    `compile(jit_compile=True)` asks for it again.
    """
    if saved is True and (keras.backend.backend() == "torch" or tensorflow_replicas() > 1):
        return "auto"
    return saved


def _strategy_scope(model):
    if keras.backend.backend() == "tensorflow":
        return model.distribute_strategy.scope()
    return contextlib.nullcontext()
