import gc
import subprocess
import sys
import textwrap

import pytest

from bert_keras.models.bert_classifier import BertClassifier
from bert_keras.training.garbage_collection import long_lived_objects
from tests.test_case import tiny_backbone

REPOSITORY = __file__.rsplit("/tests/", 1)[0]


@pytest.fixture(autouse=True)
def nothing_frozen():
    """Each test starts from no object frozen; the suite's freeze (conftest.py) comes back after."""
    gc.unfreeze()
    yield
    gc.collect()
    gc.freeze()


@pytest.fixture
def objects_walked(monkeypatch):
    """How many objects each `gc.collect()` call walks, in call order."""
    walked = []
    collect = gc.collect

    def recording_collect(*args):
        walked.append(len(gc.get_objects()))
        return collect(*args)

    monkeypatch.setattr(gc, "collect", recording_collect)
    return walked


def test_only_the_last_collection_walks_what_was_alive_before_quantize(objects_walked):
    model = BertClassifier(tiny_backbone(), 2)
    alive_before = len(gc.get_objects())
    model.quantize("int8")
    *per_layer, last = objects_walked
    assert len(per_layer) >= 12  # Keras collects as each Dense and Embedding drops its weights
    assert max(per_layer) < alive_before / 10
    assert last > alive_before / 2
    assert gc.get_freeze_count() == 0


def test_a_callers_own_freeze_is_left_as_it_was(objects_walked):
    model = BertClassifier(tiny_backbone(), 2)
    gc.freeze()
    frozen = gc.get_freeze_count()
    model.quantize("int8")
    assert gc.get_freeze_count() > frozen / 2  # not unfrozen, less the weights freed
    assert model.backbone.token_embedding.quantization_mode == "int8"


def test_objects_made_inside_are_frozen_and_the_collector_resumes():
    gc.unfreeze()
    try:
        with long_lived_objects():
            assert not gc.isenabled()
            kept = [[index] for index in range(1000)]
        assert gc.isenabled()
        assert gc.get_freeze_count() >= len(kept)
    finally:
        gc.unfreeze()


def test_a_paused_collector_stays_paused():
    gc.disable()
    try:
        with long_lived_objects():
            pass
        assert not gc.isenabled()
    finally:
        gc.unfreeze()
        gc.enable()


def test_the_heap_is_frozen_at_exit_after_the_handlers_registered_later():
    program = textwrap.dedent(
        """
        import atexit, gc
        atexit.register(lambda: print("at exit", gc.get_freeze_count() > 0))
        from bert_keras.training.garbage_collection import freeze_heap_at_exit
        freeze_heap_at_exit()
        atexit.register(lambda: print("later handler", gc.get_freeze_count() > 0))
        print("before exit", gc.get_freeze_count() > 0)
        """
    )
    completed = subprocess.run(
        [sys.executable, "-c", program], cwd=REPOSITORY, capture_output=True, text=True, check=True
    )
    assert completed.stdout.split("\n")[:3] == [
        "before exit False",
        "later handler False",
        "at exit True",
    ]
