"""`quantize` frees the float weights with one full garbage collection, not one per layer."""

import gc

import pytest

from bert_keras.models.bert_classifier import BertClassifier
from tests.test_case import tiny_backbone


@pytest.fixture
def nothing_frozen():
    """The suite freezes what its imports made (conftest.py); these tests start from none."""
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


def test_only_the_last_collection_walks_what_was_alive_before_quantize(
    nothing_frozen, objects_walked
):
    model = BertClassifier(tiny_backbone(), 2)
    alive_before = len(gc.get_objects())
    model.quantize("int8")
    *per_layer, last = objects_walked
    assert len(per_layer) >= 12  # Keras collects as each Dense and Embedding drops its weights
    assert max(per_layer) < alive_before / 10
    assert last > alive_before / 2
    assert gc.get_freeze_count() == 0


def test_a_callers_own_freeze_is_left_as_it_was(nothing_frozen, objects_walked):
    model = BertClassifier(tiny_backbone(), 2)
    gc.freeze()
    frozen = gc.get_freeze_count()
    model.quantize("int8")
    assert gc.get_freeze_count() > frozen / 2  # not unfrozen, less the weights freed
    assert model.backbone.token_embedding.quantization_mode == "int8"
