"""tools.export_saved_model from the command line: versions, and clear errors."""

import os

import keras
import pytest

from bert_keras.models.bert_backbone import BertBackbone
from tests.export import serve
from tests.programs import program

# The tool sets KERAS_BACKEND=tensorflow itself: the same run under every backend.
pytestmark = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="the tool always exports on tensorflow"
)

_run = program("tools.export_saved_model")


@pytest.mark.large
def test_the_tool_writes_numbered_versions_and_refuses_an_existing_one(tmp_path):
    vocabulary = tmp_path / "vocab.txt"
    vocabulary.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"]))
    BertBackbone(6, 1, 2, 8, 16).save_to_preset(tmp_path / "model", vocabulary_file=vocabulary)
    base = tmp_path / "served" / "tiny"
    for expected in ("1", "2"):
        completed = _run(f"--model={tmp_path / 'model'}", f"--export_base={base}")
        assert completed.returncode == 0, completed.stderr[-2000:]
        assert f"Wrote {base / expected}" in completed.stdout
    completed = _run(f"--model={tmp_path / 'model'}", f"--export_base={base}", "--version=2")
    assert completed.returncode != 0
    assert (
        f"export_saved_model: {base / '2'} exists: choose another --version (unset, the next "
        "free one), or pass --overwrite to replace it." in completed.stderr
    )
    assert sorted(os.listdir(base)) == ["1", "2"]


def test_a_bad_version_is_refused_before_any_work(tmp_path):
    completed = _run(f"--model={tmp_path}", f"--export_base={tmp_path / 'out'}", "--version=0")
    assert completed.returncode != 0
    assert "--version is 0 but must be at least 1" in completed.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.large
def test_a_recommender_run_exports_with_its_top_k(tmp_path):
    from bert_keras.models.bert4rec import Bert4Rec

    Bert4Rec(num_items=5, max_sequence_length=4, hidden_dim=8, intermediate_dim=16).save(
        tmp_path / "model.keras"
    )
    (tmp_path / "item_ids.json").write_text('{"item_ids": ["a", "b", "c", "d", "e"]}')
    base = tmp_path / "served" / "rec"
    completed = _run(f"--model={tmp_path}", f"--export_base={base}", "--top_k=2")
    assert completed.returncode == 0, completed.stderr[-2000:]
    served = serve(base / "1", {"serving_default": {"items": [["a", "b"]]}})
    (row,) = served["session"]["serving_default"]["items"]
    assert len(row) == 2 and not {"a", "b"} & set(row)
