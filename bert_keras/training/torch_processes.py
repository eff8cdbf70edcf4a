"""Data parallelism on Keras' torch backend: processes that torchrun starts, gradients averaged every step.

Keras 3 has no distribution API on torch, so `fit` stays the driver and this
module adds what PyTorch's DistributedDataParallel does around it: the
processes join torch.distributed's process group (gloo on CPUs, NCCL on
GPUs; rank, world size and rendezvous from torchrun's environment), start
from process 0's weights, each trains on its slice of every global batch, and
a hook on every trainable weight averages its gradient over the processes as
soon as backward has produced it, before the optimizer (and its clipping)
sees it. The update is then the single-process update of the global batch
when the loss is a mean over examples, or divides by the processes' mean
count (`bert_keras.training.replica_losses`).

Launch (one machine with 8 GPUs; several machines: torchrun's --nnodes and
--rdzv_endpoint):

    torchrun --nproc_per_node=8 -m tasks.classify --distribution=data_parallel ...
"""

import contextlib
import os

WORLD_SIZE_VARIABLE = "WORLD_SIZE"


def launched_by_torchrun():
    """Whether torchrun (or a launcher like it) started this process, one of any number.

    Example:
    >>> launched_by_torchrun() == ("WORLD_SIZE" in os.environ)
    True
    """
    return WORLD_SIZE_VARIABLE in os.environ


class TorchProcesses:
    """This process's place among the processes of one torchrun job.

    Joins the default process group on construction (once per process).

    Attributes:
        rank: this process's index, 0 to `world_size` - 1.
        world_size: the number of processes.
    """

    def __init__(self):
        import torch
        import torch.distributed as dist

        if not dist.is_initialized():
            dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()

    def scope(self):
        """Models need no scope: each process holds a whole copy."""
        return contextlib.nullcontext()

    def prepare(self, model):
        """Gives `model` process 0's weights and averages its gradients over the processes."""
        import torch.distributed as dist

        for variable in model.weights:
            dist.broadcast(variable.value.data, src=0)
        for variable in model.trainable_weights:
            variable.value.register_post_accumulate_grad_hook(self._average_gradient)

    def _average_gradient(self, parameter):
        import torch.distributed as dist

        dist.all_reduce(parameter.grad)
        parameter.grad.div_(self.world_size)

    def local_share(self, dataset):
        """`dataset`'s batches cut to this process's slice; a batch the processes do not divide fails.

        A batch of another size than the others (a short last batch) would
        leave its remainder in no process's slice.
        """
        import tensorflow as tf

        rank, world_size = self.rank, self.world_size

        def share(*batch):
            examples = tf.shape(tf.nest.flatten(batch)[0])[0]
            check = tf.debugging.assert_equal(
                examples % world_size,
                0,
                message=(
                    f"A batch does not split among the {world_size} processes: give batches "
                    "whose size they divide, the last one too (batch(..., drop_remainder=True))"
                ),
            )
            with tf.control_dependencies([check]):
                size = examples // world_size
            sliced = tf.nest.map_structure(
                lambda tensor: tensor[rank * size : (rank + 1) * size], batch
            )
            return sliced if len(sliced) > 1 else sliced[0]

        return dataset.map(share, num_parallel_calls=tf.data.AUTOTUNE)

    def barrier(self):
        """Returns once every process got here."""
        import torch.distributed as dist

        dist.barrier()
