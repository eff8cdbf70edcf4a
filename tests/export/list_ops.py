"""Prints the op names the running TensorFlow registers in its core, one per line, sorted.

tests/export/tensorflow_2_17_ops.txt was written by it under TensorFlow 2.17
(see that file's first line); nothing but TensorFlow is imported, so no
tensorflow-text op is listed.

    python -m tests.export.list_ops > ops.txt
"""

import tensorflow as tf
from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session


def registered_ops():
    """The names in TensorFlow's op registry (`TF_GetAllOpList`)."""
    op_list = op_def_pb2.OpList()
    op_list.ParseFromString(pywrap_tf_session.TF_GetBuffer(pywrap_tf_session.TF_GetAllOpList()))
    return sorted({op.name for op in op_list.op})


def main():
    print(f"# TensorFlow {tf.__version__} core ops: python -m tests.export.list_ops")
    for name in registered_ops():
        print(name)


if __name__ == "__main__":
    main()
