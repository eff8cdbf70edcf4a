"""Token tagging's loss in one `fit` step on two replicas, each given half of a batch, against one device.

`python -m tests.training.replica_loss_run` on the tensorflow backend makes
two CPU devices and trains under a `MirroredStrategy`; on torch, start it
with `python -m torch.distributed.run --standalone --nproc_per_node=2`: each
process trains on its half, its gradients averaged by `TorchProcesses`.
The model is one dense layer over the batch's logits, trained one SGD step
with `TokenCrossEntropy` and with Keras' own loss. Prints (process 0) a
JSON line: each loss's largest weight difference from one device's step on
the whole batch (`ours`, `keras`); on tensorflow, a tagger saved with XLA on
evaluated on one device and reloaded under the strategy (`reloaded`), and
a tagger's and a pretrainer's differences from one device on batches that
split unevenly (`uneven`); on
torch, the losses of its half that process 0 computes outside a training
step, as evaluate does and alone (`evaluating`, `alone`: with no
collective, alike for both losses).
"""

import contextlib
import json

import keras
import numpy as np

from tests.training.two_device_run import make_cpu_devices

BACKEND = keras.backend.backend()


def batch():
    """Four sequences of five tokens, three classes: 2 labelled tokens in the first half, 9 in the second."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4, 5, 3)).astype("float32")
    labels = rng.integers(0, 3, size=(4, 5))
    labelled = np.zeros((4, 5), bool)
    labelled[0, 1] = labelled[1, 3] = True
    labelled[2:, :] = True
    labelled[3, 4] = False
    return np.where(labelled, labels, -100), logits


def losses():
    from bert_keras.models.token_cross_entropy import TokenCrossEntropy

    keras_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-100)
    return {"ours": TokenCrossEntropy(), "keras": keras_loss}


def stepped_kernel(loss, labels, logits, scope=None, prepare=None):
    """The dense kernel after one SGD step of `fit` on (logits, labels), built under `scope`."""
    with scope or contextlib.nullcontext():
        model = keras.Sequential(
            [keras.Input((5, 3)), keras.layers.Dense(3, kernel_initializer="identity")]
        )
        model.compile(optimizer=keras.optimizers.SGD(1.0), loss=loss)
    if prepare is not None:
        prepare(model)
    model.fit(logits, labels, batch_size=len(labels), epochs=1, shuffle=False, verbose=0)
    return keras.ops.convert_to_numpy(model.layers[0].kernel)


def on_tensorflow():
    import tensorflow as tf

    make_cpu_devices("tensorflow", 2)
    labels, logits = batch()
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    result = {}
    for name, loss in losses().items():
        whole = stepped_kernel(loss, labels, logits)
        replicas = stepped_kernel(loss, labels, logits, scope=strategy.scope())
        result[name] = float(np.max(np.abs(replicas - whole)))
    result["reloaded"] = reloaded_tagger_losses(strategy)
    result["uneven"] = uneven_batch_differences(strategy)
    return result


def uneven_batch_differences(strategy):
    """Largest difference of `evaluate`, `fit`'s logged losses and weights under `strategy` from one device's.

    Batches of 3 (then 1) of 4 examples: the replicas get 2 and 1 (then 1
    and 0), which Keras' build from the first batch could not take.
    """
    from bert_keras.models.bert_backbone import BertBackbone
    from bert_keras.models.bert_pretrainer import BertPretrainer
    from bert_keras.models.bert_token_classifier import BertTokenClassifier
    from tests.models.test_bert_pretrainer import FEATURES
    from tests.models.test_bert_pretrainer import LABELS
    from tests.test_case import TINY_BACKBONE

    tags = np.where(np.arange(40).reshape(4, 10) % 3 == 0, np.arange(40).reshape(4, 10) % 2, -100)
    tags[0, :] = -100  # the first example has no labelled token
    words = {key: value for key, value in FEATURES.items() if key != "masked_positions"}
    models = {
        "tagger": (lambda b: BertTokenClassifier(b, 2, dropout=0.0), words, tags),
        "pretrainer": (BertPretrainer, FEATURES, LABELS),
    }
    differences = {}
    for name, (build, x, y) in models.items():
        results = []
        for scope in (None, strategy.scope()):
            keras.utils.set_random_seed(0)
            with scope or contextlib.nullcontext():
                model = build(BertBackbone(**TINY_BACKBONE, dropout=0.0))
                model.compile(optimizer=keras.optimizers.SGD(0.5))
            evaluated = model.evaluate(x, y, batch_size=3, verbose=0, return_dict=True)
            history = model.fit(x, y, batch_size=3, shuffle=False, verbose=0).history
            weights = np.concatenate([np.ravel(w) for w in model.get_weights()])
            results.append((list(evaluated.values()), [v[0] for v in history.values()], weights))
        differences[name] = [float(np.max(np.abs(np.subtract(*pair)))) for pair in zip(*results)]
    return differences


def reloaded_tagger_losses(strategy):
    """A tagger saved with XLA on (as on jax) evaluated on one device, then loaded under `strategy`."""
    import tempfile

    from bert_keras.models.bert_backbone import BertBackbone
    from bert_keras.models.bert_token_classifier import BertTokenClassifier
    from tests.test_case import TRAINING_BACKBONE

    rng = np.random.default_rng(1)
    features = {
        "token_ids": rng.integers(1, TRAINING_BACKBONE["vocabulary_size"], (4, 6)),
        "segment_ids": np.zeros((4, 6), "int32"),
        "padding_mask": np.ones((4, 6), "int32"),  # a bool array fails under the strategy (Keras)
    }
    labels = np.where(rng.uniform(size=(4, 6)) < 0.5, rng.integers(0, 3, (4, 6)), -100)
    tagger = BertTokenClassifier(BertBackbone(**TRAINING_BACKBONE), num_classes=3)
    tagger.compile(jit_compile=True)
    path = tempfile.mkdtemp() + "/tagger.keras"
    tagger.save(path)
    losses = {"one": tagger.evaluate(features, labels, batch_size=4, verbose=0)}
    with strategy.scope():
        reloaded = keras.saving.load_model(path)
    losses["replicas"] = reloaded.evaluate(features, labels, batch_size=4, verbose=0)
    return losses


def on_torch():
    import torch

    from bert_keras.training.torch_processes import TorchProcesses

    processes = TorchProcesses()
    labels, logits = batch()
    half = slice(2 * processes.rank, 2 * processes.rank + 2)
    result = {}
    for name, loss in losses().items():
        # Every process steps on the whole batch alike, so a collective there averages equals.
        whole = stepped_kernel(loss, labels, logits)
        replicas = stepped_kernel(loss, labels[half], logits[half], prepare=processes.prepare)
        result[name] = float(np.max(np.abs(replicas - whole)))
    halves = (torch.tensor(labels[half]), torch.tensor(logits[half]))
    with torch.no_grad():  # as in evaluate
        result["evaluating"] = [float(loss(*halves)) for loss in losses().values()]
    if processes.rank == 0:  # a loss of arrays on one process: the other never joins a collective
        result["alone"] = [float(loss(*halves)) for loss in losses().values()]
    torch.distributed.destroy_process_group()
    return result if processes.rank == 0 else None


if __name__ == "__main__":
    result = on_tensorflow() if BACKEND == "tensorflow" else on_torch()
    if result is not None:
        print(json.dumps(result))
