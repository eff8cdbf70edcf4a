"""Answers requests from an export as TF Serving would: no Keras, no bert_keras, no Python ops.

Run as `python -m tests.export.serve_export EXPORT_DIR < requests.json`: the
requests are `{signature: {input: nested list}}`, strings as the
"surrogateescape" decoding of their bytes (so any bytes travel: invalid
UTF-8, serialized protos); prints
`{signature: {"eager": outputs, "session": outputs}}` as JSON, from the
TF2 loader and from the v1 session API (`session.run` on the signature's
tensor names, how the server runs it). Keras, bert_keras, JAX and torch
cannot be imported; tensorflow-text's op libraries are loaded directly, as
the server links them.
"""

import sys

for _name in ("keras", "bert_keras", "jax", "torch"):
    if _name in sys.modules:  # imported by a package above this module
        sys.exit(f"serve_export: {_name} was imported before it could be blocked.")
    sys.modules[_name] = None

import glob  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def _load_tensorflow_text_ops():
    root = importlib.util.find_spec("tensorflow_text").submodule_search_locations[0]
    for library in sorted(glob.glob(os.path.join(root, "python", "ops", "*.so"))):
        tf.load_op_library(library)


def _as_json(value):
    array = np.asarray(value)
    if array.dtype.kind in "SO":
        return np.vectorize(lambda item: item.decode("utf-8"), otypes=[object])(array).tolist()
    return array.tolist()


def _bytes(value):
    """Request strings back to the bytes they stand for (see the module docstring)."""
    if isinstance(value, list):
        return [_bytes(item) for item in value]
    return value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value


def _tensor(value, spec):
    return tf.constant(_bytes(value), dtype=spec.dtype)


def _eager(directory, requests):
    loaded = tf.saved_model.load(directory)
    answers = {}
    for name, inputs in requests.items():
        function = loaded.signatures[name]
        specs = function.structured_input_signature[1]
        outputs = function(**{key: _tensor(value, specs[key]) for key, value in inputs.items()})
        answers[name] = {key: _as_json(value) for key, value in outputs.items()}
    return answers


def _session(directory, requests):
    answers = {}
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], directory)
        for name, inputs in requests.items():
            signature = meta_graph.signature_def[name]
            feeds = {
                signature.inputs[key].name: np.asarray(
                    _bytes(value),
                    dtype=tf.dtypes.as_dtype(signature.inputs[key].dtype).as_numpy_dtype,
                )
                for key, value in inputs.items()
            }
            fetches = {key: info.name for key, info in signature.outputs.items()}
            outputs = session.run(fetches, feeds)
            answers[name] = {key: _as_json(value) for key, value in outputs.items()}
    return answers


def main(directory):
    _load_tensorflow_text_ops()
    requests = json.load(sys.stdin)
    eager, session = _eager(directory, requests), _session(directory, requests)
    method_names = _method_names(directory)
    print(json.dumps({"eager": eager, "session": session, "methods": method_names}))


def _method_names(directory):
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], directory)
        return {name: signature.method_name for name, signature in meta_graph.signature_def.items()}


if __name__ == "__main__":
    main(sys.argv[1])
