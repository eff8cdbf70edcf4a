"""Every docstring example in the library runs and prints what it shows."""

import doctest
import importlib
import pkgutil
import zlib

import pytest

import bert_keras

MODULES = sorted(
    info.name for info in pkgutil.walk_packages(bert_keras.__path__, prefix="bert_keras.")
)
BACKENDS = ("tensorflow", "jax", "torch")


def _marked(module_name):
    """Each module's examples run under one suite: the model tests cover every backend.

    Exports trace on TensorFlow (see tests/conftest.py); the other
    modules are spread over the three suites by a stable hash of the name.
    """
    if module_name.startswith("bert_keras.export"):
        backend = "tensorflow"
    else:
        backend = BACKENDS[zlib.crc32(module_name.encode()) % len(BACKENDS)]
    return pytest.param(module_name, marks=pytest.mark.one_backend(backend))


@pytest.mark.parametrize("module_name", [_marked(name) for name in MODULES])
def test_docstring_examples_run(module_name):
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {module_name}"
