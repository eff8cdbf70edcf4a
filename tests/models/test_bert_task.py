"""Task models with an attached preprocessor take raw text in fit, evaluate and predict."""

import logging
import subprocess
import sys
from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras.checkpoints import read_checkpoint
from bert_keras.checkpoints import write_checkpoint
from bert_keras.models import text_inputs
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_classifier import BertClassifier
from bert_keras.models.bert_masked_lm import BertMaskedLM
from bert_keras.models.bert_multiple_choice import BertMultipleChoice
from bert_keras.models.bert_pretrainer import BertPretrainer
from bert_keras.models.bert_question_answerer import BertQuestionAnswerer
from bert_keras.models.bert_sentence_encoder import BertSentenceEncoder
from bert_keras.models.bert_token_classifier import BertTokenClassifier
from bert_keras.text.preprocessor import BertPreprocessor
from bert_keras.text.tokenizer import SPECIAL_TOKENS
from bert_keras.text.tokenizer import BertTokenizer
from tests.test_case import TINY_INPUTS
from tests.test_case import TRAINING_BACKBONE
from tests.test_case import TestCase
from tests.test_case import check_validation_data_overrides_split
from tests.test_case import tiny_backbone

POSITIVE = ["good", "great", "fine", "nice", "happy", "glad", "best", "superb"]
NEGATIVE = ["bad", "awful", "poor", "sad", "worst", "ugly", "grim", "dull"]
NEUTRAL = [f"word{index}" for index in range(50 - len(SPECIAL_TOKENS) - 16)]
VOCABULARY = list(SPECIAL_TOKENS) + POSITIVE + NEGATIVE + NEUTRAL  # 50 tokens
SEQUENCE_LENGTH = 12
# Packed: 3, 7, 4, 3, 5 and 10 tokens (the last of [UNK]s).
MIXED_LENGTHS = [
    "good",
    "bad awful poor sad worst",
    "fine nice",
    "great",
    "ugly grim dull",
    "a b c d e f g h",
]


def test_ids_off_the_embedding_tables_and_a_too_long_preprocessor_are_errors(vocabulary_file):
    """On jax an id past the table gathers NaN; a negative one wraps round, on every backend."""
    classifier = _classifier(vocabulary_file)
    token_ids = classifier.preprocessor(tf.constant(_toy_sentiment(4)[0]))
    inputs = {name: ids.numpy() for name, ids in token_ids.items()}
    inputs["token_ids"][2, 1] = len(VOCABULARY)
    with pytest.raises(
        ValueError, match=rf"x\['token_ids'\] holds the id {len(VOCABULARY)} \(at index \(2, 1\)\)"
    ):
        classifier.predict(inputs, verbose=0)
    inputs["token_ids"][2, 1] = -1
    with pytest.raises(
        ValueError, match=r"inputs\['token_ids'\] holds the id -1 .* ids run from 0"
    ):
        classifier.backbone(inputs)
    inputs["token_ids"][2, 1] = 5
    inputs["segment_ids"][0, 0] = 2
    with pytest.raises(ValueError, match=r"x\['segment_ids'\] holds the id 2 .*\(num_segments 2\)"):
        classifier.evaluate(inputs, np.zeros(4, "int32"), verbose=0)
    backbone = _backbone(max_sequence_length=16)
    with pytest.raises(ValueError, match="packs sequences of 32 tokens .* has 16 positions"):
        BertClassifier(backbone, 2, preprocessor=_preprocessor(vocabulary_file, 32))


def test_too_long_token_ids_are_refused_before_keras_loop_which_keeps_the_weights(
    vocabulary_file,
):
    """On jax an error raised while Keras' loop traces leaves the variables without values."""
    classifier = _classifier(vocabulary_file, max_sequence_length=16)
    classifier.compile()
    inputs = {name: np.ones((2, 17), "int32") for name in ("token_ids", "padding_mask")}
    inputs["segment_ids"] = np.zeros((2, 17), "int32")
    message = r"max_sequence_length is 16 but x\['token_ids'\] has 17 positions \(shape \(2, 17\)\)"
    with pytest.raises(ValueError, match=message):
        classifier.predict(inputs, verbose=0)
    with pytest.raises(ValueError, match=message):
        classifier.fit(inputs, np.array([0, 1]), verbose=0)
    with pytest.raises(ValueError, match=message):
        classifier.predict_on_batch(inputs)
    texts = ["good", "bad"]
    expected = keras.ops.convert_to_numpy(
        classifier({k: v.numpy() for k, v in classifier.preprocessor(tf.constant(texts)).items()})
    )
    np.testing.assert_allclose(classifier.predict(texts, verbose=0), expected, atol=1e-5)


def test_a_generator_of_texts_is_an_error_and_one_of_ids_is_read_whole(vocabulary_file):
    classifier = _classifier(vocabulary_file)
    classifier.compile()
    texts, labels = _toy_sentiment(4)
    with pytest.raises(ValueError, match="x is a generator that yields text; task models take"):
        classifier.fit(((np.array(texts), labels) for _ in range(2)), steps_per_epoch=1, verbose=0)
    with pytest.raises(ValueError, match="x is a generator that yields text"):
        classifier.evaluate((np.array(texts), labels) for _ in range(2))
    features = {k: v.numpy() for k, v in classifier.preprocessor(tf.constant(texts)).items()}
    expected = classifier.predict(features, verbose=0)
    from_generator = classifier.predict(((features,) for _ in range(2)), steps=2, verbose=0)
    np.testing.assert_allclose(from_generator, np.concatenate([expected, expected]), atol=1e-5)
    classifier.fit(((features, labels) for _ in range(2)), steps_per_epoch=2, verbose=0)
    assert classifier.optimizer.iterations.numpy() == 2


@pytest.mark.one_backend  # checked before Keras' loop
def test_texts_without_labels_are_refused_by_fit_and_evaluate(vocabulary_file):
    classifier = _classifier(vocabulary_file)
    classifier.compile()
    for method in (classifier.fit, classifier.evaluate):
        with pytest.raises(
            ValueError, match=rf"BertClassifier.{method.__name__} got texts but y is"
        ):
            method(["good word1", "bad"], verbose=0)
    assert classifier.optimizer.iterations.numpy() == 0


class _ValidationSteps(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.steps = 0

    def on_test_batch_end(self, batch, logs=None):
        self.steps += 1


@pytest.mark.one_backend  # how the validation texts are batched is backend-free
def test_validation_on_texts_takes_fits_batch_size_unless_told_its_own(vocabulary_file):
    texts, labels = _toy_sentiment(8)
    classifier = _classifier(vocabulary_file)
    classifier.compile()
    for options, steps in (
        ({"validation_split": 0.5}, 2),
        ({"validation_data": (texts[4:], labels[4:])}, 2),
        ({"validation_split": 0.5, "validation_batch_size": 4}, 1),
        ({"validation_data": (classifier.preprocessor(texts[4:]), labels[4:])}, 2),  # ids
    ):
        counted = _ValidationSteps()
        classifier.fit(texts, labels, batch_size=2, verbose=0, callbacks=[counted], **options)
        assert counted.steps == steps, options


def _toy_sentiment(count, seed=0):
    """Three-word sentences of positive (label 1) or negative (label 0) words."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, count)
    texts = [" ".join(rng.choice(POSITIVE if label else NEGATIVE, 3)) for label in labels]
    return texts, labels.astype("int32")


@pytest.fixture(scope="module")
def vocabulary_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("vocabulary") / "vocab.txt"
    path.write_text("\n".join(VOCABULARY) + "\n")
    return str(path)


def _preprocessor(vocabulary_file, sequence_length=SEQUENCE_LENGTH):
    return BertPreprocessor(BertTokenizer(vocabulary_file), sequence_length=sequence_length)


def _by_eights(vocabulary_file):
    """A by-length preprocessor that alone would pad batches to multiples of 8."""
    return BertPreprocessor(
        BertTokenizer(vocabulary_file), SEQUENCE_LENGTH, padding="longest", pad_to_multiple_of=8
    )


def _backbone(**overrides):
    config = {**TRAINING_BACKBONE, "vocabulary_size": len(VOCABULARY)}
    return BertBackbone(**{**config, **overrides})


def _classifier(vocabulary_file, **overrides):
    return BertClassifier(
        _backbone(**overrides), num_classes=2, preprocessor=_preprocessor(vocabulary_file)
    )


@pytest.mark.one_backend  # text in tf.data, then a plain fit
def test_fit_on_strings_learns_a_toy_task(vocabulary_file):
    texts, labels = _toy_sentiment(64)
    classifier = _classifier(vocabulary_file, dropout=0.0)
    classifier.compile(learning_rate=2e-2)
    # Some seeds idle near log(2) for three epochs before the loss falls.
    history = classifier.fit(texts, labels, batch_size=8, epochs=8, verbose=0).history
    assert history["loss"][-1] < 0.5 * history["loss"][0], history["loss"]
    held_out_texts, held_out_labels = _toy_sentiment(32, seed=1)
    _, accuracy = classifier.evaluate(held_out_texts, held_out_labels, verbose=0)
    assert accuracy > 0.9


@pytest.mark.one_backend  # text in tf.data, then a plain fit
def test_fit_on_sentence_pairs_with_validation(vocabulary_file):
    texts, labels = _toy_sentiment(8)
    pairs = (texts, np.array(texts[::-1]))
    classifier = _classifier(vocabulary_file)
    classifier.compile()
    before = [np.array(weight) for weight in classifier.trainable_weights]
    validation = ((pairs[0][:3], pairs[1][:3]), labels[:3])
    history = classifier.fit(
        pairs, labels, batch_size=4, validation_data=validation, verbose=0
    ).history
    changed = [
        not np.array_equal(b, np.array(a)) for b, a in zip(before, classifier.trainable_weights)
    ]
    assert all(changed)
    expected = classifier.evaluate(*validation, verbose=0)[0]
    assert history["val_loss"][0] == pytest.approx(expected, rel=1e-5)
    history = classifier.fit(pairs, labels, validation_split=0.25, batch_size=4, verbose=0).history
    assert set(history) >= {"loss", "val_loss", "val_accuracy"}


def test_predict_takes_texts_shortest_first_and_answers_in_their_order(vocabulary_file):
    texts = ["good", "bad awful poor sad worst", "fine nice", "great", "ugly grim dull", "best"]
    by_length = BertPreprocessor(
        BertTokenizer(vocabulary_file), SEQUENCE_LENGTH, padding="longest", pad_to_multiple_of=4
    )
    classifier = BertClassifier(_backbone(), num_classes=2, preprocessor=by_length)
    full_length = _preprocessor(vocabulary_file)(texts)
    expected = classifier.predict({k: v.numpy() for k, v in full_length.items()}, verbose=0)
    assert not np.allclose(expected[0], expected[1])  # the texts' answers differ
    np.testing.assert_allclose(
        classifier.predict(texts, batch_size=2, verbose=0), expected, atol=1e-5
    )
    np.testing.assert_allclose(
        classifier.predict(np.array(texts), batch_size=4, verbose=0), expected, atol=1e-5
    )


def _recorded_batch_shapes(monkeypatch):
    """A list that gets the `token_ids` shape of each batch Keras predicts from now on."""
    shapes = []
    predict_on_batch = keras.Model.predict_on_batch

    def recording(model, x):
        shapes.append(tuple(x["token_ids"].shape))
        return predict_on_batch(model, x)

    monkeypatch.setattr(keras.Model, "predict_on_batch", recording)
    return shapes


def test_a_compiled_predict_fills_its_last_batch_of_texts(vocabulary_file, monkeypatch):
    # Under XLA a short last batch would compile a program of its own.
    shapes = _recorded_batch_shapes(monkeypatch)
    texts = ["good", "bad awful poor sad worst", "fine nice", "great", "ugly grim dull", "best"]
    classifier = _classifier(vocabulary_file)
    predictions = classifier.predict(texts, batch_size=4, verbose=0)
    assert [rows for rows, _ in shapes] == ([4, 4] if classifier.jit_compile else [4, 2])
    assert predictions.shape == (6, 2)
    shapes.clear()
    classifier.predict(texts[:3], batch_size=4, verbose=0)
    # One short batch: under XLA, filled to the rows compiled (a compile costs more).
    assert [rows for rows, _ in shapes] == ([4] if classifier.jit_compile else [3])


def test_predict_pads_each_batch_of_texts_to_the_widths_it_needs(vocabulary_file, monkeypatch):
    shapes = _recorded_batch_shapes(monkeypatch)
    texts = MIXED_LENGTHS
    by_eights = _by_eights(vocabulary_file)
    classifier = BertClassifier(_backbone(), num_classes=2, preprocessor=by_eights)
    predictions = classifier.predict(texts, batch_size=2, verbose=0)
    widths = [width for _, width in shapes]
    if classifier.jit_compile:  # one width: a compile costs more than the padding; 8 < 10
        assert widths == [SEQUENCE_LENGTH] * 3
    else:  # each batch as wide as its longest text
        assert widths == [3, 5, 10]
    expected = classifier.predict(
        {k: v.numpy() for k, v in _preprocessor(vocabulary_file)(texts).items()}, verbose=0
    )
    np.testing.assert_allclose(predictions, expected, atol=1e-5)


class _BatchRecorder(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.events = []

    def on_predict_begin(self, logs=None):
        self.events.append("begin")

    def on_predict_batch_end(self, batch, logs=None):
        self.events.append((batch, len(logs["outputs"])))

    def on_predict_end(self, logs=None):
        self.events.append("end")


def test_predict_on_texts_calls_callbacks_and_shows_progress_as_keras_does(vocabulary_file, capsys):
    classifier = _classifier(vocabulary_file)
    recorder = _BatchRecorder()
    classifier.predict(MIXED_LENGTHS[:5], batch_size=2, callbacks=[recorder], verbose=1)
    rows = [2, 2, 2] if classifier.jit_compile else [2, 2, 1]  # a filled last batch under XLA
    assert recorder.events == ["begin", *enumerate(rows), "end"]
    assert "3/3" in capsys.readouterr().out
    classifier.predict(MIXED_LENGTHS[:5], batch_size=2, verbose=0)
    assert capsys.readouterr().out == ""
    recorder.events.clear()  # a CallbackList of the caller's own is used as it is, as Keras does
    callback_list = keras.callbacks.CallbackList([recorder], model=classifier)
    classifier.predict(MIXED_LENGTHS[:5], batch_size=2, callbacks=callback_list, verbose=1)
    assert recorder.events == ["begin", *enumerate(rows), "end"]
    assert capsys.readouterr().out == ""


def test_predict_on_texts_in_keras_loop_where_batches_are_shared_among_devices(
    vocabulary_file, monkeypatch
):
    # Keras' loop (a tf.data pipeline) shares the batches among replicas.
    classifier = _classifier(vocabulary_file)
    on_one_device = classifier.predict(MIXED_LENGTHS, batch_size=4, verbose=0)
    keras_loops = []
    keras_predict = keras.Model.predict
    monkeypatch.setattr(type(classifier), "_predicts_batch_by_batch", False)
    monkeypatch.setattr(
        keras.Model, "predict", lambda *a, **k: keras_loops.append(1) or keras_predict(*a, **k)
    )
    in_keras_loop = classifier.predict(MIXED_LENGTHS, batch_size=4, verbose=0)
    assert keras_loops == [1]
    np.testing.assert_allclose(in_keras_loop, on_one_device, atol=1e-6)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="counts tf.function traces")
def test_tensorflow_traces_predict_once_for_texts_of_any_length(vocabulary_file):
    texts = ["good", "bad awful poor sad worst", "fine nice", "great", "ugly grim dull", "best"]
    classifier = _classifier(vocabulary_file)
    predictions = classifier.predict(texts, batch_size=4, verbose=0)  # widths 3 and 7; 4 + 2
    classifier.predict(texts[::-1] * 3, batch_size=5, verbose=0)
    assert classifier.predict_function.experimental_get_tracing_count() == 1
    expected = classifier.predict(
        {k: v.numpy() for k, v in _preprocessor(vocabulary_file)(texts).items()}, verbose=0
    )
    np.testing.assert_allclose(predictions, expected, atol=1e-5)


def _jax_compilations():
    """A list that grows by one for each program XLA compiles from now on."""
    import jax

    compilations = []

    def listener(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compilations.append(event)

    jax.monitoring.register_event_duration_secs_listener(listener)
    return compilations


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="counts XLA compilations of JAX")
@pytest.mark.parametrize(
    "batch_size, later",
    [
        (2, ["good", "fine nice", "great", "best"]),  # narrower than any width compiled
        (3, ["fine nice", "bad awful"]),  # 2 rows: filled to 3 rather than compiled anew
    ],
)
def test_jax_predicts_later_texts_with_the_programs_it_compiled_before(
    vocabulary_file, batch_size, later
):
    compilations = _jax_compilations()
    classifier = _classifier(vocabulary_file)
    classifier.predict(MIXED_LENGTHS, batch_size=batch_size, verbose=0)
    first = len(compilations)
    predictions = classifier.predict(later, batch_size=batch_size, verbose=0)
    assert len(compilations) == first  # a compile costs more than this padding
    expected = classifier.predict(
        {k: v.numpy() for k, v in _preprocessor(vocabulary_file)(later).items()}, verbose=0
    )
    np.testing.assert_allclose(predictions, expected, atol=1e-5)


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="counts XLA compilations of JAX")
def test_jax_predicts_a_token_longer_texts_at_the_width_it_compiled_before(vocabulary_file):
    # Compiled widths are multiples of 8, not as long as the first call's longest text.
    compilations = _jax_compilations()
    classifier = BertClassifier(
        _backbone(), num_classes=2, preprocessor=_preprocessor(vocabulary_file, sequence_length=32)
    )
    classifier.predict(["bad awful poor sad worst"] * 2, batch_size=2, verbose=0)  # 7 tokens
    first = len(compilations)
    longer = ["bad awful poor sad worst ugly"] * 2  # 8 tokens
    predictions = classifier.predict(longer, batch_size=2, verbose=0)
    assert len(compilations) == first
    full_length = _preprocessor(vocabulary_file, sequence_length=32)(longer)
    expected = classifier.predict({k: v.numpy() for k, v in full_length.items()}, verbose=0)
    np.testing.assert_allclose(predictions, expected, atol=1e-5)


def test_later_fits_train_at_the_widths_compiled_before(vocabulary_file, monkeypatch):
    widths = []
    keras_fit = keras.Model.fit

    def recording(model, x=None, *args, **kwargs):
        if isinstance(x, tf.data.Dataset):
            widths.append({int(batch["token_ids"].shape[1]) for batch, *_ in x})
        return keras_fit(model, x, *args, **kwargs)

    monkeypatch.setattr(keras.Model, "fit", recording)
    classifier = _classifier(vocabulary_file)
    classifier.compile()
    classifier.fit(MIXED_LENGTHS, np.array([1, 0, 1, 1, 0, 1]), batch_size=2, verbose=0)
    shorter = ["good", "fine nice", "great", "best"]
    classifier.fit(shorter, np.array([1, 1, 1, 1]), batch_size=2, verbose=0)
    longest = int(_preprocessor(vocabulary_file)(shorter)["padding_mask"].numpy().sum(1).max())
    if classifier.jit_compile:  # one width, the first fit's: a compile costs more than padding
        assert widths[1] == widths[0] and len(widths[0]) == 1 and max(widths[1]) > longest
    else:  # each batch as wide as its longest text
        assert max(widths[1]) == longest


def test_fit_on_texts_trains_as_on_full_padding_at_the_widths_it_needs(
    vocabulary_file, monkeypatch
):
    widths = []
    keras_fit = keras.Model.fit

    def recording(model, x=None, *args, **kwargs):
        if isinstance(x, tf.data.Dataset):
            widths.extend(int(batch["token_ids"].shape[1]) for batch, *_ in x)
        return keras_fit(model, x, *args, **kwargs)

    monkeypatch.setattr(keras.Model, "fit", recording)
    texts = MIXED_LENGTHS
    labels, weights = np.array([1, 0, 1, 1, 0, 1]), np.array([1.0, 2.0, 0.5, 1.0, 3.0, 1.0])
    by_eights = _by_eights(vocabulary_file)
    full_length = {k: v.numpy() for k, v in _preprocessor(vocabulary_file)(texts).items()}
    histories = []
    for x in (texts, full_length):
        keras.utils.set_random_seed(0)
        model = BertClassifier(_backbone(dropout=0.0), num_classes=2, preprocessor=by_eights)
        model.compile(learning_rate=1e-2)
        history = model.fit(
            x, labels, sample_weight=weights, batch_size=2, epochs=2, shuffle=False, verbose=0
        )
        histories.append((history.history["loss"], model.predict(full_length, verbose=0)))
    np.testing.assert_allclose(histories[0][0], histories[1][0], rtol=1e-4)
    np.testing.assert_allclose(histories[0][1], histories[1][1], atol=1e-4)
    if model.jit_compile:  # a compile costs more than all this padding
        assert widths == [10, 10, 10]
    else:  # each batch as wide as its longest text
        assert widths == [7, 4, 10]


def test_evaluate_on_texts_takes_them_shortest_first_with_their_labels(vocabulary_file):
    texts = ["good", "bad awful poor sad worst", "fine nice", "great", "ugly grim dull", "best"]
    labels, weights = np.array([1, 0, 1, 1, 0, 1]), np.array([1.0, 2.0, 0.5, 1.0, 3.0, 0.0])
    classifier = _classifier(vocabulary_file)
    classifier.compile()
    full_length = {k: v.numpy() for k, v in _preprocessor(vocabulary_file)(texts).items()}
    for weight in (None, weights):
        expected = classifier.evaluate(
            full_length, labels, sample_weight=weight, batch_size=6, verbose=0
        )
        by_length = classifier.evaluate(
            texts, labels.tolist(), sample_weight=weight, batch_size=4, verbose=0
        )
        np.testing.assert_allclose(by_length, expected, rtol=1e-5)


@pytest.mark.one_backend  # what reaches Keras
def test_keras_gets_datasets_without_an_autotuning_thread_to_wait_for(vocabulary_file, monkeypatch):
    # An iterator's deletion, when fit, evaluate or predict ends, waits for
    # tf.data's autotuning thread to wake: up to a minute.
    received = {}

    def recording(method):
        keras_method = getattr(keras.Model, method)

        def record(model, x=None, *args, **kwargs):
            received[method] = x
            received[f"{method} validation"] = kwargs.get("validation_data")
            return keras_method(model, x, *args, **kwargs)

        return record

    for method in ("fit", "evaluate", "predict"):
        monkeypatch.setattr(keras.Model, method, recording(method))
    texts, labels = _toy_sentiment(4)
    classifier = _classifier(vocabulary_file)
    classifier.compile()
    classifier.fit(texts, labels, validation_data=(texts, labels), verbose=0)
    classifier.evaluate(texts, labels, verbose=0)
    classifier.predict(texts, verbose=0)
    assert "predict" not in received  # texts go batch by batch, without a pipeline
    datasets = [received[name] for name in ("fit", "fit validation", "evaluate")]
    ids = tf.data.Dataset.from_tensor_slices(_preprocessor(vocabulary_file)(texts))
    classifier.predict(ids.batch(2), verbose=0)
    datasets.append(received["predict"])
    assert [dataset.options().autotune.enabled for dataset in datasets] == [False] * 4
    tuned = tf.data.Options()
    tuned.autotune.enabled = True
    batches = tf.data.Dataset.zip(ids, tf.data.Dataset.from_tensor_slices(labels)).batch(2)
    classifier.fit(batches.with_options(tuned), verbose=0)  # the caller's own choice stays
    assert received["fit"].options().autotune.enabled is True


def _assert_predicts_as_on_the_preprocessors_ids(classifier, texts, **options):
    features = {name: value.numpy() for name, value in classifier.preprocessor(texts).items()}
    np.testing.assert_allclose(
        classifier.predict(texts, verbose=0, **options),
        classifier.predict(features, verbose=0),
        atol=1e-6,
    )


@pytest.mark.one_backend  # text in tf.data, then a plain fit
def test_predict_on_strings_equals_predict_on_the_preprocessors_ids(vocabulary_file):
    texts, _ = _toy_sentiment(5)
    classifier = _classifier(vocabulary_file)
    _assert_predicts_as_on_the_preprocessors_ids(classifier, texts, batch_size=2)
    _assert_predicts_as_on_the_preprocessors_ids(classifier, (texts, texts[::-1]))


@pytest.mark.one_backend  # text in tf.data, then a plain fit
def test_datasets_of_strings_labels_and_pairs(vocabulary_file):
    texts, labels = _toy_sentiment(6)
    classifier = _classifier(vocabulary_file)
    classifier.compile()
    from_arrays = classifier.evaluate(texts, labels, batch_size=3, verbose=0)
    labelled = tf.data.Dataset.from_tensor_slices((texts, labels)).batch(3)
    np.testing.assert_allclose(classifier.evaluate(labelled, verbose=0), from_arrays, rtol=1e-5)
    expected = classifier.predict((texts, texts), verbose=0)
    pairs = tf.data.Dataset.from_tensor_slices((texts, texts)).batch(4)
    np.testing.assert_allclose(classifier.predict(pairs, verbose=0), expected, atol=1e-6)
    with pytest.raises(ValueError, match="batch it first"):
        classifier.predict(tf.data.Dataset.from_tensor_slices(texts), verbose=0)


def test_text_without_a_preprocessor_is_a_clear_error():
    classifier = BertClassifier(_backbone(), num_classes=2)
    with pytest.raises(ValueError, match="BertClassifier got text but has no preprocessor"):
        classifier.predict(["a sentence"], verbose=0)


def test_steps_take_the_first_batches_of_texts_and_on_batch_takes_texts(vocabulary_file):
    classifier = _classifier(vocabulary_file)
    classifier.compile()
    texts, labels = MIXED_LENGTHS, np.array([1, 0, 1, 1, 0, 0])
    first_four = classifier.predict(texts[:4], verbose=0)
    np.testing.assert_allclose(
        classifier.predict(texts, batch_size=2, steps=2, verbose=0), first_four, atol=1e-6
    )
    np.testing.assert_allclose(
        classifier.evaluate(texts, labels, batch_size=2, steps=2, verbose=0),
        classifier.evaluate(texts[:4], labels[:4], batch_size=2, verbose=0),
        rtol=1e-6,
    )
    np.testing.assert_allclose(classifier.predict_on_batch(texts[:4]), first_four, atol=1e-6)
    with pytest.raises(ValueError, match="x is one string"):
        classifier.predict_on_batch("good")
    for steps in (0, -1, 1.5):  # not every text, nor the texts but the last two
        with pytest.raises(ValueError, match=f"steps must be a positive whole number, got {steps}"):
            classifier.predict(texts, batch_size=2, steps=steps, verbose=0)
    with pytest.raises(ValueError, match="steps must be a positive whole number, got 0"):
        classifier.evaluate(texts, labels, steps=0, verbose=0)


def test_texts_are_packed_by_a_graph_once_eager_packing_has_cost_a_trace(
    vocabulary_file, monkeypatch
):
    monkeypatch.setattr(text_inputs, "PACKING_TRACE_SECONDS", 1e-9)  # the first call's cost
    classifier = _classifier(vocabulary_file)
    eager = classifier.predict(MIXED_LENGTHS, verbose=0)
    packer = classifier._text_packer[1]
    assert packer.traced_structures == 0 and packer.eager_seconds > 0
    np.testing.assert_allclose(classifier.predict(MIXED_LENGTHS, verbose=0), eager, atol=1e-6)
    assert packer.traced_structures == 1
    _assert_predicts_as_on_the_preprocessors_ids(classifier, (MIXED_LENGTHS, MIXED_LENGTHS[::-1]))
    assert packer.traced_structures == 2 and classifier._text_packer[1] is packer
    classifier.preprocessor = _by_eights(vocabulary_file)  # a new preprocessor, a new packer
    classifier.predict(MIXED_LENGTHS, verbose=0)
    assert classifier._text_packer[1] is not packer


def test_bad_texts_and_labels_are_errors_before_any_step(vocabulary_file):
    classifier = _classifier(vocabulary_file)
    classifier.compile()
    with pytest.raises(ValueError, match=r"x is one string or number \('good'\)"):
        classifier.predict("good", verbose=0)
    with pytest.raises(ValueError, match="x holds no examples"):
        classifier.predict([], verbose=0)
    with pytest.raises(ValueError, match="batch_size must be a positive whole number, got -1"):
        classifier.predict(["good"], batch_size=-1, verbose=0)
    with pytest.raises(ValueError, match="y holds 1 examples for the 2 of x"):
        classifier.evaluate(["good", "bad"], [1], verbose=0)
    with pytest.raises(ValueError, match=r"validation_data: x\[1\] is None, not a string"):
        classifier.fit(["good"], [1], validation_data=(["bad", None], [0, 1]), verbose=0)
    pairs_as_a_list = [["good", "bad"], ["bad", "good"]]  # a tuple makes them pairs
    with pytest.raises(ValueError, match=r"x holds lists \(x\[0\] is a list\) where one text"):
        classifier.fit(pairs_as_a_list, [1, 0], verbose=0)
    with pytest.raises(ValueError, match=r"x is an array of texts of the shape \(2, 2\)"):
        classifier.predict(np.array(pairs_as_a_list), verbose=0)
    with pytest.raises(ValueError, match=r"x holds tuples \(x\[0\] is a tuple\) where one text"):
        classifier.predict([("good", "bad"), ("bad", "good")], verbose=0)
    with pytest.raises(ValueError, match=r"x\[0\] is one string \('good'\); a tuple x holds"):
        classifier.predict(("good", "bad!"), verbose=0)
    assert classifier.optimizer.iterations.numpy() == 0


@pytest.mark.one_backend  # the arrays are checked before Keras' loop, alike on every backend
def test_class_ids_out_of_range_are_errors_for_text_and_token_ids(vocabulary_file):
    """On jax such an id would train on a wrong loss without an error."""
    classifier = _classifier(vocabulary_file)
    classifier.compile()
    texts, labels = _toy_sentiment(4)
    with pytest.raises(ValueError, match=r"y holds the label 2 \(at index 3 of its 4 labels\)"):
        classifier.fit(texts, [*labels[:3], 2], verbose=0)
    token_ids = classifier.preprocessor(tf.constant(texts))
    with pytest.raises(ValueError, match="y holds the label -1 "):
        classifier.evaluate({k: v.numpy() for k, v in token_ids.items()}, [-1] * 4, verbose=0)
    one_hot = np.eye(2)[labels]  # in range, but not one id per example: fails inside the loss
    with pytest.raises(ValueError, match=r"y has the shape \(4, 2\), where the loss reads one"):
        classifier.fit(texts, one_hot, verbose=0)
    classifier.fit(texts, labels, verbose=0)
    classifier.fit(texts, np.array(labels)[:, None], verbose=0)  # [examples, 1]: one id each
    # Labels a loss of the user's reads otherwise are not class ids: here soft one-hot rows.
    classifier.compile(loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    assert classifier.fit(texts, np.array([[0.9, 0.1]] * 4), verbose=0).history.keys() == {"loss"}
    regression = BertClassifier(_backbone(), num_classes=1, preprocessor=classifier.preprocessor)
    regression.compile()
    regression.fit(texts, np.array([0.5, 2.5, -1.0, 4.0]), verbose=0)  # scores, not class ids


@pytest.mark.one_backend  # compile's arguments
def test_compile_refuses_the_auto_optimizers_settings_beside_an_optimizer(vocabulary_file):
    classifier = _classifier(vocabulary_file)
    for settings in ({"learning_rate": 1e-3}, {"num_train_steps": 10}):
        with pytest.raises(ValueError, match="num_train_steps with an optimizer of its own"):
            classifier.compile(optimizer=keras.optimizers.Adam(), **settings)
    classifier.compile(optimizer=keras.optimizers.Adam(1e-3))
    assert float(classifier.optimizer.learning_rate) == pytest.approx(1e-3)


def test_keras_file_with_a_preprocessor_predicts_the_same_on_strings(tmp_path):
    vocabulary_file = tmp_path / "vocab.txt"
    vocabulary_file.write_text("\n".join(VOCABULARY) + "\n")
    classifier = _classifier(str(vocabulary_file))
    texts, _ = _toy_sentiment(4)
    expected = classifier.predict(texts, verbose=0)
    path = str(tmp_path / "classifier.keras")
    classifier.save(path)
    vocabulary_file.unlink()  # the vocabulary travels inside the .keras file
    restored = keras.saving.load_model(path, safe_mode=True)
    assert isinstance(restored.preprocessor, BertPreprocessor)
    assert restored.preprocessor.tokenizer.get_vocabulary() == VOCABULARY
    np.testing.assert_allclose(restored.predict(texts, verbose=0), expected, atol=1e-6)
    config = classifier.get_config()
    assert BertClassifier.from_config(config).get_config() == config
    predictions = str(tmp_path / "predictions.npy")
    _load_in_a_fresh_process(path, texts, predictions)
    np.testing.assert_allclose(np.load(predictions), expected, atol=1e-6)


def _load_in_a_fresh_process(path, texts, predictions):
    """`load_model(path)` where only the task model's class was imported, then its predictions saved.

    The preprocessor's and tokenizer's classes register on import; a fresh
    process has imported neither.
    """
    child = (
        "import sys, keras, numpy as np\n"
        "from bert_keras import BertClassifier\n"
        "assert 'bert_keras.text.preprocessor' not in sys.modules\n"
        f"model = keras.saving.load_model({path!r}, safe_mode=True)\n"
        f"np.save({predictions!r}, model.predict({list(texts)!r}, verbose=0))\n"
    )
    completed = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    assert completed.returncode == 0, completed.stderr[-3000:]


def test_a_compiled_model_reloads_compiled_with_its_optimizer_state(vocabulary_file, tmp_path):
    texts, labels = _toy_sentiment(8)
    classifier = _classifier(vocabulary_file, dropout=0.0)
    classifier.compile(learning_rate=1e-3, num_train_steps=20)
    classifier.fit(texts, labels, batch_size=4, verbose=0)
    path = str(tmp_path / "classifier.keras")
    classifier.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    assert restored.compiled
    assert restored.optimizer.get_config() == classifier.optimizer.get_config()
    for ours, theirs in zip(restored.optimizer.variables, classifier.optimizer.variables):
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(ours), keras.ops.convert_to_numpy(theirs)
        )
    np.testing.assert_allclose(
        restored.evaluate(texts, labels, verbose=0),
        classifier.evaluate(texts, labels, verbose=0),
        rtol=1e-5,
    )
    restored.fit(texts, labels, batch_size=4, verbose=0)
    assert int(restored.optimizer.iterations) == 4


@pytest.mark.one_backend  # text in tf.data, then a plain fit
def test_multiple_choice_takes_contexts_and_choices(vocabulary_file):
    chooser = BertMultipleChoice(
        _backbone(), num_choices=3, preprocessor=_preprocessor(vocabulary_file)
    )
    contexts = ["good word1", "bad word2"]
    choices = np.array([["fine", "sad", "word3"], ["ugly", "nice", "word4 word5"]])
    features = chooser.preprocess_text((tf.constant(contexts), tf.constant(choices)))
    assert tuple(features["token_ids"].shape) == (2, 3, SEQUENCE_LENGTH)
    single = chooser.preprocessor(([contexts[1]], [choices[1, 2]]))
    np.testing.assert_array_equal(features["token_ids"][1, 2], single["token_ids"][0])
    logits = chooser.predict((contexts, choices), verbose=0)
    as_ids = chooser.predict({name: value.numpy() for name, value in features.items()}, verbose=0)
    np.testing.assert_allclose(logits, as_ids, atol=1e-6)
    chooser.compile()
    history = chooser.fit((contexts, choices), np.array([0, 1]), verbose=0).history
    assert np.isfinite(history["loss"][0])
    with pytest.raises(ValueError, match=r"x\[1\]\[1\] holds 2 choices, but the model takes"):
        chooser.predict((contexts, [["fine", "sad", "word3"], ["ugly", "nice"]]), verbose=0)
    with pytest.raises(ValueError, match="y holds the label 3 .* class ids run from 0 to 2"):
        chooser.fit((contexts, choices), np.array([0, 3]), verbose=0)
    with pytest.raises(ValueError, match="x is a list of texts; BertMultipleChoice takes text as"):
        chooser.predict([contexts, choices.tolist()], verbose=0)


def test_question_answerer_takes_question_context_pairs(vocabulary_file):
    reader = BertQuestionAnswerer(_backbone(), preprocessor=_preprocessor(vocabulary_file))
    outputs = reader.predict((["good word1"], ["word2 bad word3"]), verbose=0)
    assert outputs["start_logits"].shape == (1, SEQUENCE_LENGTH)
    with pytest.raises(
        ValueError, match=r"x holds lists \(x\[0\] is a list\) .* tuple \(questions,"
    ):
        reader.predict([["good word1"], ["word2 bad word3"]], verbose=0)


@pytest.mark.one_backend  # the arrays are checked before Keras' loop, alike on every backend
def test_span_labels_off_their_examples_tokens_are_errors_before_any_step(vocabulary_file):
    reader = BertQuestionAnswerer(_backbone(), preprocessor=_preprocessor(vocabulary_file))
    reader.compile()
    pairs = (["good word1", "good"], ["word2 bad word3", "bad"])  # 8 and 5 packed tokens
    ids = {name: value.numpy() for name, value in reader.preprocessor(pairs).items()}
    ends = np.array([6, 3])
    for start, wrong in (
        (-1, "-1 for example 1"),
        (5, "5 for example 1"),
        (SEQUENCE_LENGTH, f"{SEQUENCE_LENGTH} "),
    ):
        starts = np.array([7, start])
        for x in (pairs, ids):  # on padding, past the sequence or before it: on jax, no error
            with pytest.raises(
                ValueError, match=rf"y\['start_logits'\] holds the position {wrong}"
            ):
                reader.fit(x, {"start_logits": starts, "end_logits": ends}, verbose=0)
    with pytest.raises(
        ValueError, match=r"validation_data: y\['end_logits'\] holds the position 8"
    ):
        reader.fit(
            pairs,
            {"start_logits": np.array([7, 4]), "end_logits": ends},
            validation_data=(pairs, {"start_logits": np.array([0, 0]), "end_logits": [8, 0]}),
            verbose=0,
        )
    reader.fit(pairs, {"start_logits": np.array([7, 4]), "end_logits": ends}, verbose=0)
    one_hot = np.eye(SEQUENCE_LENGTH)[[7, 4]]  # rows, where the sparse loss reads positions
    with pytest.raises(ValueError, match=r"y\['start_logits'\] has the shape \(2, 12\)"):
        reader.fit(pairs, {"start_logits": one_hot, "end_logits": ends}, verbose=0)
    # Labels a loss of the user's reads otherwise are not positions; an ignored one passes.
    rows = keras.losses.CategoricalCrossentropy(from_logits=True)
    ignoring = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1)
    reader.compile(loss={"start_logits": rows, "end_logits": ignoring})
    reader.fit(pairs, {"start_logits": one_hot, "end_logits": np.array([6, -1])}, verbose=0)


@pytest.mark.one_backend  # Keras matches outputs by name, and the arrays are checked before its loop
def test_span_labels_in_a_pair_are_starts_then_ends_and_checked(vocabulary_file):
    """Keras would match a pair to the outputs by their sorted names: end_logits first."""
    reader = BertQuestionAnswerer(_backbone(), preprocessor=_preprocessor(vocabulary_file))
    reader.compile()
    pairs = (["good word1", "good"], ["word2 bad word3", "bad"])  # 8 and 5 packed tokens
    starts, ends = np.array([1, 2]), np.array([6, 3])

    def losses(x, y):
        result = reader.evaluate(x, y, verbose=0, return_dict=True)
        return result["start_logits_loss"], result["end_logits_loss"]

    by_name = losses(pairs, {"start_logits": starts, "end_logits": ends})
    assert by_name != losses(pairs, {"start_logits": ends, "end_logits": starts})
    np.testing.assert_allclose(losses(pairs, (starts, ends)), by_name, rtol=1e-5)
    np.testing.assert_allclose(losses(pairs, [starts, ends]), by_name, rtol=1e-5)
    dataset = tf.data.Dataset.from_tensor_slices((pairs, (starts, ends))).batch(2)
    np.testing.assert_allclose(losses(dataset, None), by_name, rtol=1e-5)
    with pytest.raises(ValueError, match=r"y\['start_logits'\] holds the position 5 for example 1"):
        reader.fit(pairs, (np.array([1, 5]), ends), verbose=0)
    with pytest.raises(ValueError, match=r"y\['end_logits'\] holds the position 12 for example 0"):
        reader.fit(pairs, [starts.tolist(), [12, 3]], verbose=0)
    with pytest.raises(ValueError, match=r"y is a ndarray of the shape \(2, 2\); .* a dict"):
        reader.fit(pairs, np.stack([starts, ends], axis=-1), verbose=0)
    with pytest.raises(
        ValueError, match=r"validation_data: y\['end_logits'\] holds the position 9"
    ):
        reader.fit(pairs, (starts, ends), validation_data=(pairs, (starts, [9, 3])), verbose=0)
    assert reader.optimizer.iterations.numpy() == 0
    history = reader.fit(pairs, [starts, ends], validation_data=(pairs, [starts, ends]), verbose=0)
    assert np.isfinite(history.history["val_start_logits_loss"][0])


@pytest.mark.one_backend  # what validates is settled before Keras' loop
def test_validation_data_of_texts_overrides_validation_split_as_in_keras(vocabulary_file):
    texts, labels = _toy_sentiment(8)
    check_validation_data_overrides_split(
        _classifier(vocabulary_file, dropout=0.0), texts, labels, _toy_sentiment(4, seed=1)
    )


@pytest.mark.one_backend  # the inputs are refused before Keras' loop
def test_validation_that_cannot_be_made_of_texts_is_refused_before_any_step(vocabulary_file):
    classifier = _classifier(vocabulary_file)
    classifier.compile()
    texts, labels = _toy_sentiment(4)
    dataset = tf.data.Dataset.from_tensor_slices((texts, labels)).batch(2)
    with pytest.raises(ValueError, match="validation_split with a tf.data.Dataset, which cannot"):
        classifier.fit(dataset, validation_split=0.5, verbose=0)
    with pytest.raises(ValueError, match="validation_data of texts without labels"):
        classifier.fit(texts, labels, validation_data=(texts,), verbose=0)
    assert int(classifier.optimizer.iterations.numpy()) == 0


@pytest.mark.one_backend  # how the arrays are split is backend-free
def test_span_labels_split_for_validation_as_pairs_and_as_dicts(vocabulary_file):
    reader = BertQuestionAnswerer(_backbone(), preprocessor=_preprocessor(vocabulary_file))
    reader.compile()
    pairs = (["good word1", "good", "bad", "word2"], ["word2 bad word3", "bad", "good", "bad"])
    starts, ends = np.array([1, 2, 1, 2]), np.array([6, 3, 3, 3])
    for labels in ((starts, ends), {"start_logits": starts, "end_logits": ends}):
        history = reader.fit(pairs, labels, validation_split=0.5, batch_size=2, verbose=0).history
        expected = reader.evaluate(
            (pairs[0][2:], pairs[1][2:]), (starts[2:], ends[2:]), verbose=0, return_dict=True
        )
        assert history["val_end_logits_loss"][0] == pytest.approx(expected["end_logits_loss"])


@pytest.mark.parametrize(
    "task_class", [BertClassifier, BertMultipleChoice, BertQuestionAnswerer, BertMaskedLM]
)
def test_from_preset_names_the_way_to_build_a_task_on_a_backbone_preset(task_class):
    """A backbone preset is a size with fresh weights and no vocabulary, not a checkpoint."""
    with pytest.raises(
        ValueError,
        match=rf"'bert_tiny' is a BertBackbone preset .* {task_class.__name__}\(BertBackbone"
        r"\.from_preset\('bert_tiny'\), \.\.\.\)",
    ):
        task_class.from_preset("bert_tiny")


@pytest.mark.one_backend
def test_from_preset_takes_the_dtype_and_refuses_a_length_of_zero(vocabulary_file, tmp_path):
    directory = str(tmp_path / "backbone")
    _backbone().save_to_preset(directory, vocabulary_file=vocabulary_file)
    mixed = BertClassifier.from_preset(directory, num_classes=2, dtype="mixed_bfloat16")
    assert mixed.dtype_policy.name == mixed.backbone.dtype_policy.name == "mixed_bfloat16"
    assert mixed.predict(["good"], verbose=0).dtype == np.float32  # float32 logits
    with pytest.raises(ValueError, match="sequence_length must leave room for"):
        BertClassifier.from_preset(directory, num_classes=2, sequence_length=0)


def test_text_pairs_are_refused_by_a_backbone_of_one_segment(vocabulary_file):
    classifier = _classifier(vocabulary_file, num_segments=1)  # jax would gather NaN for id 1
    classifier.compile()
    assert classifier.predict(["good word1", "bad"], verbose=0).shape == (2, 2)
    pairs = (["good word1"], ["bad"])
    calls = (
        lambda: classifier.predict(pairs, verbose=0),
        lambda: classifier.evaluate(pairs, [1], verbose=0),
        lambda: classifier.fit(pairs, [1], verbose=0),
    )
    for call in calls:
        with pytest.raises(ValueError, match=r"segment_ids'\] holds the id 1 .*\(num_segments 1\)"):
            call()
    labelled = tf.data.Dataset.from_tensor_slices((pairs, [1])).batch(1)
    calls = (
        lambda: classifier.predict(tf.data.Dataset.from_tensor_slices(pairs).batch(1), verbose=0),
        lambda: classifier.evaluate(labelled, verbose=0),
        lambda: classifier.fit(labelled, verbose=0),
    )
    for call in calls:
        with pytest.raises(
            ValueError, match="got pairs of texts, but its backbone has one segment"
        ):
            call()
    assert classifier.optimizer.iterations.numpy() == 0
    # Refused before Keras' loop, where jax would have lost the variables' values.
    assert classifier.predict(["good word1", "bad"], verbose=0).shape == (2, 2)


def test_a_preprocessor_that_cuts_no_text_is_refused(vocabulary_file):
    with pytest.raises(ValueError, match=r"packs texts of any length \(sequence_length None\)"):
        BertClassifier(
            _backbone(), num_classes=2, preprocessor=_preprocessor(vocabulary_file, None)
        )


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="XLA's widths: jax compiles each")
def test_a_failed_predict_keeps_no_width_as_compiled(vocabulary_file, monkeypatch):
    classifier = _classifier(vocabulary_file)
    with monkeypatch.context() as patched:
        patched.setattr(keras.Model, "predict_on_batch", mock.Mock(side_effect=KeyboardInterrupt))
        with pytest.raises(KeyboardInterrupt):
            classifier.predict(MIXED_LENGTHS, batch_size=2, verbose=0)
    assert classifier.compiled_widths("predict") == {}
    classifier.predict(MIXED_LENGTHS, batch_size=2, verbose=0)
    assert classifier.compiled_widths("predict")


def test_from_preset_loads_backbone_head_and_preprocessor(vocabulary_file, tmp_path, caplog):
    backbone = _backbone()
    directory = str(tmp_path / "backbone")
    backbone.save_to_preset(directory, vocabulary_file=vocabulary_file)
    classifier = BertClassifier.from_preset(directory, num_classes=2, sequence_length=10)
    assert classifier.preprocessor.sequence_length == 10
    assert classifier.preprocessor.tokenizer.get_vocabulary() == VOCABULARY
    for original, loaded in zip(backbone.weights, classifier.backbone.weights):
        np.testing.assert_array_equal(np.asarray(original), np.asarray(loaded))
    texts, _ = _toy_sentiment(3)
    # Raw-text batches are padded to their longest text; the answers are full padding's.
    by_length = BertClassifier.from_preset(directory, num_classes=2, sequence_length=32)
    assert by_length.preprocessor.padding == "longest"
    assert by_length.preprocessor(texts)["token_ids"].shape == (3, 16)  # 5 tokens, rounded up
    full_padding = BertPreprocessor(by_length.preprocessor.tokenizer, sequence_length=32)
    np.testing.assert_allclose(
        by_length.predict(texts, verbose=0),
        by_length.predict({k: v.numpy() for k, v in full_padding(texts).items()}, verbose=0),
        atol=1e-5,
    )
    assert (
        BertClassifier.from_preset(directory, num_classes=2, preprocessor=None).preprocessor is None
    )
    without_vocabulary = str(tmp_path / "no_vocabulary")
    backbone.save_to_preset(without_vocabulary)
    with caplog.at_level(logging.WARNING):
        assert BertClassifier.from_preset(without_vocabulary, num_classes=2).preprocessor is None
    assert (
        f"{without_vocabulary} has no vocabulary (vocab.txt or tokenizer.json): BertClassifier takes token ids"
        in caplog.text
    )

    # A checkpoint with a two-label classifier head (BertForSequenceClassification).
    checkpoint = read_checkpoint(directory)
    head = {"kernel": np.full((16, 2), 0.5, "float32"), "bias": np.array([1.0, -1.0], "float32")}
    checkpoint.head_weights["classifier"] = head
    checkpoint.task_config = {"max_seq_length": 24}  # as a fine-tuning run records it
    headed = str(tmp_path / "headed")
    write_checkpoint(checkpoint, headed)
    # The original's default of 128, cut to the backbone's positions.
    assert backbone.max_sequence_length == 32
    assert BertClassifier.from_preset(directory, num_classes=2).preprocessor.sequence_length == 32
    fine_tuned = BertClassifier.from_preset(headed, num_classes=2)
    assert fine_tuned.preprocessor.sequence_length == 24  # the length its export serves
    logits = fine_tuned.get_layer("logits")
    np.testing.assert_array_equal(np.asarray(logits.kernel), head["kernel"])
    np.testing.assert_array_equal(np.asarray(logits.bias), head["bias"])
    fresh = BertClassifier.from_preset(headed, num_classes=3).get_layer("logits")
    assert not np.any(np.asarray(fresh.bias))  # no head of that shape: freshly initialised
    # Without num_classes, the checkpoint's head gives it; without a head, it must be given.
    inferred = BertClassifier.from_preset(headed, preprocessor=None)
    assert inferred.num_classes == 2
    np.testing.assert_array_equal(np.asarray(inferred.get_layer("logits").bias), head["bias"])
    with pytest.raises(ValueError, match="has no classifier head to take the number of classes"):
        BertClassifier.from_preset(directory)


WITH_MASKED_POSITIONS = dict(TINY_INPUTS, masked_positions=np.array([[1, 2]] * 4, "int32"))


# The classifier's and the masked LM's quantize the kinds of layer every head has; the
# other tasks' run once, under the torch suite.
_QUANTIZED_ONCE = pytest.mark.one_backend


@pytest.mark.parametrize(
    "build, inputs, head_paths",
    [
        pytest.param(
            lambda backbone: BertClassifier(backbone, 3), TINY_INPUTS, ["logits"], id="classifier"
        ),
        pytest.param(
            lambda backbone: BertTokenClassifier(backbone, 3),
            TINY_INPUTS,
            ["logits"],
            id="token_classifier",
            marks=_QUANTIZED_ONCE,
        ),
        pytest.param(
            BertQuestionAnswerer,
            TINY_INPUTS,
            ["span_logits"],
            id="question_answerer",
            marks=_QUANTIZED_ONCE,
        ),
        pytest.param(
            lambda backbone: BertMultipleChoice(backbone, 2),
            {name: value[None, :2].repeat(2, 0) for name, value in TINY_INPUTS.items()},
            ["choice_score"],
            id="multiple_choice",
            marks=_QUANTIZED_ONCE,
        ),
        pytest.param(
            BertSentenceEncoder, TINY_INPUTS, [], id="sentence_encoder", marks=_QUANTIZED_ONCE
        ),
        pytest.param(
            BertMaskedLM,
            WITH_MASKED_POSITIONS,
            ["masked_lm_head/transform_dense"],
            id="masked_lm",
        ),
        pytest.param(
            BertPretrainer,
            WITH_MASKED_POSITIONS,
            ["masked_lm_head/transform_dense", "next_sentence_head"],
            id="pretrainer",
            marks=_QUANTIZED_ONCE,
        ),
    ],
)
def test_a_quantized_task_model_saves_and_reloads_exactly(build, inputs, head_paths):
    model = build(tiny_backbone())
    float_config = model.get_config()
    assert "dtype" not in float_config  # float models' configs stay as they were
    model.quantize("int8")
    paths = _quantized_policies(model)
    # The backbone's 11 Dense and Embedding layers and the head's Dense layers.
    assert len(paths) == 11 + len(head_paths) and set(head_paths) <= set(paths)
    assert set(paths.values()) == {"int8_from_float32"}
    restored = TestCase().run_saving_test(model, inputs)
    assert _quantized_policies(restored) == paths
    assert restored.get_config() == model.get_config()


def _quantized_policies(model):
    """Path -> policy name of every quantized layer of `model`."""
    policies = {}
    for layer in model._flatten_layers():
        if layer.quantization_mode is not None:
            policy = layer.dtype_policy
            if isinstance(policy, keras.dtype_policies.DTypePolicyMap):
                policy = policy[layer.path]
            policies[layer.path] = policy.name
    return policies


def test_fit_or_evaluate_without_a_loss_is_refused_on_every_backend(vocabulary_file):
    """Keras trains and evaluates jax on a loss of 0 where a model has none; the others refuse."""
    classifier = _classifier(vocabulary_file)
    texts, labels = _toy_sentiment(4)
    for method in ("fit", "evaluate"):
        with pytest.raises(
            ValueError, match=rf"BertClassifier is not compiled: .* before {method}"
        ):
            getattr(classifier, method)(texts, labels, verbose=0)
    classifier.compile(loss=None, metrics=["accuracy"])
    with pytest.raises(ValueError, match=r"BertClassifier has no loss to train on: .*loss='auto'"):
        classifier.fit(texts, labels, epochs=1, verbose=0)
    with pytest.raises(ValueError, match=r"BertClassifier has no loss to evaluate: .*loss='auto'"):
        classifier.evaluate(texts, labels, verbose=0)
    classifier.compile()
    history = classifier.fit(texts, labels, epochs=1, verbose=0)
    assert history.history["loss"][0] > 0


@pytest.mark.one_backend  # checked before any layer is built
@pytest.mark.parametrize("argument", ["activaton", "load_weights"])
def test_an_argument_a_task_model_does_not_take_is_named_not_dropped(argument):
    with pytest.raises(
        TypeError, match=rf"BertClassifier got unexpected keyword arguments \['{argument}'\]"
    ):
        BertClassifier(_backbone(), num_classes=2, **{argument: "softmax"})


@pytest.mark.one_backend  # checked before any layer is built
@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: BertClassifier(_backbone(), num_classes=0), "num_classes must be a positive"),
        (
            lambda: BertTokenClassifier(_backbone(), num_classes=-1),
            "num_classes must be a positive",
        ),
        (lambda: BertMultipleChoice(_backbone(), num_choices=0), "num_choices must be a positive"),
        (lambda: BertClassifier(_backbone(), num_classes=2.0), "num_classes must be a positive"),
    ],
)
def test_a_head_of_no_outputs_is_refused_naming_its_argument(build, message):
    with pytest.raises(ValueError, match=message):
        build()


@pytest.mark.one_backend  # checked before Keras' loop
def test_a_reader_refuses_questions_without_their_contexts(vocabulary_file):
    reader = BertQuestionAnswerer(_backbone(), preprocessor=_preprocessor(vocabulary_file))
    reader.compile()
    message = (
        r"x is a list of texts; BertQuestionAnswerer takes text as a tuple \(questions, contexts"
    )
    with pytest.raises(ValueError, match=message):
        reader.predict(["good word1", "bad"], verbose=0)
    with pytest.raises(ValueError, match=message):
        reader.fit(["good word1", "bad"], ([1, 1], [2, 1]), verbose=0)


@pytest.mark.one_backend  # settled before Keras' loop
def test_labels_in_a_tuple_are_one_outputs_and_string_labels_in_a_dataset_are_named(
    vocabulary_file,
):
    classifier = _classifier(vocabulary_file)
    classifier.compile()
    texts, labels = zip(*zip(*_toy_sentiment(4)))  # as `texts, labels = zip(*rows)` gives them
    assert isinstance(labels, tuple)
    assert classifier.evaluate(list(texts), labels, verbose=0)[0] == pytest.approx(
        classifier.evaluate(list(texts), list(labels), verbose=0)[0], rel=1e-6
    )
    names = ["pos"] * len(texts)
    named = tf.data.Dataset.from_tensor_slices(((list(texts), list(texts)), names)).batch(2)
    as_pairs = tf.data.Dataset.from_tensor_slices((list(texts), names)).batch(2)
    for method in (classifier.fit, classifier.evaluate):
        with pytest.raises(ValueError, match=r"x's labels are strings \(tf.string\); labels are"):
            method(named, verbose=0)
        with pytest.raises(
            ValueError, match=r"got a tf.data.Dataset of texts without labels .*pair"
        ):
            method(as_pairs, verbose=0)
    assert classifier.optimizer.iterations.numpy() == 0


def test_class_ids_off_the_classes_in_a_dataset_are_named_as_they_pass(vocabulary_file):
    """Keras' jax step trains on them silently; the tensorflow and torch steps fail unclearly."""
    texts, _ = _toy_sentiment(4)
    dataset = tf.data.Dataset.from_tensor_slices((texts, [0, 2, 1, 0])).batch(2)
    for method in ("evaluate", "fit"):
        classifier = _classifier(vocabulary_file)
        classifier.compile()
        with pytest.raises(
            tf.errors.InvalidArgumentError,
            match=r"the labels in x hold one outside the class ids 0 to 1 \(2 classes\), the",
        ):
            getattr(classifier, method)(dataset, verbose=0)


def test_class_ids_off_the_classes_in_a_dataset_of_token_ids_are_named_as_they_pass(
    vocabulary_file,
):
    """As for texts (above): in `fit`'s data and validation data and in `evaluate`'s."""
    classifier = _classifier(vocabulary_file)
    classifier.compile()
    features = classifier.preprocessor(tf.constant(_toy_sentiment(4)[0]))
    features = {name: tensor.numpy() for name, tensor in features.items()}
    good = tf.data.Dataset.from_tensor_slices((features, [0, 1, 1, 0])).batch(2)
    bad = tf.data.Dataset.from_tensor_slices((features, [0, 1, 5, 0])).batch(2)
    calls = [
        lambda: classifier.evaluate(bad, verbose=0),
        lambda: classifier.fit(bad, verbose=0),
        lambda: classifier.fit(good, validation_data=bad, verbose=0),
    ]
    for call in calls:
        with pytest.raises(
            tf.errors.InvalidArgumentError,
            match=r"the labels in x hold one outside the class ids 0 to 1 \(2 classes\), the "
            r"first:\] \[5\]",
        ):
            call()
    assert classifier.evaluate(good, verbose=0)[0] > 0


class _InterruptAtSecondBatch(keras.callbacks.Callback):
    def on_predict_batch_begin(self, batch, logs=None):
        if batch == 1:
            raise KeyboardInterrupt


def test_a_loop_that_fails_leaves_the_model_its_weights(vocabulary_file):
    """Keras' jax loops take the variables' values while they run; a failed one kept them."""
    classifier = _classifier(vocabulary_file)
    classifier.compile()
    features = classifier.preprocessor(tf.constant(_toy_sentiment(4)[0]))
    features = {name: tensor.numpy() for name, tensor in features.items()}

    def dataset(labels):
        return tf.data.Dataset.from_tensor_slices((features, labels)).batch(2)

    def weights():
        return [np.array(variable) for variable in classifier.weights]

    before, predictions = weights(), classifier.predict(features, batch_size=2, verbose=0)
    failing = [
        (tf.errors.InvalidArgumentError, classifier.evaluate, dataset([5, 1, 1, 0])),
        (tf.errors.InvalidArgumentError, classifier.evaluate, dataset([0, 1, 5, 0])),
        (tf.errors.InvalidArgumentError, classifier.fit, dataset([5, 1, 1, 0])),
    ]
    for error, method, data in failing:
        with pytest.raises(error):
            method(data, verbose=0)
    with pytest.raises(KeyboardInterrupt):
        classifier.predict(features, batch_size=2, verbose=0, callbacks=[_InterruptAtSecondBatch()])
    for weight, old in zip(weights(), before):
        # TensorFlow's graph applies the step's weight decay, which reads no batch, before the
        # batch fails: a relative change of the learning rate times the decay, below 1e-6.
        np.testing.assert_allclose(weight, old, rtol=1e-6)
    np.testing.assert_allclose(
        classifier.predict(features, batch_size=2, verbose=0), predictions, rtol=1e-5, atol=1e-6
    )
    with pytest.raises(tf.errors.InvalidArgumentError):  # after one step, which is kept
        classifier.fit(dataset([0, 1, 5, 0]), verbose=0)
    trained = weights()
    assert not all(np.array_equal(weight, old) for weight, old in zip(trained, before))
    assert all(np.isfinite(weight).all() for weight in trained)
    assert classifier.fit(dataset([0, 1, 1, 0]), verbose=0).history["loss"][0] > 0
