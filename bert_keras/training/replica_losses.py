"""A loss of one's own under data parallelism: the global batch's loss from each replica's part.

Each replica computes the loss of its slice of the global batch, and the
engines combine the replicas' gradients: `tf.distribute` sums them (so a
replica's loss is its share, `share_of_replicas`), torchrun's processes
average them (`bert_keras.training.torch_processes`). A mean over the batch
then comes out as the global batch's mean. A mean over a count that differs
between slices (the masked-LM loss: sum(w * loss) / sum(w), over the real
predictions only) does not: the mean of the slices' means weighs a slice of
few predictions as much as one of many. Dividing each slice's sum by the
replicas' mean count (`mean_over_replicas`) makes the average of the
replicas' losses the global sum over the global count, which is what one
device computes on the whole batch. On jax, `keras.distribution` computes
the global batch's loss as it is (XLA's GSPMD), so there is nothing to do.
"""

import keras


def mean_over_replicas(value, loss):
    """The mean of `value` over the replicas training together (`value` itself on one).

    `loss` is the loss, or the per-example losses, that `value` normalises.
    On torch the mean is a collective of the process group, taken only
    where `loss` records gradients: in a training step, which every process
    runs (evaluate, predict, or a loss computed on one process alone average
    nothing, and wait for no other process).

    Example:
    >>> three = keras.ops.convert_to_tensor(3.0)
    >>> float(mean_over_replicas(three, loss=three))
    3.0
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        context = tf.distribute.get_replica_context()
        if context is None or context.num_replicas_in_sync == 1:
            return value
        return context.all_reduce(tf.distribute.ReduceOp.MEAN, value)
    if backend == "torch":
        import torch.distributed as dist

        in_a_training_step = getattr(loss, "requires_grad", False)
        joined = in_a_training_step and dist.is_available() and dist.is_initialized()
        if not joined or dist.get_world_size() == 1:
            return value
        total = value.detach().clone()
        dist.all_reduce(total)
        return total / dist.get_world_size()
    return value


def share_of_replicas(loss):
    """`loss` divided by the replica count under `tf.distribute` (`loss` itself elsewhere).

    `tf.distribute` sums the replicas' gradients, so Keras' own losses divide
    by the replica count (and its loss tracker multiplies back); a
    `compute_loss` of one's own must do the same.

    Example:
    >>> float(share_of_replicas(keras.ops.convert_to_tensor(3.0)))
    3.0
    """
    replicas = tensorflow_replicas()
    return loss / replicas if replicas > 1 else loss


def reported_as_global(share):
    """A replica's `share` of the global loss, valued as the global loss's share.

    Keras' TensorFlow trainer reports each replica's loss times the replica
    count, weighted by the replica's examples: the global loss for a mean
    over examples, but not for `share`s that sum to a loss normalised by a
    count (`mean_over_replicas`) when a batch splits unevenly (its last).
    The value returned is the replicas' sum over their count, and its
    gradient `share`'s, so the replicas still step as one device.

    Example:
    >>> float(reported_as_global(keras.ops.convert_to_tensor(3.0)))
    3.0
    """
    if tensorflow_replicas() == 1:
        return share
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None:
        return share
    total = context.all_reduce(tf.distribute.ReduceOp.SUM, share)
    return share + tf.stop_gradient(total / context.num_replicas_in_sync - share)


def tensorflow_replicas():
    """The replicas of the `tf.distribute` strategy in scope (1 off TensorFlow or without one).

    Example:
    >>> tensorflow_replicas()
    1
    """
    if keras.backend.backend() != "tensorflow":
        return 1
    import tensorflow as tf

    return tf.distribute.get_strategy().num_replicas_in_sync
