"""Which ops of an export a stock TF Serving binary may lack."""

import os

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from tests.text import TF_TEXT_2_12_OPS


def unservable_ops(directory):
    """Ops of an export's graphs and functions that stock TF Serving may lack.

    Those neither in this TensorFlow's core nor in tensorflow-text 2.12.1,
    and those that call back into Python or need XLA.
    """
    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(directory, "saved_model.pb"), "rb") as file:
        saved_model.ParseFromString(file.read())
    ops = set()
    for meta_graph in saved_model.meta_graphs:
        ops |= {node.op for node in meta_graph.graph_def.node}
        for function in meta_graph.graph_def.library.function:
            ops |= {node.op for node in function.node_def}
    outside = {op for op in ops if not hasattr(tf.raw_ops, op)} - TF_TEXT_2_12_OPS
    return outside | (ops & {"XlaCallModule", "PyFunc", "EagerPyFunc", "PyFuncStateless"})
