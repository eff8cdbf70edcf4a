"""Which ops of an export a stock TF Serving binary may lack.

TF Serving 2.17 to 2.19 link TensorFlow 2.17's core ops (TENSORFLOW_2_17_OPS,
listed by `tests.export.list_ops` under tensorflow-cpu 2.17.1) and
tensorflow-text 2.12.1's (`tests.text.TF_TEXT_2_12_OPS`).
"""

import os
import re

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from tests.text import TF_TEXT_2_12_OPS

_OPS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tensorflow_2_17_ops.txt")


def _read_ops(path):
    with open(path, encoding="utf-8") as file:
        return frozenset(line.strip() for line in file if line.strip() and line[0] != "#")


TENSORFLOW_2_17_OPS = _read_ops(_OPS_FILE)
# The signatures' inputs; a function's other arguments are the tensors it captured.
_FED_INPUTS = (
    "text",
    "text_pair",
    "question",
    "context",
    "choices",
    "inputs",
    "token_ids",
    "segment_ids",
    "padding_mask",
    "items",
    "item_ids",
)


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


def inputs_without_a_shape_check(directory):
    """Inputs of an export's text and id signatures that no `EnsureShape` checks in the graph.

    TF Serving feeds a request's tensors whatever their shape; only an op
    in the graph refuses a wrong one (`bert_keras.export.signatures.checked_shape`).
    """
    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(directory, "saved_model.pb"), "rb") as file:
        saved_model.ParseFromString(file.read())
    unchecked = set()
    for meta_graph in saved_model.meta_graphs:
        for function in meta_graph.graph_def.library.function:
            if not re.fullmatch(
                r"__inference_(serve_text|classify|serve_ids|serve_items)_\d+",
                function.signature.name,
            ):
                continue
            checked = {node.input[0] for node in function.node_def if node.op == "EnsureShape"}
            for argument in function.signature.input_arg:
                if argument.name in _FED_INPUTS and argument.name not in checked:
                    unchecked.add(f"{function.signature.name}:{argument.name}")
    return unchecked
