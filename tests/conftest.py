"""Test-wide setup: deterministic seeds, a clean dtype policy per test, tests that run once.

`make test` runs the suite once per Keras backend, the three runs sharing
the machine's cores. What a backend changes (layers, models, the training
engines, checkpoint numerics, exports of a model trained on the backend)
runs under all three. What it does not change runs under one suite only:
- the files in `RUNS_ONCE` (data, text, tools, whole programs and pipelines),
  each under the suite named there; a test among them that checks
  backend-specific behaviour is marked `every_backend` and runs everywhere;
- a test marked `one_backend`, under torch's suite unless the mark names
  another (`@pytest.mark.one_backend("jax")`).
The suites are picked so that the three runs take about as long.
"""

import keras
import pytest

DEFAULT_ONE_BACKEND = "torch"
RUNS_ONCE = {
    "tests/checkpoints/test_keras_hub.py": "tensorflow",
    "tests/checkpoints/test_original.py": "tensorflow",
    "tests/checkpoints/test_question_answering_head.py": "jax",
    "tests/checkpoints/test_reading.py": "tensorflow",
    "tests/checkpoints/test_tokenizer_settings.py": "jax",
    "tests/checkpoints/test_writing.py": "jax",
    "tests/data/test_cloze_instances.py": "torch",
    "tests/data/test_dynamic_masking.py": "torch",
    "tests/data/test_length_batching.py": "torch",
    "tests/data/test_pretraining_instances.py": "tensorflow",
    "tests/data/test_pretraining_records.py": "torch",
    "tests/data/test_squad.py": "jax",
    "tests/finetuning/test_flags.py": "tensorflow",
    "tests/finetuning/test_multiple_choice.py": "tensorflow",
    "tests/finetuning/test_run.py": "torch",
    "tests/finetuning/test_squad.py": "jax",
    "tests/recommendation/test_run.py": "torch",
    "tests/tasks/test_pretrain.py": "jax",
    "tests/tasks/test_recommend.py": "tensorflow",
    "tests/test_build_file.py": "jax",
    "tests/test_readme.py": "torch",
    "tests/text/test_preprocessor.py": "jax",
    "tests/text/test_tokenizer.py": "tensorflow",
    "tests/tools/test_convert_checkpoint.py": "jax",
    "tests/tools/test_plot_history.py": "tensorflow",
}


def runs_under(item):
    """The backend whose suite runs `item`, or None when every suite does."""
    if item.get_closest_marker("every_backend") is not None:
        return None
    marker = item.get_closest_marker("one_backend")
    if marker is not None:
        return marker.args[0] if marker.args else DEFAULT_ONE_BACKEND
    return RUNS_ONCE.get(item.nodeid.split("::")[0])


def pytest_collection_modifyitems(config, items):
    del config
    backend = keras.backend.backend()
    for item in items:
        chosen = runs_under(item)
        if chosen not in (None, backend):
            item.add_marker(
                pytest.mark.skip(
                    reason=f"backend-independent: runs once, under the {chosen} suite "
                    "(tests/conftest.py)"
                )
            )


@pytest.fixture(autouse=True)
def _seeded_and_float32():
    keras.utils.set_random_seed(1234)
    keras.config.set_dtype_policy("float32")
    yield
    keras.config.set_dtype_policy("float32")
