"""The raw-text prediction benchmark times both sides on the same texts and reports both."""

import pytest

from benchmarks import text_prediction
from bert_keras.models.bert_backbone import BertBackbone

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "good", "film", "dull"]


@pytest.mark.one_backend  # transformers' side runs on torch whatever the backend
def test_rows_give_every_call_of_both_sides(tmp_path, capsys):
    vocabulary = tmp_path / "vocab.txt"
    vocabulary.write_text("\n".join(VOCABULARY) + "\n")
    checkpoint = str(tmp_path / "tiny")
    BertBackbone(len(VOCABULARY), 1, 2, 8, 16, max_sequence_length=16).save_to_preset(
        checkpoint, vocabulary_file=str(vocabulary)
    )
    texts = ["a good film", "dull", "a dull , dull film", "good"] * 3
    new_texts = ["good film", "a a a a a a good"]
    rows = text_prediction.measure(
        checkpoint, texts, "toy texts", batch_size=4, max_seq_length=16, new_texts=new_texts
    )
    assert [row["measure"] for row in rows] == [
        "predict(texts) first call seconds",
        "predict(texts) second call seconds",
        "predict(texts) new texts call seconds",
    ]
    for row in rows:
        assert row["ours"] > 0 and row["peer_value"] > 0
        assert row["ratio"] == pytest.approx(row["ours"] / row["peer_value"])
        assert "12 texts, batch 4" in row["settings"]
    assert "time ratio bert_keras / transformers" in capsys.readouterr().out
    # Small calls of the texts' first 2 (no new texts): as many as the texts make, 6 of 10.
    rows = text_prediction.measure(
        checkpoint, texts, "toy texts", 4, 16, small_calls=10, small_call_size=2
    )
    assert [row["measure"] for row in rows][2:] == ["predict(texts) small call milliseconds"]
    assert rows[2]["ours"] > 0 and "6 calls of 2 texts" in rows[2]["settings"]
    assert "then 6 calls of 2 texts" in capsys.readouterr().out
