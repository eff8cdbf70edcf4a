"""Bert4Rec: shapes, masking, the loss, saving, precision and top-k on every backend."""

import os
import tempfile

import keras
import numpy as np
import pytest
from keras import ops

from bert_keras.models.bert4rec import Bert4Rec
from bert_keras.models.bert4rec import MaskedItemLoss
from bert_keras.models.presets import BERT4REC_PRESETS
from tests.test_case import TestCase

TINY = {
    "num_items": 30,
    "num_layers": 2,
    "num_heads": 2,
    "hidden_dim": 8,
    "intermediate_dim": 16,
    "max_sequence_length": 10,
}
MASK = TINY["num_items"] + 1
INPUTS = {
    "item_ids": np.array([[3, 4, MASK, 6, 0, 0], [7, MASK, 9, 10, 11, MASK]], "int32"),
    "masked_positions": np.array([[2, 0], [1, 5]], "int32"),
}


def logits_of(model, inputs):
    return ops.convert_to_numpy(model(inputs))


class TestBert4Rec(TestCase):
    def test_config_round_trip_and_saving(self):
        self._check_config_round_trip(Bert4Rec, TINY)
        restored = self.run_saving_test(Bert4Rec(**TINY), INPUTS)
        assert restored.mask_id == MASK

    def test_quantized_int8_ranks_as_the_float_model_and_round_trips(self):
        model = Bert4Rec(**TINY)
        expected = logits_of(model, INPUTS)[..., 1:MASK]  # the items' logits
        model.quantize("int8")
        # The output head is tied to the quantized item table.
        assert model.embeddings.token_embedding.quantization_mode == "int8"
        assert model.output_head.transform_dense.quantization_mode == "int8"
        # Logits of about 0.1 (initial weights): int8 is off by about 1e-3.
        error = np.abs(logits_of(model, INPUTS)[..., 1:MASK] - expected)
        assert error.max() < 0.1 * np.abs(expected).max()
        restored = self.run_saving_test(model, INPUTS)
        assert restored.output_head.transform_dense.quantization_mode == "int8"
        assert restored.get_config() == model.get_config()

    def test_logits_over_ids_with_pad_and_mask_never_likely(self):
        logits = logits_of(Bert4Rec(**TINY), INPUTS)
        assert logits.shape == (2, 2, MASK + 1)
        assert logits.dtype == np.float32
        assert np.all(logits[..., 0] <= -1e8) and np.all(logits[..., MASK] <= -1e8)
        assert np.all(np.abs(logits[..., 1:MASK]) < 100)

    def test_right_padding_changes_nothing(self):
        model = Bert4Rec(**TINY)
        longer = dict(INPUTS, item_ids=np.pad(INPUTS["item_ids"], [[0, 0], [0, 4]]))
        np.testing.assert_allclose(logits_of(model, longer), logits_of(model, INPUTS), atol=1e-5)

    def test_the_last_block_at_masked_positions_equals_the_full_sequence(self):
        model = Bert4Rec(**TINY)
        every = {
            "item_ids": INPUTS["item_ids"],
            "masked_positions": np.tile(np.arange(6, dtype="int32"), (2, 1)),
        }
        full = logits_of(model, every)  # [2, 6, vocabulary]
        expected = np.take_along_axis(full, INPUTS["masked_positions"][..., None], axis=1)
        np.testing.assert_allclose(logits_of(model, INPUTS), expected, atol=1e-5)

    def test_the_output_is_tied_to_the_item_embeddings(self):
        model = Bert4Rec(**TINY)
        names = [w.path for w in model.weights]
        assert sum("embeddings/token_embedding" in name for name in names) == 1
        assert not any("output_kernel" in name for name in names)
        assert not any("segment" in name for name in names)

    def test_fit_learns_next_items_and_padded_predictions_cost_nothing(self):
        model = Bert4Rec(**TINY, dropout=0.0)
        model.compile(optimizer=keras.optimizers.Adam(1e-2))
        # Item k is always followed by k + 1: mask one position per row.
        rng = np.random.default_rng(0)
        starts = rng.integers(1, 20, 64)
        sequences = (starts[:, None] + np.arange(8)).astype("int32")
        positions = rng.integers(1, 8, (64, 1)).astype("int32")
        labels = np.take_along_axis(sequences, positions, axis=1)
        masked = sequences.copy()
        np.put_along_axis(masked, positions, MASK, axis=1)
        features = {"item_ids": masked, "masked_positions": positions}
        history = model.fit(features, labels, epochs=100, batch_size=64, verbose=0)
        assert history.history["loss"][-1] < 0.3 * history.history["loss"][0]
        # The same rows with a padded second prediction: the same loss.
        padded = dict(features, masked_positions=np.pad(positions, [[0, 0], [0, 1]]))
        loss = MaskedItemLoss()
        np.testing.assert_allclose(
            float(loss(np.pad(labels, [[0, 0], [0, 1]]), model(padded))),
            float(loss(labels, model(features))),
            rtol=1e-5,
        )
        # Saved and loaded, it trains on from where it stopped, without compiling again.
        with tempfile.TemporaryDirectory() as directory:
            model.save(os.path.join(directory, "bert4rec.keras"))
            restored = keras.saving.load_model(
                os.path.join(directory, "bert4rec.keras"), safe_mode=True
            )
        assert restored.compiled and isinstance(restored.loss, MaskedItemLoss)
        for ours, theirs in zip(restored.optimizer.variables, model.optimizer.variables):
            np.testing.assert_array_equal(ops.convert_to_numpy(ours), ops.convert_to_numpy(theirs))
        restored.fit(features, labels, batch_size=64, verbose=0)

    def test_mixed_precision_keeps_float32_weights_and_logits(self):
        model = Bert4Rec(**TINY, dtype="mixed_bfloat16")
        assert all(variable.dtype == "float32" for variable in model.weights)
        assert keras.backend.standardize_dtype(model(INPUTS).dtype) == "float32"

    def test_recommend_leaves_out_seen_items_and_padding(self):
        model = Bert4Rec(**TINY)
        histories = [np.arange(1, 29), np.array([5])]
        items, scores = model.recommend(histories, top_k=3)
        assert set(items[0][:2].tolist()) == {29, 30}
        assert scores[0][2] == -np.inf  # only two items are left unseen
        assert 5 not in items[1].tolist() and 0 not in items[1].tolist()
        assert np.all(np.diff(scores[1]) <= 0)
        unfiltered, _ = model.recommend([np.array([5])], top_k=30, exclude_seen=False)
        assert 5 in unfiltered[0].tolist()
        beyond, beyond_scores = model.recommend([np.array([5])], top_k=40)  # 30 items
        assert beyond.shape == beyond_scores.shape == (1, 40)
        assert sorted(beyond[0, :29].tolist()) == [item for item in range(1, 31) if item != 5]
        assert not beyond[0, 29:].any() and np.all(np.isneginf(beyond_scores[0, 29:]))

    def test_recommend_refuses_unknown_ids(self):
        with pytest.raises(
            ValueError, match="History 1 holds the id 31, outside the model's items 1..30"
        ):
            Bert4Rec(**TINY).recommend([np.array([1]), np.array([2, 31])])

    def test_presets_are_the_papers(self):
        model = Bert4Rec.from_preset("bert4rec_beauty", num_items=100)
        assert (model.num_layers, model.num_heads, model.hidden_dim) == (2, 2, 64)
        assert model.max_sequence_length == 50
        assert BERT4REC_PRESETS["bert4rec_ml1m"]["mask_probability"] == 0.2
        with pytest.raises(ValueError, match="Unknown BERT4Rec preset 'bert4rec_x'"):
            Bert4Rec.from_preset("bert4rec_x", num_items=5)


@pytest.mark.one_backend  # checked before any layer is built
@pytest.mark.parametrize(
    "build, error, message",
    [
        (lambda: Bert4Rec(num_items=10, dropuot=0.0), TypeError, r"arguments \['dropuot'\]"),
        (
            lambda: Bert4Rec.from_preset("bert4rec_ml1m", num_items=10, hiden_dim=16),
            TypeError,
            r"arguments \['hiden_dim'\]",
        ),
        (lambda: Bert4Rec(num_items=0), ValueError, "num_items must be a positive whole number"),
    ],
)
def test_a_mistyped_argument_or_an_empty_catalogue_is_refused(build, error, message):
    with pytest.raises(error, match=message):
        build()
