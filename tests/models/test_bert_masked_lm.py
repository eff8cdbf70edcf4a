"""BertMaskedLM: fill-mask on raw text equals transformers' fill-mask pipeline."""

import numpy as np
import pytest
import torch
import transformers
from keras import ops

from bert_keras.models import text_inputs
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_masked_lm import BertMaskedLM
from bert_keras.text.preprocessor import BertPreprocessor
from bert_keras.text.tokenizer import BertTokenizer
from tests.checkpoints import save_tiny
from tests.test_case import TINY_INPUTS
from tests.test_case import TestCase
from tests.test_case import tiny_backbone

WORDS = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    *"the a an cat dog bird sat ran flew on under over mat tree roof paris london rome is".split(),
    *"was capital city of france england italy big small old new and but , . ! ? it".split(),
    *"she he they river ##s ##ing ##ed".split(),
]  # fmt: skip
TOLERANCE = 1e-5
TOP_K = 5
# One and two [MASK]s, different lengths (a batch is padded to its longest).
TEXTS = [
    "Paris is the capital of [MASK].",
    "the [MASK] sat on the [MASK] .",
    "a big dog ran under the old tree and [MASK] flew over the river",
    "[MASK] is small",
]
FEATURES = dict(TINY_INPUTS, masked_positions=np.array([[1, 2], [3, 0], [4, 0], [1, 5]], "int32"))
LABELS = np.array([[7, 9], [11, 0], [5, 0], [20, 21]], "int32")


@pytest.fixture(scope="module")
def masked_lm_directory(tmp_path_factory):
    """A random transformers BertForMaskedLM (safetensors) with a vocab.txt."""
    directory = tmp_path_factory.mktemp("masked_lm")
    (directory / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    model = save_tiny(
        "BertForMaskedLM",
        directory,
        vocab_size=len(WORDS),
        hidden_size=32,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        # Weights far from the default 0.02 so the probabilities differ well
        # beyond the tolerance and the top-k order is unambiguous.
        initializer_range=0.3,
    )
    with torch.no_grad():
        model.cls.predictions.bias.normal_(0.0, 1.0)
    model.save_pretrained(directory)  # with the bias drawn above
    return str(directory)


@pytest.fixture(scope="module")
def masked_lm(masked_lm_directory):
    return BertMaskedLM.from_preset(masked_lm_directory)


def _pipeline_results(directory, texts):
    """transformers' fill-mask results, one list per [MASK] for every text."""
    fill_mask = transformers.pipeline("fill-mask", model=directory, top_k=TOP_K, device="cpu")
    results = []
    for text in texts:
        result = fill_mask(text)
        results.append(result if isinstance(result[0], list) else [result])
    return results, fill_mask.tokenizer


def test_fill_mask_matches_the_transformers_pipeline(masked_lm, masked_lm_directory):
    expected, reference_tokenizer = _pipeline_results(masked_lm_directory, TEXTS)
    actual = masked_lm.fill_mask(TEXTS, top_k=TOP_K, batch_size=3)  # two batches, both padded

    assert [len(masks) for masks in actual] == [1, 2, 1, 1]
    differences = []
    for text_actual, text_expected in zip(actual, expected):
        assert len(text_actual) == len(text_expected)
        for mask_actual, mask_expected in zip(text_actual, text_expected):
            ids = [candidate["token"] for candidate in mask_expected]
            assert [candidate["token_id"] for candidate in mask_actual] == ids
            assert [candidate["token"] for candidate in mask_actual] == (
                reference_tokenizer.convert_ids_to_tokens(ids)
            )
            differences += [
                abs(ours["score"] - theirs["score"])
                for ours, theirs in zip(mask_actual, mask_expected)
            ]
    print("fill-mask max |score difference| vs transformers:", max(differences))
    assert max(differences) <= TOLERANCE


def test_a_single_text_gives_its_masks_alone(masked_lm):
    [best] = masked_lm.fill_mask(TEXTS[0], top_k=3)
    assert [candidate["token_id"] for candidate in best] == [
        candidate["token_id"] for candidate in masked_lm.fill_mask(TEXTS[:1], top_k=3)[0][0]
    ]
    scores = [candidate["score"] for candidate in best]
    assert scores == sorted(scores, reverse=True) and 0 < sum(scores) <= 1


def test_mask_in_the_text_stays_one_token(masked_lm, masked_lm_directory):
    text = "the [MASK] sat on the [MASK] ."
    features = masked_lm.preprocess_text([text])
    reference = transformers.AutoTokenizer.from_pretrained(masked_lm_directory)
    padding_mask = features["padding_mask"].numpy()[0].astype(bool)
    assert features["token_ids"].numpy()[0][padding_mask].tolist() == reference(text)["input_ids"]
    assert features["masked_positions"].numpy().tolist() == [[2, 6]]


def test_a_text_without_mask_is_named(masked_lm):
    with pytest.raises(ValueError, match=r"Text 1 \('the cat sat'\) has no \[MASK\] token"):
        masked_lm.fill_mask(["the [MASK] sat", "the cat sat"])


def test_a_mask_cut_off_by_the_packing_is_named(masked_lm_directory):
    model = BertMaskedLM.from_preset(masked_lm_directory, sequence_length=6)
    with pytest.raises(ValueError, match=r"has 2 \[MASK\] tokens but only 1 fit"):
        model.fill_mask(["[MASK] cat sat on the [MASK]"])


def test_a_checkpoint_without_masked_lm_head_is_refused(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    BertBackbone(len(WORDS), 1, 2, 8, 16).save_to_preset(str(tmp_path / "plain"))
    with pytest.raises(ValueError, match=r"plain has no masked-LM head weights"):
        BertMaskedLM.from_preset(str(tmp_path / "plain"))


def test_a_tokenizer_that_splits_mask_is_refused():
    tokenizer = BertTokenizer(WORDS)  # special_tokens_in_strings=False
    backbone = BertBackbone(len(WORDS), 1, 2, 8, 16)
    model = BertMaskedLM(backbone, preprocessor=BertPreprocessor(tokenizer, 16))
    with pytest.raises(ValueError, match="special_tokens_in_strings=True"):
        model.fill_mask(["the [MASK] sat"])


@pytest.mark.parametrize("batch_size", [0, -1, 2.0])
def test_fill_mask_refuses_a_batch_size_that_is_not_a_positive_whole_number(masked_lm, batch_size):
    with pytest.raises(ValueError, match=r"batch_size must be a positive whole number, got"):
        masked_lm.fill_mask(TEXTS, batch_size=batch_size)


@pytest.mark.parametrize("top_k", [0, 2.0, True, len(WORDS) + 1])
def test_fill_mask_refuses_a_top_k_that_is_not_a_whole_number_in_the_vocabulary(masked_lm, top_k):
    with pytest.raises(ValueError, match=rf"top_k must be a whole number from 1 to {len(WORDS)}"):
        masked_lm.fill_mask(TEXTS, top_k=top_k)


def test_fill_mask_refuses_none(masked_lm):
    with pytest.raises(ValueError, match=r"texts is None; give a text with \[MASK\]"):
        masked_lm.fill_mask(None)


def test_predict_on_texts_gives_a_row_per_mask_on_every_backend(masked_lm):
    # A batch of 3 pads to the most masks of all texts (2), not to the tokens.
    logits = masked_lm.predict(TEXTS, batch_size=3, verbose=0)
    assert logits.shape == (len(TEXTS), 2, len(WORDS))
    best = masked_lm.fill_mask(TEXTS, top_k=1)
    for text_logits, text_best in zip(logits, best):
        assert text_logits[: len(text_best)].argmax(-1).tolist() == [
            [candidate["token_id"] for candidate in mask][0] for mask in text_best
        ]
        # Rows past a text's masks are padding: 0, not a prediction at [CLS].
        assert not text_logits[len(text_best) :].any()
        assert text_logits[: len(text_best)].all()


def test_texts_packed_in_chunks_keep_masked_positions_per_mask(masked_lm, monkeypatch):
    monkeypatch.setattr(text_inputs, "PACKING_CHUNK", 2)  # chunks of 2 masks and of 1
    features = text_inputs.packed_features(masked_lm.preprocess_text, TEXTS)
    expected = masked_lm.preprocess_text(TEXTS)["masked_positions"].numpy()
    assert features["masked_positions"].tolist() == expected.tolist()


def test_fit_and_evaluate_take_texts_with_labels_per_mask(masked_lm_directory):
    model = BertMaskedLM.from_preset(masked_lm_directory)
    model.compile(optimizer="sgd")
    labels = np.array([[WORDS.index("france"), 0], [5, 9], [8, 0], [33, 0]], "int32")
    weights = np.array([[1, 0], [1, 1], [1, 0], [1, 0]], "float32")
    features = {name: value.numpy() for name, value in model.preprocess_text(TEXTS).items()}
    on_arrays = model.evaluate(features, labels, sample_weight=weights, verbose=0)
    on_texts = model.evaluate(TEXTS, labels, sample_weight=weights, batch_size=3, verbose=0)
    np.testing.assert_allclose(on_texts, on_arrays, rtol=1e-5)
    # Without weights, each [MASK] weighs 1 and the padding 0.
    unweighted = model.evaluate(TEXTS, labels, batch_size=3, verbose=0)
    np.testing.assert_allclose(unweighted, on_arrays, rtol=1e-5)
    # Labels padded wider than the most masks: the padding weighs 0 (Keras'
    # loss still divides by every label: 3 a text for 2).
    wider = np.pad(labels, [(0, 0), (0, 1)])
    np.testing.assert_allclose(
        model.evaluate(TEXTS, wider, verbose=0), [on_arrays[0] * 2 / 3, on_arrays[1]], rtol=1e-5
    )
    history = model.fit(TEXTS, labels, sample_weight=weights, batch_size=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


def test_texts_with_fewer_labels_than_masks_are_refused_before_training(masked_lm_directory):
    model = BertMaskedLM.from_preset(masked_lm_directory)
    model.compile(optimizer="sgd")
    with pytest.raises(ValueError, match=r"y has 1 labels per text .*, but text 1 has 2 \[MASK\]"):
        model.fit(TEXTS, np.ones((4, 1), "int32"), verbose=0)


def test_a_masked_position_off_the_sequence_is_named_before_any_step():
    model = BertMaskedLM(tiny_backbone())
    model.compile()
    past_the_end = dict(FEATURES, masked_positions=np.array([[1, 7]] * 4, "int32"))
    message = r"x\['masked_positions'\] holds the position 7 \(at index \(0, 1\)\)"
    with pytest.raises(ValueError, match=message):
        model.predict(past_the_end, verbose=0)
    with pytest.raises(ValueError, match=message):
        model.fit(past_the_end, LABELS, verbose=0)


class TestBertMaskedLM(TestCase):
    def test_shared_checks(self):
        self.run_task_test(BertMaskedLM, {}, FEATURES, LABELS, unused_weights=("pooler_dense",))

    def test_quantized_int8_predicts_as_the_float_model_and_round_trips(self, masked_lm_directory):
        model = BertMaskedLM.from_preset(masked_lm_directory, preprocessor=None)
        # Every position of every sequence: 28 predictions.
        features = dict(TINY_INPUTS, masked_positions=np.tile(np.arange(7, dtype="int32"), (4, 1)))
        expected = ops.convert_to_numpy(model(features))
        model.quantize("int8")
        # The head is tied to the quantized table and reads it dequantized.
        assert model.backbone.token_embedding.quantization_mode == "int8"
        assert model.masked_lm_head.transform_dense.quantization_mode == "int8"
        logits = ops.convert_to_numpy(model(features))
        error = np.abs(logits - expected)
        # Measured: 3% of the logits' mean size on average, 7% of their largest
        # at most (hidden size 32), 26 of 28 predictions alike.
        assert error.mean() < 0.05 * np.abs(expected).mean()
        assert error.max() < 0.1 * np.abs(expected).max()
        assert (logits.argmax(-1) == expected.argmax(-1)).mean() >= 0.85
        restored = self.run_saving_test(model, features)
        assert restored.backbone.token_embedding.quantization_mode == "int8"
        assert restored.masked_lm_head.transform_dense.quantization_mode == "int8"
