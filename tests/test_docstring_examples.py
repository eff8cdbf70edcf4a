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


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples_run(module_name):
    module = importlib.import_module(module_name)
    required = getattr(module, "REQUIRED_BACKEND", None)
    if required not in (None, keras.backend.backend()):
        pytest.skip(f"{module_name} runs on the {required} backend only")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {module_name}"
