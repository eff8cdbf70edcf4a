"""Export tests run on the TensorFlow backend, except those marked `every_backend`.

An export is traced on Keras' TensorFlow backend whatever backend the test
runs (under jax or torch, `export_saved_model` starts a TensorFlow child
process), so most export tests would repeat the same work three times. The
tests marked `every_backend` export a model built or trained on the backend
under test and compare the served answers with that model's own.
"""

import keras
import pytest

_SKIP = pytest.mark.skip(
    reason="the export is traced on TensorFlow on every backend; see tests/export/conftest.py"
)


def pytest_collection_modifyitems(config, items):
    del config
    if keras.backend.backend() == "tensorflow":
        return
    for item in items:
        in_export = "tests/export/" in item.nodeid or item.nodeid.startswith("export/")
        if in_export and item.get_closest_marker("every_backend") is None:
            item.add_marker(_SKIP)
