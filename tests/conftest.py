"""Test-wide setup: deterministic seeds, a clean dtype policy per test, tests that run once.

`make test` runs the suite once per Keras backend, the three runs sharing
the machine's cores. What a backend changes (layers, models, the training
engines, checkpoint numerics, exports of a model trained on the backend)
runs under all three. What it does not change runs under one suite only:
- the files in `RUNS_ONCE` (data, text, tools, whole programs and pipelines);
  a test among them that checks backend-specific behaviour is marked
  `every_backend` and runs everywhere;
- a test marked `one_backend`.
They run under torch's suite unless the mark names another
(`@pytest.mark.one_backend("jax")`): a long one goes where the suites'
ends are evened out (`make test` prints each suite's time and the slowest
tests, and writes every test's to build/test-seconds.tsv).

Export tests (`tests/export/`) run under the TensorFlow suite: an export is
traced on Keras' TensorFlow backend whatever backend the test runs (under jax
or torch, `export_saved_model` starts a TensorFlow child process). Those
marked `every_backend` export a model built or trained on the backend under
test and compare the served answers with that model's own.
"""

import gc

import keras
import pytest

DEFAULT_ONE_BACKEND = "torch"
RUNS_ONCE = (
    "tests/checkpoints/test_keras_hub.py",
    "tests/checkpoints/test_original.py",
    "tests/checkpoints/test_question_answering_head.py",
    "tests/checkpoints/test_reading.py",
    "tests/checkpoints/test_tokenizer_settings.py",
    "tests/checkpoints/test_vocabulary.py",
    "tests/checkpoints/test_writing.py",
    "tests/data/test_cloze_instances.py",
    "tests/data/test_dynamic_masking.py",
    "tests/data/test_length_batching.py",
    "tests/data/test_pretraining_instances.py",
    "tests/data/test_pretraining_records.py",
    "tests/data/test_squad.py",
    "tests/finetuning/test_flags.py",
    "tests/finetuning/test_multiple_choice.py",
    "tests/finetuning/test_run.py",
    "tests/finetuning/test_squad.py",
    "tests/models/test_input_checks.py",
    "tests/recommendation/test_run.py",
    "tests/tasks/test_pretrain.py",
    "tests/tasks/test_recommend.py",
    "tests/test_build_file.py",
    "tests/test_readme.py",
    "tests/text/test_preprocessor.py",
    "tests/text/test_tokenizer.py",
    "tests/tools/test_build_vocab.py",
    "tests/tools/test_convert_checkpoint.py",
    "tests/tools/test_create_pretraining_data.py",
    "tests/tools/test_plot_history.py",
)


def runs_under(item):
    """The backend whose suite runs `item`, or None when every suite does."""
    if item.get_closest_marker("every_backend") is not None:
        return None
    marker = item.get_closest_marker("one_backend")
    if marker is not None:
        return marker.args[0] if marker.args else DEFAULT_ONE_BACKEND
    path = item.nodeid.split("::")[0]
    if path.startswith("tests/export/"):
        return "tensorflow"
    return DEFAULT_ONE_BACKEND if path in RUNS_ONCE else None


def pytest_collection_finish(session):
    """Leaves what imports and collection made out of every later garbage collection.

    Keras calls `gc.collect()` each time a layer drops a variable (as
    `quantize` does per layer) and in `clear_session`; with TensorFlow, jax
    and torch imported, each such call would walk every module's objects.
    """
    del session
    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(config, items):
    del config
    backend = keras.backend.backend()
    for item in items:
        chosen = runs_under(item)
        if chosen not in (None, backend):
            item.add_marker(
                pytest.mark.skip(reason=f"runs once, under the {chosen} suite (tests/conftest.py)")
            )


@pytest.fixture(autouse=True)
def _seeded_and_float32():
    keras.utils.set_random_seed(1234)
    keras.config.set_dtype_policy("float32")
    yield
    keras.config.set_dtype_policy("float32")
