"""A Bert4Rec export: raw item histories in a fresh process, the model's own top-k out."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_keras.export.recommendation import recommender_signatures
from bert_keras.export.saved_model import export_saved_model
from bert_keras.models.bert4rec import Bert4Rec
from tests.export import serve
from tests.export.servable import inputs_without_a_shape_check
from tests.export.servable import unservable_ops

ITEMS = [f"movie{index}" for index in range(1, 13)]  # model ids 1..12
# Right-padded with "": a short history, an unknown item, one longer than the model's window.
HISTORIES = [
    ["movie3", "movie5", "movie7"] + [""] * 6,
    ["movie12", "unknown"] + [""] * 7,
    [f"movie{index}" for index in (1, 2, 4, 6, 8, 9, 10, 11, 2)],
    [f"movie{index}" for index in range(1, 10)],  # 3 unseen items for the top 4: one "" slot
]


@pytest.fixture(scope="module")
def run_directory(tmp_path_factory):
    """What tasks.recommend leaves in its output directory, with an untrained model."""
    directory = tmp_path_factory.mktemp("recommend")
    model = Bert4Rec(num_items=12, max_sequence_length=6, hidden_dim=8, intermediate_dim=16)
    model.save(directory / "model.keras")
    (directory / "item_ids.json").write_text(json.dumps({"item_ids": ITEMS}))
    return directory, model


@pytest.fixture(scope="module")
def served(run_directory, tmp_path_factory):
    directory, _ = run_directory
    base = tmp_path_factory.mktemp("models") / "recommender"
    version = export_saved_model(directory, base, top_k=4)
    requests = {
        "serving_default": {"items": HISTORIES},
        "serve_ids": {"item_ids": [[3, 5, 7], [12, 0, 0]]},
    }
    return version, serve(version, requests)


def expected(model, histories):
    known = [[ITEMS.index(item) + 1 for item in row if item in ITEMS] for row in histories]
    return model.recommend(known, top_k=4)


@pytest.mark.every_backend
def test_served_items_are_the_models_top_k_unseen_items(run_directory, served):
    _, model = run_directory
    version, answers = served
    assert os.path.basename(version) == "1"
    ids, scores = expected(model, HISTORIES)
    for api in ("eager", "session"):
        answer = answers[api]["serving_default"]
        assert answer["items"] == [[ITEMS[i - 1] if i else "" for i in row] for row in ids]
        assert answer["items"][-1][-1] == "" and answer["scores"][-1][-1] == -np.inf
        np.testing.assert_allclose(answer["scores"], scores, rtol=1e-4, atol=1e-5)
        for history, row in zip(HISTORIES, answer["items"]):
            assert not set(history) & set(row) - {""}


@pytest.mark.every_backend
def test_serve_ids_takes_model_ids(run_directory, served):
    _, model = run_directory
    _, answers = served
    ids, scores = model.recommend([[3, 5, 7], [12]], top_k=4)
    answer = answers["session"]["serve_ids"]
    assert answer["item_ids"] == ids.tolist()
    np.testing.assert_allclose(answer["scores"], scores, rtol=1e-4, atol=1e-5)


def test_the_export_needs_only_ops_stock_tf_serving_links(served):
    version, _ = served
    assert unservable_ops(version) == set()
    assert inputs_without_a_shape_check(version) == set()
    assert os.path.isfile(os.path.join(version, "assets.extra", "tf_serving_warmup_requests"))


def test_refusals_name_the_problem(run_directory, tmp_path):
    directory, _ = run_directory
    with pytest.raises(
        ValueError, match="^sequence_length applies to text models, not to Bert4Rec"
    ):
        export_saved_model(directory, tmp_path / "a", sequence_length=8)
    with pytest.raises(ValueError, match="^label_names, max_answer_length apply to text models"):
        export_saved_model(directory, tmp_path / "a", label_names=["a"], max_answer_length=3)
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    (lonely / "model.keras").write_bytes((directory / "model.keras").read_bytes())
    with pytest.raises(ValueError, match="no item_ids.json beside it"):
        export_saved_model(lonely / "model.keras", tmp_path / "b")
    with pytest.raises(
        ValueError, match=r"top_k must be in 1..12 \(the model.s number of items\), got 13"
    ):
        export_saved_model(directory, tmp_path / "c", top_k=13)


@pytest.mark.parametrize("length", [0, 3])
def test_an_empty_batch_gets_empty_answers(length):
    model = Bert4Rec(num_items=12, max_sequence_length=6, hidden_dim=8, intermediate_dim=16)
    signatures = recommender_signatures(model, ITEMS, top_k=4)
    answer = signatures["serving_default"](tf.zeros([0, length], tf.string))
    assert answer["items"].shape == answer["scores"].shape == (0, 4)
    answer = signatures["serve_ids"](tf.zeros([0, length], tf.int32))
    assert answer["item_ids"].shape == answer["scores"].shape == (0, 4)


def test_by_default_a_small_catalogue_is_ranked_whole():
    model = Bert4Rec(num_items=6, max_sequence_length=6, hidden_dim=8, intermediate_dim=16)
    signatures = recommender_signatures(model, ITEMS[:6])  # fewer items than the default 10
    answer = signatures["serve_ids"](tf.constant([[1, 2]], tf.int32))
    assert answer["item_ids"].shape == (1, 6)
    assert sorted(answer["item_ids"].numpy()[0, :4]) == [3, 4, 5, 6]
