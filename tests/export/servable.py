"""Which ops of an export a stock TF Serving binary may lack.

TF Serving 2.17 to 2.19 link TensorFlow 2.17's core ops (TENSORFLOW_2_17_OPS,
listed by `tests.export.list_ops` under tensorflow-cpu 2.17.1) and
tensorflow-text 2.12.1's (`tests.text.TF_TEXT_2_12_OPS`).
"""

import os

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from tests.text import TF_TEXT_2_12_OPS

_OPS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tensorflow_2_17_ops.txt")


def _read_ops(path):
    with open(path, encoding="utf-8") as file:
        return frozenset(line.strip() for line in file if line.strip() and line[0] != "#")


TENSORFLOW_2_17_OPS = _read_ops(_OPS_FILE)


def unservable_ops(directory):
    """Ops of an export's graphs and functions that stock TF Serving may lack.

    Those neither in TensorFlow 2.17's core (nor this TensorFlow's) nor in
    tensorflow-text 2.12.1, and those that call back into Python or need XLA.
    """
    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(directory, "saved_model.pb"), "rb") as file:
        saved_model.ParseFromString(file.read())
    ops, functions = set(), set()
    for meta_graph in saved_model.meta_graphs:
        ops |= {node.op for node in meta_graph.graph_def.node}
        for function in meta_graph.graph_def.library.function:
            functions.add(function.signature.name)
            ops |= {node.op for node in function.node_def}
    ops -= functions  # calls of the graph's own functions
    outside = {op for op in ops if not hasattr(tf.raw_ops, op)} - TF_TEXT_2_12_OPS
    outside |= ops - TENSORFLOW_2_17_OPS - TF_TEXT_2_12_OPS
    return outside | (ops & {"XlaCallModule", "PyFunc", "EagerPyFunc", "PyFuncStateless"})
