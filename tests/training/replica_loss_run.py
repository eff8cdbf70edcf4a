"""Token tagging's loss on two replicas, each given half of a batch, against one device.

`python -m tests.training.replica_loss_run` on the tensorflow backend makes
two CPU devices and runs each half under a `MirroredStrategy`; on torch,
start it with `python -m torch.distributed.run --standalone
--nproc_per_node=2`, one half per process. Prints (process 0) a JSON line:
the whole batch's loss on one device (`whole`), the mean of the replicas'
`TokenCrossEntropy` (`replicas`) and of Keras' own loss (`keras_replicas`)
in a training step, and on torch the processes' losses outside one
(`evaluating`: each its own half's, with no collective).
"""

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
    return TokenCrossEntropy(), keras_loss


def on_tensorflow():
    import tensorflow as tf

    make_cpu_devices("tensorflow", 2)
    labels, logits = batch()
    ours, theirs = losses()
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])

    def halves(context):
        half = slice(2 * context.replica_id_in_sync_group, 2 * context.replica_id_in_sync_group + 2)
        return tf.constant(labels[half]), tf.constant(logits[half])

    def step(inputs):
        return ours(*inputs), theirs(*inputs)

    per_replica = strategy.run(
        step, args=(strategy.experimental_distribute_values_from_function(halves),)
    )
    mean = [float(strategy.reduce("MEAN", value, axis=None)) for value in per_replica]
    return {"whole": float(ours(*batch())), "replicas": mean[0], "keras_replicas": mean[1]}


def on_torch():
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    labels, logits = batch()
    half = (
        torch.tensor(labels[2 * rank : 2 * rank + 2]),
        torch.tensor(logits[2 * rank : 2 * rank + 2]),
    )
    ours, theirs = losses()

    def mean_over_processes(value):
        total = value.detach().clone()
        dist.all_reduce(total)
        return float(total) / 2

    training = [mean_over_processes(loss(*half)) for loss in (ours, theirs)]
    with torch.no_grad():  # as in evaluate: each process its own half, no collective
        evaluating = [float(ours(*half)), float(theirs(*half))]
        whole = float(ours(*(torch.tensor(array) for array in batch())))
    result = {"whole": whole, "replicas": training[0], "keras_replicas": training[1]}
    result["evaluating"] = evaluating
    dist.destroy_process_group()
    return result if rank == 0 else None


if __name__ == "__main__":
    result = on_tensorflow() if BACKEND == "tensorflow" else on_torch()
    if result is not None:
        print(json.dumps(result))
