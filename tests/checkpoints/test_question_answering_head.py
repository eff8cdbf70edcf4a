"""A transformers BertForQuestionAnswering checkpoint answers the same in the SQuAD run's model."""

import numpy as np
import torch
from keras import ops

from bert_keras.finetuning.squad import SquadRun
from tests.checkpoints import TOLERANCE
from tests.checkpoints import save_tiny
from tests.checkpoints import tiny_inputs


def _write_vocabulary(directory, size=40):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(size - 5)]
    (directory / "vocab.txt").write_text("\n".join(tokens))


def test_qa_outputs_load_and_give_transformers_logits(tmp_path):
    reference = save_tiny("BertForQuestionAnswering", tmp_path / "checkpoint", num_labels=2)
    _write_vocabulary(tmp_path / "checkpoint")
    model = SquadRun(
        str(tmp_path / "checkpoint"),
        str(tmp_path / "output"),
        max_seq_length=16,
        max_query_length=4,
    ).model
    inputs = tiny_inputs()
    with torch.no_grad():
        expected = reference(
            input_ids=torch.tensor(inputs["token_ids"], dtype=torch.long),
            token_type_ids=torch.tensor(inputs["segment_ids"], dtype=torch.long),
            attention_mask=torch.tensor(inputs["padding_mask"], dtype=torch.long),
        )
    actual = model(inputs)
    real = inputs["padding_mask"].astype(bool)  # padding never holds an answer in ours
    for name in ("start_logits", "end_logits"):
        difference = np.abs(ops.convert_to_numpy(actual[name]) - getattr(expected, name).numpy())
        assert difference[real].max() <= TOLERANCE, (name, difference)
        assert (ops.convert_to_numpy(actual[name])[~real] < -1e8).all()


def test_a_checkpoint_without_the_head_gets_a_fresh_one(tmp_path):
    reference = save_tiny("BertModel", tmp_path / "checkpoint")
    _write_vocabulary(tmp_path / "checkpoint")
    model = SquadRun(
        str(tmp_path / "checkpoint"),
        str(tmp_path / "output"),
        max_seq_length=16,
        max_query_length=4,
    ).model
    kernel = ops.convert_to_numpy(model.get_layer("span_logits").kernel)
    # The checkpoint's encoder is loaded; the head keeps BERT's N(0, 0.02) initialisation.
    assert kernel.shape == (8, 2) and 0 < kernel.std() < 0.1
    np.testing.assert_allclose(
        ops.convert_to_numpy(model.backbone.get_layer("embeddings").weights[0]),
        reference.embeddings.word_embeddings.weight.detach().numpy(),
    )
