"""SavedModels that stock TF Serving loads as they are: raw text in, answers out.

The export is one plain TensorFlow graph whatever backend trained the model:
weights are arrays, so the model is rebuilt on Keras' TensorFlow backend and
traced there (no `XlaCallModule`, no Python calls). Tokenisation, packing and
truncation run in the graph, through `BertTokenizer`'s tensorflow-text ops,
which stock TF Serving links; each batch is padded only to its longest text.
The tokens are constants of the graph and `assets/vocab.txt` holds them for
clients that tokenise themselves, so the directory is relocatable. It is
written as `EXPORT_BASE/<version>/`, the numbered layout TF Serving watches,
atomically; exports to one base started together take turns (see
`versions_lock`), each writing a version of its own.

Signatures, by the task the checkpoint holds (see `bert_keras.export.signatures`,
`bert_keras.export.tagging` and `bert_keras.export.question_answering` for
names, dtypes and shapes):

- a classifier (a "classifier" head): `serving_default` (`text`, and
  `text_pair` for sentence pairs -> `label`, `label_id`, `probabilities`,
  `logits`) and `classify` (method `tensorflow/serving/classify`,
  serialized `tf.Example`s in);
- a tagger ("token_classifier" head): `serving_default` (`text` -> per word
  `words`, `tags`, byte `start`/`end`, `mask`);
- a question answerer ("question_answering" head): `serving_default`
  (`question`, `context` -> `answer`, `score`, byte `start`/`end`);
- a regression (a "classifier" head of one output, `tasks.classify`'s
  STS-B): `serving_default` (`text`, and `text_pair` for pairs -> `score`,
  `logits`) and `regress` (method `tensorflow/serving/regress`,
  serialized `tf.Example`s in -> `outputs`);
- a multiple-choice model (a one-output "classifier" head whose task says
  "multiple_choice"): `serving_default` (`context`, `choices` ->
  `choice`, `probabilities`, `logits`);
- a backbone or pretrainer: `serving_default` (`text` -> `pooled_output`,
  `sequence_output`, `padding_mask`);
- every model: `serve_ids` (`token_ids`, `segment_ids`, `padding_mask` ->
  the model's raw outputs).

A `Bert4Rec` (the `model.keras` that `tasks.recommend` writes, with its
`item_ids.json` beside it) gets `serving_default` (raw item-id histories ->
the top-k next `items` and `scores`) and `serve_ids` (model ids); see
`bert_keras.export.recommendation`.
"""

import contextlib
import dataclasses
import fcntl
import json
import os
import re
import subprocess
import sys
import zipfile

import keras
import tensorflow as tf
from absl import logging
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import classification_pb2
from tensorflow_serving.apis import input_pb2
from tensorflow_serving.apis import model_pb2
from tensorflow_serving.apis import predict_pb2
from tensorflow_serving.apis import prediction_log_pb2
from tensorflow_serving.apis import regression_pb2

from bert_keras.atomic_files import atomic_directory
from bert_keras.atomic_files import file_in_the_way
from bert_keras.atomic_files import recover_interrupted_writes
from bert_keras.checkpoints import Checkpoint
from bert_keras.checkpoints import read_checkpoint
from bert_keras.checkpoints import read_tokenizer_settings
from bert_keras.data.interactions import load_item_ids
from bert_keras.export import signatures as signatures_lib
from bert_keras.export.question_answering import question_answering_signatures
from bert_keras.export.recommendation import recommender_signatures
from bert_keras.export.tagging import tagger_signatures
from bert_keras.models.bert4rec import Bert4Rec
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_classifier import BertClassifier
from bert_keras.models.bert_multiple_choice import BertMultipleChoice
from bert_keras.models.bert_question_answerer import BertQuestionAnswerer
from bert_keras.models.bert_task import checkpoint_tokenizer
from bert_keras.models.bert_token_classifier import BertTokenClassifier
from bert_keras.models.checkpoint_weights import apply_checkpoint
from bert_keras.text.preprocessor import BertPreprocessor

SAVED_MODEL_FILE = "saved_model.pb"
# TF Serving replays these requests when it loads a version, before the first real one.
WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
WARMUP_TEXT = "A warmup request, answered before the first one."
VOCABULARY_ASSET = "vocab.txt"
# What tasks.recommend writes to its output directory.
RECOMMENDER_MODEL_FILE = "model.keras"
RECOMMENDER_ITEM_IDS_FILE = "item_ids.json"
_BACKBONE_HEADS = {"masked_lm", "next_sentence"}
# tasks.squad's default, for a question answerer whose checkpoint does not say.
DEFAULT_MAX_QUERY_LENGTH = 64
# Signatures of TF Serving's classify and regress APIs (the others are "predict").
_METHOD_NAMES = {
    "classify": signatures_lib.CLASSIFY_METHOD,
    "regress": signatures_lib.REGRESS_METHOD,
}
# What export_saved_model takes for a Bert4Rec; the others apply to text models.
_RECOMMENDER_ARGUMENTS = ("model", "export_base", "version", "overwrite", "top_k")
_TEXT_PAIR_TASKS = ("classifier", "regression")
# tasks.squad's flags that shape a question answerer's answers; its export takes them too.
QUESTION_ANSWERING_SETTINGS = ("doc_stride", "max_query_length", "n_best_size", "max_answer_length")
TASKS = ("classifier", "regression", "multiple_choice", "tagger", "question_answering", "backbone")


@dataclasses.dataclass
class ServedModel:
    """A Keras model and what its signatures need around it.

    Attributes:
        model: the task model or `BertBackbone`, on the TensorFlow backend.
        preprocessor: the `BertPreprocessor` of its raw-text signatures.
        task: one of `TASKS`.
        label_names: the output names of a classifier or tagger, in order.
        task_config: the checkpoint's `task_config` (what the fine-tuning
            program recorded of its inputs: "text_pair", "doc_stride", ...).
    """

    model: keras.Model
    preprocessor: BertPreprocessor
    task: str
    label_names: list = None
    task_config: dict = dataclasses.field(default_factory=dict)


def export_saved_model(
    model,
    export_base,
    version=None,
    sequence_length=None,
    text_pair=None,
    overwrite=False,
    top_k=None,
    null_score_diff_threshold=None,
    label_names=None,
    **question_answering,
):
    """Writes the SavedModel of a checkpoint directory or .keras file to `export_base/<version>`.

    Args:
        model: a checkpoint directory (what `tasks.classify` and
            `tasks.pretrain` write to OUTPUT_DIR/export, a Hugging Face or
            original release) or a `.keras` file of a `BertClassifier` with
            a preprocessor, or of a `BertBackbone` beside a vocab.txt; or
            the OUTPUT_DIR of `tasks.recommend` (or its model.keras).
        export_base: the model's directory in the server's model base path.
        version: a positive integer; the next free one when None.
        sequence_length: the longest packed text; longer texts are
            truncated. The preprocessor's (.keras) or the backbone's
            `max_sequence_length` when None.
        text_pair: a classifier's raw-text signatures take `text_pair` too;
            None follows the checkpoint (`Checkpoint.task_config`, which
            `tasks.classify` writes).
        overwrite: replace an existing version directory.
        top_k: items a recommender returns per history (default 10, or
            its number of items if fewer).
        null_score_diff_threshold: for a question answerer fine-tuned with
            `version_2_with_negative`, how much the null score must beat
            the best span by for no answer (`tasks.squad`'s flag; 0.0 when
            None).
        label_names: a classifier's or tagger's class names, in order, for
            its `label`/`tags` outputs; by default the checkpoint's. A
            .keras file records none: without them it answers class numbers
            ("0", "1", ...), with a warning.
        **question_answering: for a question answerer, any of
            `QUESTION_ANSWERING_SETTINGS` (`tasks.squad`'s flags of the same
            names: doc_stride, max_query_length, n_best_size,
            max_answer_length); by default what the checkpoint recorded
            (`tasks.squad` records doc_stride and max_query_length), else
            `tasks.squad`'s defaults. A .keras file records none.

    Returns:
        The version directory written.

    Under another Keras backend, the export runs in a child process on the
    TensorFlow backend; it gives the same graph.

    Raises:
        ValueError: a model this exporter cannot serve, a bad version or
            sequence length, an `export_base` that is a file or lies below
            one.
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
        top_k=top_k,
        null_score_diff_threshold=null_score_diff_threshold,
        label_names=_label_name_list(label_names),
        **_question_answering_settings(question_answering),
    )
    if not arguments["export_base"]:
        raise ValueError("export_base is empty; name the directory of the model's versions.")
    _check_argument_types(arguments)
    if version is not None:
        _checked_version(version)
    _check_export_base(arguments["export_base"])
    _refuse_exporting_into_the_model(arguments["model"], arguments["export_base"])
    if keras.backend.backend() != "tensorflow":
        return _export_in_tensorflow_process(arguments)
    recommender_file = _recommender_file(os.fspath(model))
    if recommender_file is not None:
        text_only = [
            name
            for name, value in arguments.items()
            if name not in _RECOMMENDER_ARGUMENTS and value is not None
        ]
        if text_only:
            raise ValueError(_applying_only(text_only, "text models", "Bert4Rec"))
        return _export_recommender(recommender_file, export_base, version, overwrite, top_k)
    if top_k is not None:
        raise ValueError("top_k applies to recommenders (Bert4Rec) only.")
    served = load_served_model(model, sequence_length, question_answering)
    served.label_names = _served_label_names(served, label_names, os.fspath(model))
    if text_pair and served.task not in _TEXT_PAIR_TASKS:
        raise ValueError(f"text_pair applies to classifiers only, not to a {served.task}.")
    if text_pair is not None and served.task in _TEXT_PAIR_TASKS:
        served.task_config["text_pair"] = text_pair
    if null_score_diff_threshold is not None:
        if not served.task_config.get("version_2_with_negative"):
            raise ValueError(
                "null_score_diff_threshold applies to question answerers fine-tuned for SQuAD "
                f"2.0 (--version_2_with_negative), not to {model}."
            )
        served.task_config["null_score_diff_threshold"] = null_score_diff_threshold
    archive, signatures = _export_archive(served)

    def write(staging):
        archive.write_out(staging, verbose=False)
        for name, method_name in _METHOD_NAMES.items():
            if name in signatures:
                _set_method_name(staging, name, method_name)
        _write_vocabulary(served.preprocessor.tokenizer, os.path.join(staging, "assets"))
        requests = {
            name: _warmup_inputs(served.preprocessor, function)
            for name, function in signatures.items()
        }
        _write_warmup_requests(staging, export_base, requests)

    return _write_version(export_base, version, overwrite, write)


def _write_version(export_base, version, overwrite, write):
    """Calls `write(staging)` and moves the staging directory to `export_base/<version>`.

    The version is picked (the next free one when None) and written while
    this process holds `versions_lock(export_base)`, so exports to the same
    base started together get versions of their own, one after the other.

    Returns:
        The version directory written.
    """
    with versions_lock(export_base):
        recover_interrupted_writes(export_base)  # a version moved aside counts again
        version = next_version(export_base) if version is None else _checked_version(version)
        directory = os.path.join(os.fspath(export_base), str(version))
        with atomic_directory(directory, overwrite) as staging:
            write(staging)
    return directory


@contextlib.contextmanager
def versions_lock(export_base):
    """Holds an exclusive `flock` on the directory `export_base` (made if missing) while the block runs.

    Another process that asks for it waits until this one is done. The
    operating system releases it when its holder exits in any way, and it
    leaves no file among the versions that TF Serving watches.

    Example:
    >>> import os, tempfile
    >>> base = os.path.join(tempfile.mkdtemp(), "sst2")
    >>> with versions_lock(base):
    ...     os.listdir(base)
    []
    """
    os.makedirs(export_base, exist_ok=True)
    descriptor = os.open(export_base, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def _check_export_base(export_base):
    """Raises ValueError naming the file at or above `export_base`, or the SavedModel it is in."""
    blocking = file_in_the_way(export_base)
    if blocking is not None:
        where = "" if blocking == os.path.abspath(export_base) else f" lies below {blocking}, which"
        raise ValueError(
            f"export_base {export_base}{where} is a file; it is the directory that holds the "
            "model's numbered versions."
        )
    version = _saved_model_holding(export_base)
    if version is not None:
        where = "is" if version == os.path.abspath(export_base) else f"lies in {version},"
        raise ValueError(
            f"export_base {export_base} {where} a SavedModel version (it holds "
            f"{SAVED_MODEL_FILE}); export_base is the directory above the numbered versions "
            f"(TF Serving's --model_base_path): {os.path.dirname(version)}, say."
        )


def _saved_model_holding(path):
    """The directory at or above `path` that holds a saved_model.pb, or None."""
    path = os.path.abspath(path)
    while True:
        if os.path.isfile(os.path.join(path, SAVED_MODEL_FILE)):
            return path
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def _refuse_exporting_into_the_model(model, export_base):
    """Refuses an `export_base` in the `model` checkpoint directory, which its writer replaces whole.

    A fine-tuning run into the same output directory, or a conversion,
    would delete the versions a server is watching. A recommender run's
    directory is not replaced whole, and may hold its exports.
    """
    model, export_base = os.path.realpath(model), os.path.realpath(export_base)
    is_checkpoint = os.path.isdir(model) and not os.path.exists(
        os.path.join(model, RECOMMENDER_MODEL_FILE)
    )
    if is_checkpoint and os.path.commonpath([model, export_base]) == model:
        raise ValueError(
            f"export_base {export_base} is inside the model directory {model}, which the next "
            "run or conversion that writes it replaces whole, versions included: export "
            "elsewhere."
        )


def _question_answering_settings(settings):
    """`settings` (keyword arguments of `export_saved_model`), refusing unknown names and values < 1."""
    unknown = sorted(set(settings) - set(QUESTION_ANSWERING_SETTINGS))
    if unknown:
        raise TypeError(f"export_saved_model got unexpected keyword arguments {unknown}.")
    for name, value in settings.items():
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            raise ValueError(f"{name} is {value} but must be at least 1.")
    return {name: settings.get(name) for name in QUESTION_ANSWERING_SETTINGS}


def _label_name_list(label_names):
    """`label_names` as a list (None stays None); a TypeError unless it holds only strings."""
    if label_names is None:
        return None
    if isinstance(label_names, str) or not all(isinstance(name, str) for name in label_names):
        raise TypeError(f"label_names is {label_names!r}; expected a list of strings.")
    return list(label_names)


def _served_label_names(served, label_names, path):
    """`label_names` checked against the model's classes, else `served.label_names`.

    Warns where a .keras file's classifier or tagger, which records no
    names, would answer class numbers.
    """
    if label_names is None:
        if path.endswith(".keras") and served.task in ("classifier", "tagger"):
            logging.warning(
                "%s records no class names: its %s answers class numbers (%s); pass label_names "
                "(--label_names) to name them.",
                path,
                served.task,
                ", ".join(served.label_names[:3] + ["..."] * (len(served.label_names) > 3)),
            )
        return served.label_names
    if served.task not in ("classifier", "tagger"):
        raise ValueError(f"label_names applies to classifiers and taggers, not to a {served.task}.")
    if not all(label_names):
        raise ValueError(f"label_names must be non-empty strings, got {label_names!r}.")
    if len(label_names) != served.model.num_classes:
        names = "1 name" if len(label_names) == 1 else f"{len(label_names)} names"
        raise ValueError(
            f"label_names holds {names} but {path} has {served.model.num_classes} classes."
        )
    return list(label_names)


def _recommender_file(path):
    """The .keras file of a `Bert4Rec` at `path` (the file or a run's directory), or None."""
    if os.path.isdir(path):
        path = os.path.join(path, RECOMMENDER_MODEL_FILE)
    if not (path.endswith(".keras") and os.path.isfile(path)):
        return None
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path} is not a .keras (zip) file; it cannot be read.")
    with zipfile.ZipFile(path) as archive:
        if "config.json" not in archive.namelist():
            raise ValueError(f"{path} holds no config.json: it is not a .keras file Keras saved.")
        config = json.loads(archive.read("config.json"))
    return path if config.get("class_name") == Bert4Rec.__name__ else None


def _export_recommender(path, export_base, version, overwrite, top_k):
    """Writes the SavedModel of a `Bert4Rec` .keras file and the item ids beside it."""
    model = keras.saving.load_model(path, safe_mode=True)
    if not isinstance(model, Bert4Rec):
        raise ValueError(f"{path} holds a {type(model).__name__}, not a Bert4Rec.")
    item_ids_file = os.path.join(os.path.dirname(path), RECOMMENDER_ITEM_IDS_FILE)
    if not os.path.isfile(item_ids_file):
        raise ValueError(
            f"{path} has no {RECOMMENDER_ITEM_IDS_FILE} beside it: the export needs the raw "
            "item ids (tasks.recommend writes them to its output directory)."
        )
    item_ids = load_item_ids(item_ids_file, model_file=path)
    signatures = recommender_signatures(model, item_ids, top_k=top_k)
    archive = _archive(signatures)
    archive.track(signatures["serving_default"].item_table)

    def write(staging):
        archive.write_out(staging, verbose=False)
        requests = {
            "serving_default": {"items": tf.constant([[item_ids[0]]])},
            "serve_ids": {"item_ids": tf.constant([[1]], tf.int32)},
        }
        _write_warmup_requests(staging, export_base, requests)

    return _write_version(export_base, version, overwrite, write)


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


def _check_argument_types(arguments):
    """Raises TypeError naming an argument of the wrong type (a str "64", a "no" for False)."""
    kinds = {
        "version": int,
        "sequence_length": int,
        "top_k": int,
        "text_pair": bool,
        "overwrite": bool,
        "null_score_diff_threshold": float,
        **dict.fromkeys(QUESTION_ANSWERING_SETTINGS, int),
    }
    for name, kind in kinds.items():
        value = arguments[name]
        accepted = (int, float) if kind is float else kind  # 0 for 0.0
        if value is not None and (
            not isinstance(value, accepted) or _is_bool_for_number(value, kind)
        ):
            raise TypeError(
                f"{name} is {value!r} ({type(value).__name__}); expected {kind.__name__}."
            )


def _is_bool_for_number(value, kind):
    return isinstance(value, bool) and kind is not bool


def load_served_model(path, sequence_length=None, question_answering=None):
    """The `ServedModel` of a checkpoint directory or a .keras file.

    `question_answering` (a dict of `QUESTION_ANSWERING_SETTINGS`; None
    values are left out) overrides what the checkpoint's `task_config`
    recorded of them; it applies to question answerers only.

    Raises:
        ValueError: a model this exporter cannot serve (named with its
            heads), no vocabulary, one larger than the word embeddings, or a
            bad sequence length.

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
    if path.endswith(".keras"):
        model, tokenizer, default_length = _load_keras_file(path)
        label_names, task_config = None, {}
    else:
        checkpoint = read_checkpoint(path)
        model, tokenizer = _checkpoint_model(checkpoint), checkpoint_tokenizer(checkpoint)
        label_names, task_config = checkpoint.label_names, checkpoint.task_config
        default_length = task_config.get("max_seq_length")
    task = _task_of(model)
    if task == "classifier" and model.num_classes == 1:
        task, label_names = "regression", None  # its one logit is the predicted value
    if task in ("classifier", "tagger") and label_names is None:
        label_names = [str(index) for index in range(model.num_classes)]
    backbone = getattr(model, "backbone", model)
    if tokenizer.vocabulary_size() > backbone.vocabulary_size:
        raise ValueError(
            f"{path}'s vocabulary holds {tokenizer.vocabulary_size()} tokens but its backbone has "
            f"{backbone.vocabulary_size} word embeddings: the tokens past them would have none."
        )
    if sequence_length is None:
        sequence_length = default_length or backbone.max_sequence_length
    if not 3 <= sequence_length <= backbone.max_sequence_length:
        raise ValueError(
            f"sequence_length is {sequence_length} but must be between 3 and the backbone's "
            f"max_sequence_length, {backbone.max_sequence_length}."
        )
    settings = {k: v for k, v in (question_answering or {}).items() if v is not None}
    if settings and task != "question_answering":
        raise ValueError(_applying_only(list(settings), "question answerers only", f"a {task}"))
    if task == "question_answering":
        _check_question_room(sequence_length, task_config, settings)
    task_config = {**task_config, **settings}
    preprocessor = BertPreprocessor(tokenizer, sequence_length=sequence_length, padding="longest")
    return ServedModel(model, preprocessor, task, label_names, task_config)


def _applying_only(names, models, model):
    """The message for arguments `names` that apply to `models`, given for `model`.

    Example:
    >>> _applying_only(["top_k"], "recommenders", "a classifier")
    'top_k applies to recommenders, not to a classifier.'
    """
    verb = "applies" if len(names) == 1 else "apply"
    return f"{', '.join(names)} {verb} to {models}, not to {model}."


def _check_question_room(sequence_length, task_config, given):
    """Raises ValueError when a question of max_query_length tokens leaves no room for context.

    The length is `given`'s (the caller's settings), else the checkpoint's `task_config`'s.
    """
    if "max_query_length" in given:
        max_query_length, origin = given["max_query_length"], "as given"
    elif "max_query_length" in task_config:
        max_query_length, origin = task_config["max_query_length"], "recorded by the checkpoint"
    else:
        max_query_length = DEFAULT_MAX_QUERY_LENGTH
        origin = "tasks.squad's default; the model records none"
    if sequence_length - max_query_length - 3 >= 1:
        return
    raise ValueError(
        f"sequence_length {sequence_length} leaves no room for context after a question of "
        f"max_query_length {max_query_length} tokens ({origin}), [CLS] and two [SEP]: pass a "
        "smaller max_query_length (--max_query_length), as the model was fine-tuned with, or a "
        "larger sequence_length."
    )


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
    """The model of a checkpoint's heads (and, for multiple choice, its task_config)."""
    heads = set(checkpoint.head_weights)
    backbone = BertBackbone.from_config({**checkpoint.backbone_config, "dtype": "float32"})
    if heads <= _BACKBONE_HEADS:
        apply_checkpoint(backbone, checkpoint)
        return backbone
    if len(heads) != 1:
        raise ValueError(_unservable(checkpoint.directory, f"the heads {sorted(heads)}"))
    (head,) = heads
    task_config = checkpoint.task_config
    if head == "classifier" and task_config.get("task") == "multiple_choice":
        model = BertMultipleChoice(backbone, num_choices=task_config["num_choices"])
    elif head == "classifier":
        model = BertClassifier(backbone, num_classes=checkpoint.num_labels())
    elif head == "token_classifier":
        model = BertTokenClassifier(backbone, num_classes=checkpoint.num_labels())
    elif head == "question_answering":
        model = BertQuestionAnswerer(backbone)
    else:
        raise ValueError(_unservable(checkpoint.directory, f"the head {head!r}"))
    apply_checkpoint(model, checkpoint, heads={head: model.output_layer_name})
    return model


def _unservable(where, what):
    return (
        f"{where} holds a model with {what}; the exporter serves one of the heads "
        "classifier, token_classifier or question_answering, or a backbone (no head, or the "
        "pretraining heads)."
    )


def _task_of(model):
    for task, model_class in (
        ("multiple_choice", BertMultipleChoice),
        ("classifier", BertClassifier),
        ("tagger", BertTokenClassifier),
        ("question_answering", BertQuestionAnswerer),
        ("backbone", BertBackbone),
    ):
        if isinstance(model, model_class):
            return task
    raise ValueError(f"The exporter cannot serve a {type(model).__name__}.")


def _load_keras_file(path):
    """The model of a .keras file, its tokenizer and its preprocessor's sequence length.

    The tokenizer is the model's preprocessor's, or else that of the
    vocab.txt (and tokenizer files) beside the file.
    """
    model = keras.saving.load_model(path, safe_mode=True)
    _task_of(model)
    preprocessor = getattr(model, "preprocessor", None)
    if preprocessor is not None:
        return model, preprocessor.tokenizer, preprocessor.sequence_length
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isfile(os.path.join(directory, VOCABULARY_ASSET)):
        raise ValueError(
            f"{path} holds a {type(model).__name__} without a preprocessor, and no "
            f"{VOCABULARY_ASSET} is beside it: the exporter needs the model's tokenizer."
        )
    return model, checkpoint_tokenizer(_tokenizer_files(directory)), None


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


def _export_archive(served):
    """A `keras.export.ExportArchive` of the model's signatures, and the signatures."""
    signatures = _signatures(served)
    return _archive(signatures), signatures


def _archive(signatures):
    """An archive of `signatures`, which saves the variables and tables they read.

    An `ExportArchive`, not a plain `tf.Module` holding Keras variables: that
    loads in TF2 but not through the v1 session API TF Serving uses. The
    model is not tracked: its Keras variables would be saved again beside
    the `tf.Variable`s the signatures read, twice the size on disk and in a
    server's memory (keras-team/keras#23553).
    """
    archive = keras.export.ExportArchive()
    for name, function in signatures.items():
        archive.add_endpoint(name, function)
    return archive


def _signatures(served):
    model, preprocessor, config = served.model, served.preprocessor, served.task_config
    if served.task == "classifier":
        return signatures_lib.classifier_signatures(
            model, preprocessor, served.label_names, bool(config.get("text_pair"))
        )
    if served.task == "regression":
        return signatures_lib.regression_signatures(
            model, preprocessor, bool(config.get("text_pair"))
        )
    if served.task == "tagger":
        return tagger_signatures(model, preprocessor, served.label_names)
    if served.task == "multiple_choice":
        return signatures_lib.multiple_choice_signatures(model, preprocessor)
    if served.task == "question_answering":
        return question_answering_signatures(
            model,
            preprocessor.tokenizer,
            preprocessor.sequence_length,
            null_score_diff_threshold=(
                config.get("null_score_diff_threshold", 0.0)
                if config.get("version_2_with_negative")
                else None
            ),
            **{key: config[key] for key in QUESTION_ANSWERING_SETTINGS if key in config},
        )
    return signatures_lib.backbone_signatures(model, preprocessor)


def _write_vocabulary(tokenizer, assets):
    """assets/vocab.txt, for clients that tokenise themselves (`serve_ids`).

    The graph holds the tokens as constants and needs no file.
    """
    os.makedirs(assets, exist_ok=True)
    with open(os.path.join(assets, VOCABULARY_ASSET), "w", encoding="utf-8") as file:
        file.write("\n".join(tokenizer.get_vocabulary()) + "\n")


def _write_warmup_requests(staging, export_base, requests):
    """One real request per signature, as the `PredictionLog` records TF Serving replays.

    Args:
        staging: the version directory being written.
        export_base: the model's directory; its name is the served model's.
        requests: signature name -> its inputs.
    """
    path = os.path.join(staging, WARMUP_FILE)
    model_name = os.path.basename(os.path.normpath(os.fspath(export_base)))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for name, inputs in requests.items():
            writer.write(_prediction_log(model_name, name, inputs).SerializeToString())


def _warmup_inputs(preprocessor, function):
    """A one-example batch for each input of a signature function."""
    text = tf.constant([WARMUP_TEXT])
    features = preprocessor((text, text))
    values = {
        "inputs": tf.constant([_warmup_example().SerializeToString()]),
        **features,
    }
    inputs = {}
    for spec in function.input_signature:
        if spec.name in values:
            value = values[spec.name]
        else:  # a text input, [batch] or [batch, num_choices]
            value = tf.fill([1, *spec.shape[1:]], WARMUP_TEXT)
        if spec.shape.rank == 3:  # ids of multiple choice, [batch, num_choices, length]
            value = tf.repeat(value[:, tf.newaxis], spec.shape[1], axis=1)
        inputs[spec.name] = value
    return inputs


def _warmup_example():
    """A tf.Example with the text features every classify signature reads."""
    text = tf.train.Feature(bytes_list=tf.train.BytesList(value=[WARMUP_TEXT.encode()]))
    return tf.train.Example(features=tf.train.Features(feature={"text": text, "text_pair": text}))


def _prediction_log(model_name, signature, inputs):
    """A `PredictionLog` holding a PredictRequest, or a Classification/RegressionRequest."""
    model_spec = model_pb2.ModelSpec(name=model_name, signature_name=signature)
    if signature == "regress":
        request = regression_pb2.RegressionRequest(
            model_spec=model_spec, input=_example_list(inputs)
        )
        return prediction_log_pb2.PredictionLog(
            regress_log=prediction_log_pb2.RegressLog(request=request)
        )
    if signature == "classify":
        request = classification_pb2.ClassificationRequest(
            model_spec=model_spec, input=_example_list(inputs)
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


def _example_list(inputs):
    """The serialized `tf.Example`s of `inputs["inputs"]` as a request's `Input`."""
    examples = [tf.train.Example.FromString(value) for value in inputs["inputs"].numpy()]
    return input_pb2.Input(example_list=input_pb2.ExampleList(examples=examples))


def _set_method_name(directory, signature, method_name):
    """Sets a signature's method name in saved_model.pb (TF2 saving writes "predict" for all)."""
    path = os.path.join(directory, SAVED_MODEL_FILE)
    saved_model = saved_model_pb2.SavedModel()
    with open(path, "rb") as file:
        saved_model.ParseFromString(file.read())
    for meta_graph in saved_model.meta_graphs:
        meta_graph.signature_def[signature].method_name = method_name
    with open(path, "wb") as file:
        file.write(saved_model.SerializeToString())
