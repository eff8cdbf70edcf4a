"""Exports answer as the Keras model does, in a process that has only TensorFlow, as a server would."""

import os
import shutil
import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import prediction_log_pb2

from bert_keras.checkpoints import tokenizer_settings
from bert_keras.checkpoints import write_checkpoint
from bert_keras.export import saved_model
from bert_keras.export.saved_model import export_saved_model
from bert_keras.export.saved_model import next_version
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_classifier import BertClassifier
from bert_keras.models.checkpoint_weights import model_checkpoint
from bert_keras.text.preprocessor import BertPreprocessor
from bert_keras.text.tokenizer import BertTokenizer
from tests.export import CONFIG
from tests.export import serve
from tests.export import transported
from tests.export import write_vocabulary
from tests.export.servable import TENSORFLOW_2_17_OPS
from tests.export.servable import inputs_without_a_shape_check
from tests.export.servable import unservable_ops
from tests.text import TF_TEXT_2_12_OPS

LABELS = ["negative", "neutral", "positive"]
SEQUENCE_LENGTH = 12
TEXTS = [
    b"the film was good",
    b"",
    b"a dull , dull plot . " * 6,  # longer than SEQUENCE_LENGTH: truncated
    b"great films \xff\xfe!",  # invalid UTF-8
    b"caf\xc3",  # cut inside a character
]
# More texts than one forward pass of the raw-text signatures runs, in mixed lengths.
MANY_TEXTS = [text for index in range(4) for text in TEXTS[index:] + TEXTS[:index]]


@pytest.fixture(scope="module")
def vocabulary_file(tmp_path_factory):
    return write_vocabulary(tmp_path_factory.mktemp("vocabulary"))


@pytest.fixture(scope="module")
def classifier(tmp_path_factory, vocabulary_file):
    """A classifier trained one step on this backend, and its checkpoint directory."""
    model = BertClassifier(BertBackbone(**CONFIG), num_classes=len(LABELS))
    model.compile(learning_rate=1e-2, num_train_steps=1)
    features = _packed(vocabulary_file, TEXTS)
    model.fit(features, np.array([2, 1, 0, 2, 1]), batch_size=5, epochs=1, verbose=0)
    directory = tmp_path_factory.mktemp("classifier") / "export"
    checkpoint = model_checkpoint(
        model,
        heads={"classifier": "logits"},
        vocabulary_file=vocabulary_file,
        tokenizer_settings=tokenizer_settings(),
        label_names=LABELS,
    )
    write_checkpoint(checkpoint, directory)
    return model, str(directory)


@pytest.fixture(scope="module")
def classifier_export(classifier, tmp_path_factory):
    """`classifier`'s checkpoint exported once, for the tests that only read the export."""
    return export_saved_model(
        classifier[1], tmp_path_factory.mktemp("sst2"), sequence_length=SEQUENCE_LENGTH
    )


def _packed(vocabulary_file, texts, padding="max_length"):
    tokenizer = BertTokenizer(vocabulary_file)
    preprocessor = BertPreprocessor(tokenizer, SEQUENCE_LENGTH, padding=padding)
    return {name: value.numpy() for name, value in preprocessor(texts).items()}


def _examples(texts):
    """Serialized tf.Examples with the bytes feature "text", as `_transported` strings."""
    return transported(
        tf.train.Example(
            features=tf.train.Features(
                feature={"text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[text]))}
            )
        ).SerializeToString()
        for text in texts
    )


def _saved_model(directory):
    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(directory, "saved_model.pb"), "rb") as file:
        saved_model.ParseFromString(file.read())
    return saved_model


@pytest.mark.every_backend
def test_a_classifier_export_answers_as_the_keras_model_does(classifier, vocabulary_file, tmp_path):
    model, checkpoint = classifier
    exported = export_saved_model(checkpoint, tmp_path / "base", sequence_length=SEQUENCE_LENGTH)
    assert exported == str(tmp_path / "base" / "1")
    # The directory is relocatable, and names no path of the machine that wrote it.
    moved = shutil.move(str(tmp_path / "base"), str(tmp_path / "elsewhere"))
    served_directory = os.path.join(moved, "1")
    graph_bytes = open(os.path.join(served_directory, "saved_model.pb"), "rb").read()
    assert str(tmp_path).encode() not in graph_bytes and checkpoint.encode() not in graph_bytes
    assert os.listdir(os.path.join(served_directory, "assets")) == ["vocab.txt"]

    features = _packed(vocabulary_file, MANY_TEXTS)
    logits = model.predict(features, verbose=0)
    probabilities = tf.nn.softmax(logits).numpy()
    requests = {
        "serving_default": {"text": transported(MANY_TEXTS)},
        "serve_ids": {name: value.tolist() for name, value in features.items()},
        "classify": {"inputs": _examples(MANY_TEXTS)},
    }
    answers = serve(served_directory, requests)
    assert answers["methods"]["classify"] == "tensorflow/serving/classify"
    for path in ("eager", "session"):
        served = answers[path]
        text = served["serving_default"]
        np.testing.assert_allclose(text["logits"], logits, atol=1e-5, err_msg=path)
        np.testing.assert_allclose(text["probabilities"], probabilities, atol=1e-5, err_msg=path)
        assert text["label_id"] == np.argmax(logits, axis=-1).tolist()
        assert text["label"] == [LABELS[index] for index in np.argmax(logits, axis=-1)]
        np.testing.assert_allclose(served["serve_ids"]["logits"], logits, atol=1e-5, err_msg=path)
        assert served["classify"]["classes"] == [LABELS] * len(MANY_TEXTS)
        np.testing.assert_allclose(served["classify"]["scores"], probabilities, atol=1e-5)


def test_each_weight_is_saved_once(classifier, classifier_export):
    reader = tf.train.load_checkpoint(os.path.join(classifier_export, "variables", "variables"))
    shapes = reader.get_variable_to_shape_map()
    del shapes["_CHECKPOINTABLE_OBJECT_GRAPH"]
    assert sum(int(np.prod(shape)) for shape in shapes.values()) == classifier[0].count_params()


def test_an_empty_batch_gets_empty_answers(classifier_export):
    empty = serve(classifier_export, {"serving_default": {"text": []}})
    for path in ("eager", "session"):  # JSON drops the shapes
        assert empty[path]["serving_default"]["probabilities"] == []
        assert empty[path]["serving_default"]["label"] == []


def test_raw_text_is_padded_to_the_longest_text_of_the_batch(vocabulary_file, tmp_path):
    directory = tmp_path / "backbone"
    backbone = BertBackbone(**CONFIG)
    backbone.save_to_preset(directory, vocabulary_file=vocabulary_file)
    exported = export_saved_model(directory, tmp_path / "base", sequence_length=SEQUENCE_LENGTH)
    texts = ["the film", "a good plot"]
    served = serve(exported, {"serving_default": {"text": texts}})["eager"]["serving_default"]
    features = _packed(vocabulary_file, texts, padding="longest")
    assert served["padding_mask"] == features["padding_mask"].tolist()
    assert np.shape(served["sequence_output"]) == (2, 5, CONFIG["hidden_dim"])
    expected = backbone.predict(features, verbose=0)
    for name in ("pooled_output", "sequence_output"):
        np.testing.assert_allclose(served[name], expected[name], atol=1e-5, err_msg=name)


def test_a_classifier_of_pairs_takes_text_pair_as_its_checkpoint_records(
    classifier, vocabulary_file, tmp_path
):
    model, _ = classifier
    checkpoint = model_checkpoint(
        model,
        heads={"classifier": "logits"},
        vocabulary_file=vocabulary_file,
        label_names=LABELS,
        task_config={"text_pair": True},
    )
    write_checkpoint(checkpoint, tmp_path / "pairs")
    exported = export_saved_model(tmp_path / "pairs", tmp_path / "base", sequence_length=12)
    firsts, seconds = TEXTS[:3], TEXTS[2:]
    tokenizer = BertTokenizer(vocabulary_file)
    features = BertPreprocessor(tokenizer, SEQUENCE_LENGTH)((firsts, seconds))
    logits = model.predict({name: value.numpy() for name, value in features.items()}, verbose=0)
    request = {"text": transported(firsts), "text_pair": transported(seconds)}
    answers = serve(exported, {"serving_default": request})
    for path in ("eager", "session"):
        np.testing.assert_allclose(answers[path]["serving_default"]["logits"], logits, atol=1e-5)
    signature = tf.saved_model.load(exported).signatures["serving_default"]
    with pytest.raises(tf.errors.InvalidArgumentError, match="text and text_pair must hold as"):
        signature(text=tf.constant(firsts), text_pair=tf.constant(seconds[:2]))


def _replayed_request(log):
    """The `serve_export` request of a warmup `PredictionLog`."""
    if log.HasField("classify_log") or log.HasField("regress_log"):
        request = getattr(log, log.WhichOneof("log_type")).request
        examples = [example.SerializeToString() for example in request.input.example_list.examples]
        return request.model_spec.signature_name, {"inputs": transported(examples)}
    request = log.predict_log.request
    inputs = {}
    for name, proto in request.inputs.items():
        value = tf.make_ndarray(proto)
        inputs[name] = transported(value.tolist()) if value.dtype == object else value.tolist()
    return request.model_spec.signature_name, inputs


def test_a_one_output_classifier_exports_as_a_regression(vocabulary_file, tmp_path):
    model = BertClassifier(BertBackbone(**CONFIG), num_classes=1)  # STS-B's head, say
    checkpoint = model_checkpoint(
        model,
        heads={"classifier": "logits"},
        vocabulary_file=vocabulary_file,
        tokenizer_settings=tokenizer_settings(),
    )
    write_checkpoint(checkpoint, tmp_path / "stsb")
    exported = export_saved_model(tmp_path / "stsb", tmp_path / "base", sequence_length=12)
    values = model.predict(_packed(vocabulary_file, TEXTS), verbose=0)[:, 0]
    warmup = tf.data.TFRecordDataset(
        os.path.join(exported, "assets.extra", "tf_serving_warmup_requests")
    )
    logs = [prediction_log_pb2.PredictionLog.FromString(record.numpy()) for record in warmup]
    requests = dict(_replayed_request(log) for log in logs)
    assert sorted(requests) == ["regress", "serve_ids", "serving_default"]
    requests["serving_default"] = {"text": transported(TEXTS)}
    requests["regress"] = {"inputs": _examples(TEXTS)}
    answers = serve(exported, requests)
    assert answers["methods"]["regress"] == "tensorflow/serving/regress"
    for path in ("eager", "session"):
        served = answers[path]
        assert sorted(served["serving_default"]) == ["logits", "score"]
        np.testing.assert_allclose(served["serving_default"]["score"], values, atol=1e-5)
        np.testing.assert_allclose(served["regress"]["outputs"], values, atol=1e-5)


def test_a_keras_file_classifier_answers_the_label_names_given(vocabulary_file, tmp_path, caplog):
    preprocessor = BertPreprocessor(BertTokenizer(vocabulary_file), SEQUENCE_LENGTH)
    model = BertClassifier(BertBackbone(**CONFIG), num_classes=3, preprocessor=preprocessor)
    model.save(tmp_path / "sentiment.keras")
    for names, held in ((["a", "b"], "2 names"), (["a"], "1 name")):
        with pytest.raises(ValueError, match=f"label_names holds {held} but .* has 3 classes"):
            export_saved_model(tmp_path / "sentiment.keras", tmp_path / "base", label_names=names)
    named = export_saved_model(tmp_path / "sentiment.keras", tmp_path / "base", label_names=LABELS)
    serve = tf.saved_model.load(named).signatures["serving_default"]
    assert serve(text=tf.constant(["good"]))["label"].numpy()[0].decode() in LABELS
    with caplog.at_level("WARNING"):
        numbered = export_saved_model(tmp_path / "sentiment.keras", tmp_path / "base")
    assert "records no class names: its classifier answers class numbers (0, 1, 2)" in caplog.text
    serve = tf.saved_model.load(numbered).signatures["serving_default"]
    assert serve(text=tf.constant(["good"]))["label"].numpy()[0].decode() in ("0", "1", "2")


def test_warmup_records_are_one_real_request_per_signature(classifier_export):
    exported = classifier_export
    path = os.path.join(exported, "assets.extra", "tf_serving_warmup_requests")
    logs = [
        prediction_log_pb2.PredictionLog.FromString(record.numpy())
        for record in tf.data.TFRecordDataset(path)
    ]
    requests = dict(_replayed_request(log) for log in logs)
    assert len(logs) == len(requests) == 3
    signatures = _saved_model(exported).meta_graphs[0].signature_def
    assert sorted(requests) == sorted(set(signatures) - {"__saved_model_init_op"})
    assert {log.WhichOneof("log_type") for log in logs} == {"predict_log", "classify_log"}
    answers = serve(exported, requests)  # replayed through both loaders
    for path_name in ("eager", "session"):
        assert len(answers[path_name]["serving_default"]["label"]) == 1
        assert np.shape(answers[path_name]["serve_ids"]["logits"]) == (1, len(LABELS))
        assert np.shape(answers[path_name]["classify"]["scores"]) == (1, len(LABELS))


def test_every_op_is_core_tensorflow_or_tensorflow_text_2_12(classifier_export):
    assert not unservable_ops(classifier_export)


def test_every_input_is_checked_in_the_graph_as_tf_serving_checks_none(classifier_export):
    assert inputs_without_a_shape_check(classifier_export) == set()


def test_versions_and_bad_models_are_refused_with_nothing_written(classifier, tmp_path):
    base = tmp_path / "base"
    export_saved_model(classifier[1], base, sequence_length=SEQUENCE_LENGTH)
    assert next_version(base) == 2
    with pytest.raises(FileExistsError, match="1 exists and is not empty"):
        export_saved_model(classifier[1], base, version=1)
    export_saved_model(classifier[1], base, version=1, overwrite=True)
    other = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    other.save(tmp_path / "other.keras")
    with pytest.raises(ValueError, match="cannot serve a Sequential"):
        export_saved_model(tmp_path / "other.keras", base)
    headless = BertClassifier(BertBackbone(**CONFIG), num_classes=2)
    headless.save(tmp_path / "headless.keras")
    with pytest.raises(ValueError, match="without a preprocessor, and no vocab.txt is beside it"):
        export_saved_model(tmp_path / "headless.keras", base)
    (tmp_path / "broken.keras").write_text("")
    with pytest.raises(ValueError, match=r"broken.keras is not a \.keras \(zip\) file"):
        export_saved_model(tmp_path / "broken.keras", base)
    with zipfile.ZipFile(tmp_path / "configless.keras", "w") as archive:
        archive.writestr("metadata.json", "{}")
    with pytest.raises(ValueError, match="configless.keras holds no config.json"):
        export_saved_model(tmp_path / "configless.keras", base)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="No checkpoint recognised"):
        export_saved_model(tmp_path / "empty", base)
    with pytest.raises(ValueError, match="sequence_length is 64 but must be between 3 and"):
        export_saved_model(classifier[1], base, sequence_length=64)
    with pytest.raises(ValueError, match="sequence_length is 0 but must be between 3 and"):
        export_saved_model(classifier[1], base, sequence_length=0)  # not the default
    assert sorted(os.listdir(base)) == ["1"]
    (tmp_path / "a_file").write_text("")
    with pytest.raises(ValueError, match="a_file is a file; it is the directory that holds"):
        export_saved_model(classifier[1], tmp_path / "a_file")
    with pytest.raises(ValueError, match="sub lies below .*a_file, which is a file; it is the"):
        export_saved_model(classifier[1], tmp_path / "a_file" / "sub")
    with pytest.raises(ValueError, match="export_base is empty"):  # an unset $VARIABLE, say
        export_saved_model(classifier[1], "")
    for inside, where in (("1", "is"), ("1/assets", "lies in .*1,")):  # a version, not its base
        with pytest.raises(ValueError, match=f"{where} a SavedModel version .*: .*{base}, say"):
            export_saved_model(classifier[1], base / inside)
    (tmp_path / "run" / "export").mkdir(parents=True)  # a training program's OUTPUT_DIR
    shutil.copytree(classifier[1], tmp_path / "run" / "export", dirs_exist_ok=True)
    with pytest.raises(ValueError, match=r"keeps its checkpoint in export/: give .*run/export\.$"):
        export_saved_model(tmp_path / "run", base)
    for inside in ("", "served"):  # the next run into the checkpoint would delete its versions
        with pytest.raises(ValueError, match="is inside the model directory .* export elsewhere"):
            export_saved_model(classifier[1], os.path.join(classifier[1], inside))
    with pytest.raises(TypeError, match=r"sequence_length is '64' \(str\); expected int"):
        export_saved_model(classifier[1], base, sequence_length="64")
    with pytest.raises(TypeError, match=r"text_pair is 'no' \(str\); expected bool"):
        export_saved_model(classifier[1], base, text_pair="no")
    larger = tmp_path / "larger_vocabulary"  # the checkpoint with one token too many
    shutil.copytree(classifier[1], larger)
    with open(larger / "vocab.txt", "a") as file:
        file.write("".join(f"extra{index}\n" for index in range(CONFIG["vocabulary_size"])))
    with pytest.raises(ValueError, match="vocab.txt holds .* tokens but the checkpoint has"):
        export_saved_model(larger, base)
    assert sorted(os.listdir(base)) == ["1"]


def test_a_version_moved_aside_by_a_killed_overwrite_is_restored_before_the_next(
    classifier, tmp_path
):
    base = tmp_path / "base"
    export_saved_model(classifier[1], base)
    os.rename(base / "1", base / ".1.partial-k2x9-old")  # killed between the two renames

    assert export_saved_model(classifier[1], base) == os.path.join(base, "2")
    assert sorted(os.listdir(base)) == ["1", "2"]


def test_exports_to_one_base_started_together_each_write_a_version(
    classifier, tmp_path, monkeypatch
):
    base = tmp_path / "base"
    trace = saved_model._export_archive

    def traced_while_another_export_runs(served):
        monkeypatch.setattr(saved_model, "_export_archive", trace)
        other = export_saved_model(classifier[1], base, sequence_length=SEQUENCE_LENGTH)
        (tmp_path / "other").write_text(other)
        return trace(served)

    monkeypatch.setattr(saved_model, "_export_archive", traced_while_another_export_runs)
    this = export_saved_model(classifier[1], base, sequence_length=SEQUENCE_LENGTH)
    assert (tmp_path / "other").read_text() == str(base / "1") and this == str(base / "2")
    assert sorted(os.listdir(base)) == ["1", "2"]
    assert all("saved_model.pb" in os.listdir(base / version) for version in ("1", "2"))


def test_the_committed_op_list_is_tensorflow_2_17_core():
    assert {"MatMul", "StringSplitV2", "RegexReplace", "While", "TensorListStack"} <= (
        TENSORFLOW_2_17_OPS
    )
    assert not TENSORFLOW_2_17_OPS & TF_TEXT_2_12_OPS  # no tensorflow-text op
    assert "TFText>RoundRobinTrim" not in TENSORFLOW_2_17_OPS
