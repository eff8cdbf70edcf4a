"""Test-wide setup: deterministic seeds and a clean dtype policy per test."""

import keras
import pytest


@pytest.fixture(autouse=True)
def _seeded_and_float32():
    keras.utils.set_random_seed(1234)
    keras.config.set_dtype_policy("float32")
    yield
    keras.config.set_dtype_policy("float32")
