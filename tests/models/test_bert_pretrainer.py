import keras
import numpy as np
import pytest
import torch
from keras import ops

from bert_keras.models.bert_backbone import INPUT_NAMES as BACKBONE_INPUTS
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_pretrainer import BertPretrainer
from bert_keras.models.presets import backbone_preset_config
from tests.checkpoints import save_tiny
from tests.checkpoints import tiny_inputs
from tests.test_case import TestCase
from tests.test_case import tiny_backbone

RNG = np.random.default_rng(0)
FEATURES = {
    "token_ids": RNG.integers(5, 40, (4, 10)).astype("int32"),
    "segment_ids": np.repeat([[0] * 5 + [1] * 5], 4, 0).astype("int32"),
    "padding_mask": np.ones((4, 10), "int32"),
    "masked_positions": np.array([[1, 3, 0], [2, 4, 6], [7, 0, 0], [1, 2, 3]], "int32"),
}
LABELS = {
    "masked_lm_ids": RNG.integers(5, 40, (4, 3)).astype("int32"),
    "masked_lm_weights": np.array([[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 1]], "float32"),
    "next_sentence_labels": np.array([[0], [1], [1], [0]], "int32"),
}


def _pretrainer(**backbone_overrides):
    return BertPretrainer(tiny_backbone(**backbone_overrides))


def _log_softmax(logits):
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


class TestBertPretrainer(TestCase):
    def test_shared_checks(self):
        # Three of one class: with two of each, the next-sentence bias's
        # gradient, a sum of four nearly opposite terms, is exactly 0 in bfloat16.
        labels = dict(LABELS, next_sentence_labels=np.array([[0], [1], [1], [1]], "int32"))
        self.run_task_test(BertPretrainer, {}, FEATURES, labels)

    def test_masked_lm_head_is_tied_to_the_word_embeddings_after_reload(self):
        restored = self.run_saving_test(_pretrainer(), FEATURES)
        embedding = restored.backbone.token_embedding.embeddings
        embedding.assign(np.zeros(embedding.shape, "float32"))
        logits = ops.convert_to_numpy(restored(FEATURES)["masked_lm_logits"])
        np.testing.assert_allclose(logits, 0.0)  # zero embeddings, zero output bias


def test_loss_is_the_originals_weighted_masked_lm_plus_next_sentence():
    model = _pretrainer(dropout=0.0)
    outputs = {k: ops.convert_to_numpy(v) for k, v in model(FEATURES).items()}
    mlm_log_probs = _log_softmax(outputs["masked_lm_logits"].astype("float64"))
    ce = -np.take_along_axis(mlm_log_probs, LABELS["masked_lm_ids"][..., None], -1)[..., 0]
    weights = LABELS["masked_lm_weights"]
    masked_lm_loss = (ce * weights).sum() / (weights.sum() + 1e-5)
    nsp_log_probs = _log_softmax(outputs["next_sentence_logits"].astype("float64"))
    nsp_loss = -np.take_along_axis(nsp_log_probs, LABELS["next_sentence_labels"], -1).mean()
    loss = model.compute_loss(y=LABELS, y_pred=model(FEATURES))
    np.testing.assert_allclose(
        float(ops.convert_to_numpy(loss)), masked_lm_loss + nsp_loss, rtol=1e-5
    )


def test_reported_losses_are_the_parts_of_the_loss():
    model = _pretrainer(dropout=0.0)
    model.compile(optimizer="adam")
    parts = model.evaluate(FEATURES, LABELS, batch_size=4, verbose=0, return_dict=True)
    outputs = model(FEATURES)
    ce = keras.losses.sparse_categorical_crossentropy(
        LABELS["next_sentence_labels"][:, 0], outputs["next_sentence_logits"], from_logits=True
    )
    np.testing.assert_allclose(
        parts["next_sentence_loss"], ops.convert_to_numpy(ops.mean(ce)), rtol=1e-5
    )
    np.testing.assert_allclose(
        parts["masked_lm_loss"] + parts["next_sentence_loss"], parts["loss"], rtol=1e-5
    )
    assert parts["masked_lm_loss"] > 0.0


def test_heads_see_what_the_whole_backbone_computes():
    # The pretrainer runs the last block at [CLS] and the masked positions only.
    model = _pretrainer(dropout=0.0)
    features = dict(FEATURES, padding_mask=np.array([[1] * 10, [1] * 8 + [0] * 2] * 2, "int32"))
    backbone_outputs = model.backbone({name: features[name] for name in BACKBONE_INPUTS})
    expected_masked_lm = model.masked_lm_head(
        backbone_outputs["sequence_output"], features["masked_positions"]
    )
    expected_next_sentence = model.next_sentence_head(backbone_outputs["pooled_output"])
    outputs = model(features)
    np.testing.assert_allclose(
        ops.convert_to_numpy(outputs["masked_lm_logits"]),
        ops.convert_to_numpy(expected_masked_lm),
        atol=1e-5,
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(outputs["next_sentence_logits"]),
        ops.convert_to_numpy(expected_next_sentence),
        atol=1e-5,
    )


def test_predict_before_compile_gives_what_a_call_gives():
    model = _pretrainer(dropout=0.0)
    predictions = model.predict(FEATURES, batch_size=2, verbose=0)
    for name, value in model(FEATURES).items():
        np.testing.assert_allclose(predictions[name], ops.convert_to_numpy(value), atol=1e-5)


def test_padded_predictions_do_not_count():
    model = _pretrainer(dropout=0.0)
    changed = dict(LABELS, masked_lm_ids=LABELS["masked_lm_ids"].copy())
    changed["masked_lm_ids"][LABELS["masked_lm_weights"] == 0] = 6
    predictions = model(FEATURES)
    before = model.compute_loss(y=LABELS, y_pred=predictions)
    after = model.compute_loss(y=changed, y_pred=predictions)
    np.testing.assert_allclose(ops.convert_to_numpy(before), ops.convert_to_numpy(after), rtol=1e-6)


@pytest.mark.one_backend  # a learning run; every backend's fit is in the shared checks
def test_fit_learns_and_reports_the_pretraining_metrics():
    model = _pretrainer(dropout=0.0)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    history = model.fit(FEATURES, LABELS, epochs=40, batch_size=4, verbose=0).history
    assert set(history) == {
        "loss",
        "masked_lm_loss",
        "masked_lm_accuracy",
        "next_sentence_loss",
        "next_sentence_accuracy",
    }
    assert history["loss"][-1] < 0.3 * history["loss"][0]
    assert history["masked_lm_accuracy"][-1] == 1.0
    assert history["next_sentence_accuracy"][-1] == 1.0


@pytest.mark.parametrize(
    "preset, expected", [("bert_base", 110_106_428), ("bert_large", 336_226_108)]
)
def test_parameter_counts_with_heads_equal_the_reference(preset, expected):
    config = backbone_preset_config(preset)
    model = BertPretrainer(BertBackbone(**{**config, "num_layers": 1}))
    block = model.backbone.get_layer("transformer_layer_0").count_params()
    assert model.count_params() + (config["num_layers"] - 1) * block == expected


@pytest.mark.parametrize(
    "name, wrong_label, classes",
    [
        ("masked_lm_ids", -1, "0 to 39"),
        ("masked_lm_ids", 40, "0 to 39"),
        ("next_sentence_labels", 2, "0 to 1"),
    ],
)
@pytest.mark.parametrize("method", ["fit", "evaluate"])
def test_labels_that_are_no_class_id_are_named_before_any_step(name, wrong_label, classes, method):
    model = _pretrainer()
    model.compile()
    labels = {key: value.copy() for key, value in LABELS.items()}
    labels[name][-1, 0] = wrong_label
    with pytest.raises(
        ValueError, match=rf"y\['{name}'\] holds the label {wrong_label} .*{classes}"
    ):
        getattr(model, method)(FEATURES, labels, verbose=0)


def test_labels_without_the_expected_keys():
    model = _pretrainer()
    with pytest.raises(
        ValueError, match="masked_lm_ids', 'masked_lm_weights', 'next_sentence_labels"
    ):
        model.compute_loss(y={"masked_lm_ids": LABELS["masked_lm_ids"]}, y_pred=model(FEATURES))


def test_from_preset_loads_both_heads_of_a_transformers_pretraining_model(tmp_path):
    reference = save_tiny("BertForPreTraining", tmp_path)
    inputs = tiny_inputs()
    positions = np.array([[1, 4], [2, 7]], "int32")
    with torch.no_grad():
        expected = reference(
            input_ids=torch.tensor(inputs["token_ids"], dtype=torch.long),
            token_type_ids=torch.tensor(inputs["segment_ids"], dtype=torch.long),
            attention_mask=torch.tensor(inputs["padding_mask"], dtype=torch.long),
        )
    outputs = BertPretrainer.from_preset(tmp_path, preprocessor=None)(
        dict(inputs, masked_positions=positions)
    )
    masked_lm = np.take_along_axis(expected.prediction_logits.numpy(), positions[..., None], 1)
    np.testing.assert_allclose(
        ops.convert_to_numpy(outputs["masked_lm_logits"]), masked_lm, atol=1e-5
    )
    np.testing.assert_allclose(
        ops.convert_to_numpy(outputs["next_sentence_logits"]),
        expected.seq_relationship_logits.numpy(),
        atol=1e-5,
    )
