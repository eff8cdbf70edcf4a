"""Test-wide setup: deterministic seeds, a clean dtype policy per test, tests that run once.

A test marked `one_backend` checks what does not depend on the Keras backend
(a whole program's pipeline, the tokenizer against its reference): it runs
under the torch suite only, the shortest of the three `make test` runs.
"""

import keras
import pytest

ONE_BACKEND = "torch"
_SKIP_ELSEWHERE = pytest.mark.skip(
    reason=f"backend-independent: runs once, under the {ONE_BACKEND} suite (tests/conftest.py)"
)


def pytest_collection_modifyitems(config, items):
    del config
    if keras.backend.backend() == ONE_BACKEND:
        return
    for item in items:
        if item.get_closest_marker("one_backend") is not None:
            item.add_marker(_SKIP_ELSEWHERE)


@pytest.fixture(autouse=True)
def _seeded_and_float32():
    keras.utils.set_random_seed(1234)
    keras.config.set_dtype_policy("float32")
    yield
    keras.config.set_dtype_policy("float32")
