"""Every task model saved with `save_to_preset` comes back from `from_preset` predicting the same."""

import json

import keras
import numpy as np
import pytest

from bert_keras.checkpoints import read_checkpoint
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_classifier import BertClassifier
from bert_keras.models.bert_masked_lm import BertMaskedLM
from bert_keras.models.bert_multiple_choice import BertMultipleChoice
from bert_keras.models.bert_pretrainer import BertPretrainer
from bert_keras.models.bert_question_answerer import BertQuestionAnswerer
from bert_keras.models.bert_sentence_encoder import BertSentenceEncoder
from bert_keras.models.bert_token_classifier import BertTokenClassifier
from bert_keras.models.checkpoint_conversion import convert_checkpoint
from bert_keras.text.preprocessor import BertPreprocessor
from bert_keras.text.tokenizer import SPECIAL_TOKENS
from bert_keras.text.tokenizer import BertTokenizer
from tests.checkpoints import assert_same_files

TOKENS = list(SPECIAL_TOKENS) + ["Good", "bad", "film", "plot", "é", "##s"]
TEXTS = ["Good film", "bad plots é", "film"]
LENGTH = 10


def _preprocessor(**tokenizer_arguments):
    tokenizer = BertTokenizer(TOKENS, lowercase=False, strip_accents=False, **tokenizer_arguments)
    return BertPreprocessor(tokenizer, LENGTH)


def _backbone():
    return BertBackbone(len(TOKENS), 1, 2, 8, 16, max_sequence_length=16, dropout=0.0)


TASKS = {
    "classifier": (
        lambda: BertClassifier(_backbone(), 3, preprocessor=_preprocessor()),
        TEXTS,
    ),
    "token_classifier": (
        lambda: BertTokenClassifier(_backbone(), 4, preprocessor=_preprocessor()),
        TEXTS,
    ),
    "question_answerer": (
        lambda: BertQuestionAnswerer(_backbone(), preprocessor=_preprocessor()),
        (TEXTS, ["film", "plot", "Good"]),
    ),
    "multiple_choice": (
        lambda: BertMultipleChoice(_backbone(), 2, preprocessor=_preprocessor()),
        (TEXTS, [["film", "plot"], ["bad", "é"], ["Good", "film"]]),
    ),
    "sentence_encoder": (
        lambda: BertSentenceEncoder(_backbone(), preprocessor=_preprocessor()),
        TEXTS,
    ),
    "masked_lm": (
        lambda: BertMaskedLM(
            _backbone(), preprocessor=_preprocessor(special_tokens_in_strings=True)
        ),
        ["Good [MASK]", "[MASK] plots [MASK]"],
    ),
}


def _task_config(model):
    """The config but for names and the preprocessor's padding (`from_preset` pads by length)."""
    return {k: v for k, v in model.get_config().items() if k not in ("name", "preprocessor")}


@pytest.mark.parametrize("task", TASKS)
def test_a_task_model_comes_back_with_its_head_vocabulary_and_length(task, tmp_path):
    build, inputs = TASKS[task]
    model = build()
    expected = model.predict(inputs, verbose=0)
    model.save_to_preset(tmp_path / "preset")

    restored = type(model).from_preset(tmp_path / "preset")

    assert _task_config(restored) == _task_config(model)
    assert restored.preprocessor.sequence_length == LENGTH
    tokenizer = restored.preprocessor.tokenizer
    assert tokenizer.get_vocabulary() == TOKENS
    assert (tokenizer.lowercase, tokenizer.strip_accents) == (False, False)
    keras.tree.map_structure(
        lambda actual, wanted: np.testing.assert_allclose(actual, wanted, atol=1e-5),
        restored.predict(inputs, verbose=0),
        expected,
    )


@pytest.mark.parametrize(
    "task",
    ["classifier", pytest.param("multiple_choice", marks=pytest.mark.one_backend)],
)
def test_a_task_models_keras_file_converts_to_what_save_to_preset_writes(task, tmp_path):
    model = TASKS[task][0]()
    model.save(tmp_path / "model.keras")
    model.save_to_preset(tmp_path / "preset")

    checkpoint = convert_checkpoint(tmp_path / "model.keras", tmp_path / "converted")

    assert checkpoint.format == "keras"
    assert checkpoint.vocabulary_file == str(tmp_path / "converted" / "vocab.txt")
    assert sorted(checkpoint.head_weights) == list(model.checkpoint_heads())
    assert_same_files(tmp_path / "converted", tmp_path / "preset")


def test_a_model_without_a_preprocessor_comes_back_without_one(tmp_path):
    model = BertPretrainer(_backbone())
    features = {
        "token_ids": np.array([[2, 5, 4, 3, 0]]),
        "segment_ids": np.zeros((1, 5), "int32"),
        "padding_mask": np.array([[1, 1, 1, 1, 0]]),
        "masked_positions": np.array([[2]]),
    }
    model.save_to_preset(tmp_path / "preset")

    restored = BertPretrainer.from_preset(tmp_path / "preset")

    assert restored.preprocessor is None
    assert read_checkpoint(tmp_path / "preset").task_config == {}
    for name, value in model.predict(features, verbose=0).items():
        np.testing.assert_allclose(restored.predict(features, verbose=0)[name], value, atol=1e-5)


def test_an_existing_preset_is_kept_unless_overwritten(tmp_path):
    first, second = (BertClassifier(_backbone(), 2, preprocessor=_preprocessor()) for _ in "12")
    first.save_to_preset(tmp_path / "preset")
    with pytest.raises(FileExistsError):
        second.save_to_preset(tmp_path / "preset")
    kept = BertClassifier.from_preset(tmp_path / "preset")
    np.testing.assert_array_equal(kept.predict(TEXTS, verbose=0), first.predict(TEXTS, verbose=0))
    second.save_to_preset(tmp_path / "preset", overwrite=True)
    replaced = BertClassifier.from_preset(tmp_path / "preset")
    np.testing.assert_allclose(
        replaced.predict(TEXTS, verbose=0), second.predict(TEXTS, verbose=0), atol=1e-6
    )


@pytest.mark.one_backend  # transformers reads the files alike whichever backend wrote them
def test_transformers_classifies_a_saved_classifier_as_it_does(tmp_path):
    transformers = pytest.importorskip("transformers")
    classifier = BertClassifier(_backbone(), 3, preprocessor=_preprocessor())
    classifier.save_to_preset(tmp_path / "preset")

    theirs = transformers.BertForSequenceClassification.from_pretrained(tmp_path / "preset")
    tokenizer = transformers.BertTokenizer.from_pretrained(tmp_path / "preset")

    encoded = tokenizer(TEXTS, padding=True, return_tensors="pt")
    np.testing.assert_allclose(
        theirs(**encoded).logits.detach().numpy(),
        classifier.predict(TEXTS, verbose=0),
        atol=1e-5,
    )


@pytest.mark.parametrize("task", ["classifier", "token_classifier"])
def test_label_names_come_back_and_go_out_again(task, tmp_path):
    model = TASKS[task][0]()
    names = [f"label_{index}" for index in range(model.num_classes)]
    assert model.label_names is None
    model.save_to_preset(tmp_path / "named", label_names=names)

    restored = type(model).from_preset(tmp_path / "named")
    restored.save_to_preset(tmp_path / "again")

    assert restored.label_names == tuple(names)
    assert read_checkpoint(tmp_path / "again").label_names == names
    other_head = type(model).from_preset(tmp_path / "named", num_classes=model.num_classes + 1)
    assert other_head.label_names is None
    with pytest.raises(ValueError, match=r"names 2 labels \(\['a', 'b'\]\) but its"):
        restored.save_to_preset(tmp_path / "wrong", label_names=["a", "b"])
    for wrong in (
        ["a"] * model.num_classes,
        [""] + names[1:],
        [None] + names[1:],
        [0, "0", *names[2:]],
    ):
        with pytest.raises(ValueError, match=r"must be distinct, non-empty strings"):
            restored.save_to_preset(tmp_path / "wrong", label_names=wrong)
    assert not (tmp_path / "wrong").exists()


def test_names_that_do_not_fit_the_head_are_not_read_with_a_warning(tmp_path, caplog):
    model = TASKS["classifier"][0]()
    model.save_to_preset(tmp_path / "named", label_names=["x", "y", "z"])
    config = json.loads((tmp_path / "named" / "config.json").read_text())
    config["id2label"] = {"0": "x", "1": "y"}  # edited by hand, one name short
    (tmp_path / "named" / "config.json").write_text(json.dumps(config))
    assert BertClassifier.from_preset(tmp_path / "named").label_names is None
    assert "id2label names ids ['0', '1'] but the head has 3 outputs" in caplog.text
