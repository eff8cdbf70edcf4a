"""SavedModels that stock TF Serving loads as they are: raw text in, answers out.

The export is one plain TensorFlow graph whatever backend trained the model:
weights are arrays, so the model is rebuilt on Keras' TensorFlow backend and
traced there (no `XlaCallModule`, no Python calls). Tokenisation, packing and
truncation run in the graph, through `BertTokenizer`'s tensorflow-text ops,
which stock TF Serving links; each batch is padded only to its longest text.
The tokens are constants of the graph and `assets/vocab.txt` holds them for
clients that tokenise themselves, so the directory is relocatable. It is
written as `EXPORT_BASE/<version>/`, the numbered layout TF Serving watches,
atomically.

Signatures, by what the checkpoint holds:

- a classifier (a "classifier" head, or a `BertClassifier` .keras file):
  `serving_default` takes `text` (and `text_pair` for a classifier of
  sentence pairs), strings `[batch]`, and gives `logits` and
  `probabilities` float32 `[batch, num_classes]`, `label_id` int64
  `[batch]` and `label` string `[batch]` (the checkpoint's label names, or
  the ids as text); `classify` (method `tensorflow/serving/classify`) takes
  serialized `tf.Example`s with a bytes feature "text" (and "text_pair") and
  gives `classes` string and `scores` float32 `[batch, num_classes]`;
- a backbone or pretrainer: `serving_default` takes `text` and gives
  `pooled_output` float32 `[batch, hidden]`, `sequence_output` float32
  `[batch, length, hidden]` and `padding_mask` int32 `[batch, length]`;
- every model: `serve_ids` takes `token_ids`, `segment_ids` and
  `padding_mask` int32 `[batch, length]` and gives the model's raw outputs.
"""

import dataclasses
import json
import os
import re
import subprocess
import sys

import keras
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import classification_pb2
from tensorflow_serving.apis import input_pb2
from tensorflow_serving.apis import model_pb2
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_log_pb2

from bert_keras.atomic_files import atomic_directory
from bert_keras.checkpoints import Checkpoint
from bert_keras.checkpoints import read_checkpoint
from bert_keras.checkpoints import read_tokenizer_settings
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_classifier import BertClassifier
from bert_keras.models.bert_task import checkpoint_tokenizer
from bert_keras.models.checkpoint_weights import apply_checkpoint
from bert_keras.text.preprocessor import BertPreprocessor

CLASSIFY_METHOD = "tensorflow/serving/classify"
# TF Serving replays these requests when it loads a version, before the first real one.
WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
WARMUP_TEXT = "A warmup request, answered before the first one."
VOCABULARY_ASSET = "vocab.txt"
_SERVED_HEADS = ("classifier",)
_BACKBONE_HEADS = {"masked_lm", "next_sentence"}


@dataclasses.dataclass
class ServedModel:
    """A Keras model and what its signatures need around it.

    Attributes:
        model: a `BertBackbone` or `BertClassifier`, on the TensorFlow backend.
        preprocessor: the `BertPreprocessor` of its raw-text signatures.
        label_names: the classifier's output names, in order, or None.
        text_pair: the classifier was fine-tuned on sentence pairs.
    """

    model: keras.Model
    preprocessor: BertPreprocessor
    label_names: list = None
    text_pair: bool = False


def export_saved_model(
    model, export_base, version=None, sequence_length=None, text_pair=None, overwrite=False
):
    """Writes the SavedModel of a checkpoint directory or .keras file to `export_base/<version>`.

    Args:
        model: a checkpoint directory (what `tasks.classify` and
            `tasks.pretrain` write to OUTPUT_DIR/export, a Hugging Face or
            original release) or a `.keras` file of a `BertClassifier` with
            a preprocessor, or of a `BertBackbone` beside a vocab.txt.
        export_base: the model's directory in the server's model base path.
        version: a positive integer; the next free one when None.
        sequence_length: the longest packed text; longer texts are
            truncated. The preprocessor's (.keras) or the backbone's
            `max_sequence_length` when None.
        text_pair: a classifier's raw-text signatures take `text_pair` too;
            None follows the checkpoint (`Checkpoint.task_config`, which
            `tasks.classify` writes).
        overwrite: replace an existing version directory.

    Returns:
        The version directory written.

    Under another Keras backend, the export runs in a child process on the
    TensorFlow backend; it gives the same graph.

    Raises:
        ValueError: a model this exporter cannot serve, a bad version or
            sequence length.
        FileExistsError: the version exists and not `overwrite`.

    Example:
    >>> import os, tempfile
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> checkpoint = tempfile.mkdtemp() + "/tiny"
    >>> vocab = tempfile.mkdtemp() + "/vocab.txt"
    >>> _ = open(vocab, "w").write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"]))
    >>> BertBackbone(6, 1, 2, 8, 16).save_to_preset(checkpoint, vocabulary_file=vocab)
    >>> base = tempfile.mkdtemp() + "/tiny_bert"
    >>> os.path.basename(export_saved_model(checkpoint, base))
    '1'
    >>> served = tf.saved_model.load(os.path.join(base, "1"))
    >>> served.signatures["serving_default"](text=tf.constant(["hi hi"]))["padding_mask"].numpy()
    array([[1, 1, 1, 1]], dtype=int32)
    """
    arguments = dict(
        model=os.fspath(model),
        export_base=os.fspath(export_base),
        version=version,
        sequence_length=sequence_length,
        text_pair=text_pair,
        overwrite=overwrite,
    )
    if keras.backend.backend() != "tensorflow":
        return _export_in_tensorflow_process(arguments)
    served = load_served_model(model, sequence_length)
    text_pair = served.text_pair if text_pair is None else text_pair
    if text_pair and served.label_names is None:
        raise ValueError("text_pair applies to classifiers only.")
    version = next_version(export_base) if version is None else _checked_version(version)
    directory = os.path.join(os.fspath(export_base), str(version))
    with atomic_directory(directory, overwrite) as staging:
        archive, signatures = _export_archive(served, text_pair)
        archive.write_out(staging, verbose=False)
        if "classify" in signatures:
            _set_method_name(staging, "classify", CLASSIFY_METHOD)
        _write_vocabulary(served.preprocessor.tokenizer, os.path.join(staging, "assets"))
        _write_warmup_requests(
            os.path.join(staging, WARMUP_FILE),
            os.path.basename(os.path.normpath(os.fspath(export_base))),
            served.preprocessor,
            signatures,
        )
    return directory


def _export_in_tensorflow_process(arguments):
    """Runs `export_saved_model(**arguments)` in a Python process on Keras' TensorFlow backend.

    Its clear errors (ValueError, FileExistsError, FileNotFoundError) are
    raised here again with their messages.
    """
    errors = {error.__name__: error for error in (ValueError, FileExistsError, FileNotFoundError)}
    program = (
        "import json, sys\n"
        "from bert_keras.export.saved_model import export_saved_model\n"
        "try:\n"
        f"    print(export_saved_model(**{arguments!r}))\n"
        f"except ({', '.join(errors)}) as error:\n"
        "    print(json.dumps([type(error).__name__, str(error)]), file=sys.stderr)\n"
        "    sys.exit(3)\n"
    )
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    environment = {
        **os.environ,
        "KERAS_BACKEND": "tensorflow",
        "PYTHONPATH": os.pathsep.join([package_parent, os.environ.get("PYTHONPATH", "")]),
    }
    completed = subprocess.run(
        [sys.executable, "-c", program], env=environment, capture_output=True, text=True
    )
    if completed.returncode == 3:
        name, message = json.loads(completed.stderr.strip().splitlines()[-1])
        raise errors[name](message)
    if completed.returncode != 0:
        raise RuntimeError(f"The TensorFlow export process failed:\n{completed.stderr[-3000:]}")
    return completed.stdout.strip().splitlines()[-1]


def load_served_model(path, sequence_length=None):
    """The `ServedModel` of a checkpoint directory or a .keras file.

    Raises:
        ValueError: a model this exporter cannot serve (named with its
            heads), no vocabulary, or a bad sequence length.

    Example:
    >>> import tempfile
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> checkpoint = tempfile.mkdtemp() + "/tiny"
    >>> vocab = tempfile.mkdtemp() + "/vocab.txt"
    >>> _ = open(vocab, "w").write("\\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]))
    >>> BertBackbone(5, 1, 2, 8, 16).save_to_preset(checkpoint, vocabulary_file=vocab)
    >>> served = load_served_model(checkpoint, sequence_length=32)
    >>> type(served.model).__name__, served.preprocessor.sequence_length, served.label_names
    ('BertBackbone', 32, None)
    """
    path = os.fspath(path)
    task_config = {}
    if path.endswith(".keras"):
        model, tokenizer, default_length = _load_keras_file(path)
        label_names = None
    else:
        checkpoint = read_checkpoint(path)
        model, tokenizer = _checkpoint_model(checkpoint), checkpoint_tokenizer(checkpoint)
        label_names, task_config = checkpoint.label_names, checkpoint.task_config
        default_length = None
    if isinstance(model, BertClassifier) and label_names is None:
        label_names = [str(index) for index in range(model.num_classes)]
    backbone = getattr(model, "backbone", model)
    sequence_length = sequence_length or default_length or backbone.max_sequence_length
    if not 3 <= sequence_length <= backbone.max_sequence_length:
        raise ValueError(
            f"sequence_length is {sequence_length} but must be between 3 and the backbone's "
            f"max_sequence_length, {backbone.max_sequence_length}."
        )
    preprocessor = BertPreprocessor(tokenizer, sequence_length=sequence_length, padding="longest")
    return ServedModel(model, preprocessor, label_names, bool(task_config.get("text_pair")))


def next_version(export_base):
    """One past the highest numbered version directory in `export_base`, or 1.

    Example:
    >>> import os, tempfile
    >>> base = tempfile.mkdtemp()
    >>> os.makedirs(os.path.join(base, "7")); os.makedirs(os.path.join(base, ".8.partial-x"))
    >>> next_version(base)
    8
    """
    export_base = os.fspath(export_base)
    if not os.path.isdir(export_base):
        return 1
    versions = [int(name) for name in os.listdir(export_base) if re.fullmatch(r"\d+", name)]
    return max(versions, default=0) + 1


def _checked_version(version):
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"version must be a positive integer, got {version!r}.")
    return version


def _checkpoint_model(checkpoint):
    heads = set(checkpoint.head_weights)
    backbone = BertBackbone.from_config({**checkpoint.backbone_config, "dtype": "float32"})
    if heads <= _BACKBONE_HEADS:
        model = backbone
        apply_checkpoint(model, checkpoint)
    elif heads == {"classifier"}:
        model = BertClassifier(backbone, num_classes=checkpoint.num_labels())
        apply_checkpoint(model, checkpoint, heads={"classifier": "logits"})
    else:
        raise ValueError(
            f"{checkpoint.directory} holds a model with the heads {sorted(heads)}; the exporter serves "
            "classifiers (a classifier head) and backbones (no head, or the pretraining heads)."
        )
    return model


def _load_keras_file(path):
    model = keras.saving.load_model(path, safe_mode=True)
    if isinstance(model, BertClassifier) and model.preprocessor is not None:
        preprocessor = model.preprocessor
        return model, preprocessor.tokenizer, preprocessor.sequence_length
    if isinstance(model, BertBackbone):
        directory = os.path.dirname(path)
        return model, checkpoint_tokenizer(_tokenizer_files(directory)), None
    raise ValueError(
        f"{path} holds a {type(model).__name__}"
        + (" without a preprocessor" if isinstance(model, BertClassifier) else "")
        + "; the exporter serves a BertClassifier with its preprocessor, or a BertBackbone "
        "beside a vocab.txt."
    )


def _tokenizer_files(directory):
    """A `Checkpoint` holding only the tokenizer files of `directory`."""
    vocabulary = os.path.join(directory, VOCABULARY_ASSET)
    return Checkpoint(
        backbone_config={},
        backbone_weights={},
        vocabulary_file=vocabulary if os.path.isfile(vocabulary) else None,
        tokenizer_settings=read_tokenizer_settings(directory),
        directory=directory,
    )


def _export_archive(served, text_pair):
    """A `keras.export.ExportArchive` of the model, its vocabulary and its signatures.

    The archive tracks the variables the signatures read (a plain
    `tf.Module` holding Keras variables loads in TF2 but not through the v1
    session API that TF Serving uses).
    """
    archive = keras.export.ExportArchive()
    archive.track(served.model)
    if served.label_names is not None:
        signatures = _classifier_signatures(served, text_pair)
    else:
        signatures = _backbone_signatures(served)
    for name, function in signatures.items():
        archive.add_endpoint(name, function)
    return archive, signatures


def _write_vocabulary(tokenizer, assets):
    """assets/vocab.txt, for clients that tokenise themselves (`serve_ids`).

    The graph holds the tokens as constants and needs no file.
    """
    os.makedirs(assets, exist_ok=True)
    with open(os.path.join(assets, VOCABULARY_ASSET), "w", encoding="utf-8") as file:
        file.write("\n".join(tokenizer.get_vocabulary()) + "\n")


def _write_warmup_requests(path, model_name, preprocessor, signatures):
    """One real request per signature, as the `PredictionLog` records TF Serving replays."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for name, function in signatures.items():
            inputs = _warmup_inputs(preprocessor, function)
            writer.write(_prediction_log(model_name, name, inputs).SerializeToString())


def _warmup_inputs(preprocessor, function):
    """A one-example batch for each input of a signature function."""
    texts = [tf.constant([WARMUP_TEXT])] * 2
    features = preprocessor((texts[0], texts[1]))
    values = {
        "text": texts[0],
        "text_pair": texts[1],
        "inputs": tf.constant([_warmup_example().SerializeToString()]),
        **features,
    }
    return {spec.name: values[spec.name] for spec in function.input_signature}


def _warmup_example():
    """A tf.Example with the text features every classify signature reads."""
    text = tf.train.Feature(bytes_list=tf.train.BytesList(value=[WARMUP_TEXT.encode()]))
    return tf.train.Example(features=tf.train.Features(feature={"text": text, "text_pair": text}))


def _prediction_log(model_name, signature, inputs):
    """A `PredictionLog` holding a PredictRequest, or a ClassificationRequest for classify."""
    model_spec = model_pb2.ModelSpec(name=model_name, signature_name=signature)
    if signature == "classify":
        examples = [tf.train.Example.FromString(value) for value in inputs["inputs"].numpy()]
        request = classification_pb2.ClassificationRequest(
            model_spec=model_spec,
            input=input_pb2.Input(example_list=input_pb2.ExampleList(examples=examples)),
        )
        return prediction_log_pb2.PredictionLog(
            classify_log=prediction_log_pb2.ClassifyLog(request=request)
        )
    request = predict_pb2.PredictRequest(model_spec=model_spec)
    for name, value in inputs.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value.numpy()))
    return prediction_log_pb2.PredictionLog(
        predict_log=prediction_log_pb2.PredictLog(request=request)
    )


def _text_specs(text_pair):
    names = ("text", "text_pair") if text_pair else ("text",)
    return [tf.TensorSpec([None], tf.string, name=name) for name in names]


def _id_specs():
    return [
        tf.TensorSpec([None, None], tf.int32, name=name)
        for name in ("token_ids", "segment_ids", "padding_mask")
    ]


def _features(token_ids, segment_ids, padding_mask):
    return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}


def _packed(preprocessor, texts):
    return preprocessor(texts[0] if len(texts) == 1 else tuple(texts))


def _classifier_signatures(served, text_pair):
    model, preprocessor = served.model, served.preprocessor
    label_names = tf.constant(served.label_names)

    def logits_of(features):
        return model(features, training=False)  # [batch, num_classes]

    def answers(logits):
        label_id = tf.argmax(logits, axis=-1)
        return {
            "logits": logits,
            "probabilities": tf.nn.softmax(logits),
            "label_id": label_id,
            "label": tf.gather(label_names, label_id),
        }

    @tf.function(input_signature=_text_specs(text_pair), autograph=False)
    def serve_text(*texts):
        return answers(logits_of(_packed(preprocessor, texts)))

    @tf.function(input_signature=_id_specs(), autograph=False)
    def serve_ids(token_ids, segment_ids, padding_mask):
        return {"logits": logits_of(_features(token_ids, segment_ids, padding_mask))}

    feature_names = ("text", "text_pair") if text_pair else ("text",)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def classify(inputs):
        examples = tf.io.parse_example(
            inputs, {name: tf.io.FixedLenFeature([], tf.string) for name in feature_names}
        )
        texts = [examples[name] for name in feature_names]
        scores = tf.nn.softmax(logits_of(_packed(preprocessor, texts)))
        classes = tf.tile(label_names[tf.newaxis], [tf.shape(scores)[0], 1])
        return {"classes": classes, "scores": scores}

    return {"serving_default": serve_text, "serve_ids": serve_ids, "classify": classify}


def _backbone_signatures(served):
    model, preprocessor = served.model, served.preprocessor

    def outputs_of(features):
        outputs = model(features, training=False)
        return {name: outputs[name] for name in ("pooled_output", "sequence_output")}

    @tf.function(input_signature=_text_specs(text_pair=False), autograph=False)
    def serve_text(text):
        features = preprocessor(text)
        return {**outputs_of(features), "padding_mask": features["padding_mask"]}

    @tf.function(input_signature=_id_specs(), autograph=False)
    def serve_ids(token_ids, segment_ids, padding_mask):
        return outputs_of(_features(token_ids, segment_ids, padding_mask))

    return {"serving_default": serve_text, "serve_ids": serve_ids}


def _set_method_name(directory, signature, method_name):
    """Sets a signature's method name in saved_model.pb (TF2 saving writes "predict" for all)."""
    path = os.path.join(directory, "saved_model.pb")
    saved_model = saved_model_pb2.SavedModel()
    with open(path, "rb") as file:
        saved_model.ParseFromString(file.read())
    for meta_graph in saved_model.meta_graphs:
        meta_graph.signature_def[signature].method_name = method_name
    with open(path, "wb") as file:
        file.write(saved_model.SerializeToString())
