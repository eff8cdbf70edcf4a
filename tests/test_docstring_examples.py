"""Every docstring example in the library runs and prints what it shows."""

import doctest
import importlib
import pkgutil

import keras
import pytest

import bert_keras

MODULES = sorted(
    info.name for info in pkgutil.walk_packages(bert_keras.__path__, prefix="bert_keras.")
)
# Examples that run TensorFlow and NumPy only, whatever the Keras backend.
BACKEND_INDEPENDENT = (
    "bert_keras.atomic_files",
    "bert_keras.checkpoints",
    "bert_keras.data",
    "bert_keras.evaluation",
    "bert_keras.text",
    "bert_keras.training.execution",
    "bert_keras.training.output_lock",
)


def _marked(module_name):
    if module_name.startswith(BACKEND_INDEPENDENT):
        return pytest.param(module_name, marks=pytest.mark.one_backend)
    return module_name


@pytest.mark.parametrize("module_name", [_marked(name) for name in MODULES])
def test_docstring_examples_run(module_name):
    module = importlib.import_module(module_name)
    # An export is traced by TensorFlow on every backend (see tests/export/conftest.py).
    default = "tensorflow" if module_name.startswith("bert_keras.export") else None
    required = getattr(module, "REQUIRED_BACKEND", default)
    if required not in (None, keras.backend.backend()):
        pytest.skip(f"{module_name} runs on the {required} backend only")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {module_name}"
