"""Recognises a checkpoint directory's format and reads it into a `Checkpoint`.

Formats, recognised by what a directory holds:

- "bert_keras" (the project's own): a Hugging Face directory plus
  `bert_keras.json` with the exact `BertBackbone` config and tokenizer
  settings, so what config.json cannot express (dtype policy, name, the
  word-length limit of an original vocabulary) survives. Preferred when
  present.
- "huggingface": config.json + model.safetensors (or a sharded index).
- "original": the google-research release, bert_config.json + a TF checkpoint.
  Its checkpoint prefix (`DIR/bert_model.ckpt`, what the original scripts'
  --init_checkpoint names) reads as the directory DIR.
- "keras_hub": a keras-hub BERT preset (config.json naming
  "keras_hub>BertBackbone" + model.weights.h5, read with h5py), with the
  classifier head of a BertTextClassifier task preset.
- "keras": a `.keras` file of a `BertBackbone`, loaded with `safe_mode=True`.

Reading is strict: a missing, unexpected or wrongly shaped tensor is an error
that names every one. The only tensors skipped are training state (Adam
slots, global_step), transformers' `position_ids` buffer and its tied
decoder. Head tensors go to `Checkpoint.head_weights`.
"""

import glob
import os
import zipfile

import keras
from absl import logging

from bert_keras.atomic_files import moved_aside_copy
from bert_keras.checkpoints import huggingface
from bert_keras.checkpoints import keras_hub
from bert_keras.checkpoints import original
from bert_keras.checkpoints.checkpoint import HUGGING_FACE_MAX_CHARS_PER_WORD
from bert_keras.checkpoints.checkpoint import ORIGINAL_MAX_CHARS_PER_WORD
from bert_keras.checkpoints.checkpoint import OWN_CONFIG_FILE
from bert_keras.checkpoints.checkpoint import Checkpoint
from bert_keras.checkpoints.checkpoint import read_json
from bert_keras.checkpoints.checkpoint import tokenizer_settings
from bert_keras.checkpoints.name_tables import read_tables
from bert_keras.checkpoints.vocabulary import TOKENIZER_JSON
from bert_keras.checkpoints.vocabulary import check_vocabulary_fits
from bert_keras.checkpoints.vocabulary import is_wordpiece_tokenizer_json
from bert_keras.checkpoints.vocabulary import read_vocabulary
from bert_keras.checkpoints.vocabulary import upper_case_tokens

FORMATS = ("bert_keras", "huggingface", "original", "keras_hub", "keras")
# keras.saving's registered name of the one class a "keras" checkpoint holds.
_BACKBONE_CLASS = "bert_keras>BertBackbone"


def detect_format(path):
    """Names the checkpoint format at `path` (a directory or a .keras file).

    An original checkpoint's prefix (`DIR/bert_model.ckpt`) is its directory.

    Raises:
        FileNotFoundError: `path` does not exist.
        ValueError: nothing recognised (the message lists what was looked
            for and what is there), only pickled PyTorch weights, or a TF
            checkpoint prefix that does not stand for its directory.

    Example:
    >>> import os, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> _ = open(os.path.join(directory, "bert_config.json"), "w").write("{}")
    >>> _ = open(os.path.join(directory, "bert_model.ckpt.index"), "w").write("")
    >>> detect_format(directory), detect_format(directory + "/bert_model.ckpt")
    ('original', 'original')
    """
    path = checkpoint_directory(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"Checkpoint path {path} does not exist." + _moved_aside_note(path))
    if os.path.isfile(path):
        if path.endswith(".keras"):
            return "keras"
        raise ValueError(f"{path} is a file; expected a checkpoint directory or a .keras file.")
    if huggingface.is_checkpoint(path):
        own = os.path.isfile(os.path.join(path, OWN_CONFIG_FILE))
        return "bert_keras" if own else "huggingface"
    if original.is_checkpoint(path):
        return "original"
    if keras_hub.is_checkpoint(path):
        return "keras_hub"
    if _keras_files(path):
        return "keras"
    if huggingface.has_pickled_weights(path):
        raise ValueError(huggingface.pickled_weights_message(path))
    raise ValueError(
        f"No checkpoint recognised in {path}. Looked for: {OWN_CONFIG_FILE} with "
        f"{huggingface.CONFIG_FILE} and {huggingface.WEIGHTS_FILE} (bert_keras); "
        f"{huggingface.CONFIG_FILE} with {huggingface.WEIGHTS_FILE} or "
        f"{huggingface.WEIGHTS_INDEX_FILE} (Hugging Face); {original.CONFIG_FILE} "
        f"with a *.ckpt.index (original BERT); {keras_hub.CONFIG_FILE} naming "
        f"{keras_hub.BACKBONE_CLASS} with {keras_hub.WEIGHTS_FILE} (keras-hub); a *.keras file. "
        f"Found: {sorted(os.listdir(path))[:20]}." + _export_note(path)
    )


def _export_note(path):
    """Points at path/export where that is a checkpoint: a training program's OUTPUT_DIR was given."""
    export = os.path.join(path, "export")
    if not os.path.isdir(export) or not os.path.isfile(os.path.join(export, OWN_CONFIG_FILE)):
        return ""
    return f" A training program's OUTPUT_DIR keeps its checkpoint in export/: give {export}."


def _moved_aside_note(path):
    """Where a missing checkpoint's contents lie when a run replacing it stopped part way."""
    moved_aside = moved_aside_copy(path)
    if moved_aside is None:
        return ""
    return (
        f" A run replacing it stopped part way: its previous contents are in {moved_aside}, "
        "which the next write of it puts back (or rename that directory to it)."
    )


def checkpoint_directory(path):
    """`path`, or the directory of an original checkpoint `path` is the prefix of.

    The original run_classifier.py and run_squad.py take --init_checkpoint
    as a TF checkpoint prefix, `DIR/bert_model.ckpt`, next to separate
    --bert_config_file and --vocab_file flags; here the directory holds all
    three, so such a prefix stands for DIR when it is the checkpoint DIR
    reads (see `original.checkpoint_prefix`).

    Raises:
        ValueError: `path` is a TF checkpoint prefix (a `path`.index exists)
            whose directory is not an original checkpoint, or is one that
            reads another of its checkpoints: give the checkpoint directory.

    Example:
    >>> import os, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> _ = open(os.path.join(directory, "bert_config.json"), "w").write("{}")
    >>> _ = open(os.path.join(directory, "bert_model.ckpt.index"), "w").write("")
    >>> checkpoint_directory(directory + "/bert_model.ckpt") == directory
    True
    """
    path = os.fspath(path)
    if os.path.exists(path) or not os.path.isfile(path + ".index"):
        return path
    directory = os.path.dirname(path) or os.curdir
    give_directory = (
        f"give the checkpoint directory ({directory}) holding {original.CONFIG_FILE}, "
        f"{original.VOCABULARY_FILE} and one checkpoint."
    )
    if not original.is_checkpoint(directory):
        raise ValueError(
            f"{path} is a TF checkpoint prefix without {original.CONFIG_FILE} beside it; "
            + give_directory
        )
    try:
        read_prefix = original.checkpoint_prefix(directory)
    except ValueError as error:
        raise ValueError(f"{error} For {path}, {give_directory}") from None
    if os.path.basename(read_prefix) != os.path.basename(path):
        raise ValueError(
            f"{path} is a TF checkpoint prefix, but its directory reads "
            f"{os.path.basename(read_prefix)}; {give_directory}"
        )
    return directory


def read_checkpoint(path, format="auto"):
    """Reads a checkpoint directory (or .keras file) into a `Checkpoint`.

    Args:
        path: the directory (or .keras file).
        format: "auto" (by the directory's contents) or one of `FORMATS`.

    Raises:
        ValueError: unsupported config, a vocabulary of more tokens than the
            word embeddings, or missing, unexpected or wrongly shaped tensors
            (backbone shapes are checked against a model by
            `bert_keras.models.checkpoint_weights.apply_checkpoint`).

    Example:
    >>> import tempfile
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> directory = tempfile.mkdtemp() + "/tiny"
    >>> BertBackbone.from_preset("bert_tiny").save_to_preset(directory)
    >>> checkpoint = read_checkpoint(directory)
    >>> checkpoint.format, checkpoint.backbone_config["hidden_dim"], checkpoint.head_weights
    ('bert_keras', 128, {})
    >>> checkpoint.backbone_weights["pooler_dense/kernel"].shape
    (128, 128)
    """
    path = checkpoint_directory(path)
    detected = detect_format(path)
    if format == "auto":
        format = detected
    elif format not in FORMATS:
        raise ValueError(
            f"Unknown checkpoint format {format!r}; expected 'auto' or one of {FORMATS}."
        )
    elif format != detected and (format, detected) != ("huggingface", "bert_keras"):
        # A bert_keras directory is also a Hugging Face one, not the reverse.
        raise ValueError(f"{path} holds a {detected!r} checkpoint, not {format!r}.")
    readers = {
        "bert_keras": _read_own,
        "huggingface": _read_huggingface,
        "original": _read_original,
        "keras_hub": _read_keras_hub,
        "keras": _read_keras,
    }
    checkpoint = readers[format](path)
    check_vocabulary_fits(checkpoint.vocabulary_file, checkpoint.backbone_config)
    return checkpoint


def read_tokenizer_settings(directory):
    """The `BertTokenizer` arguments a checkpoint directory's tokenizer files set.

    bert_keras.json's when it has them; for an original release, the
    original's 200-character word limit and the casing its vocabulary shows
    (upper-case letters in at least 1% of its ordinary tokens: cased, as no
    uncased vocabulary has them), else the casing its name says
    (`original.tokenizer_casing`), else uncased; otherwise Hugging Face's
    tokenizer_config.json and tokenizer.json (casing, accents, Chinese
    characters, the WordPiece word limit: 100 unless tokenizer.json says
    otherwise); a keras-hub preset's tokenizer.json (casing, accents, CJK
    splitting, its 100-byte word limit). A Hugging Face directory
    (config.json) with only a vocab.txt gets transformers' `BertTokenizer`
    defaults (uncased, 100); any other directory is read as an original
    release. A warning names a vocabulary's upper-case tokens that an
    uncased tokenizer would never produce, and a release whose name says
    uncased but whose vocabulary is cased.

    Example:
    >>> import os, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> _ = open(os.path.join(directory, "tokenizer_config.json"), "w").write(
    ...     '{"do_lower_case": false}')
    >>> settings = read_tokenizer_settings(directory)
    >>> settings["lowercase"], settings["max_input_chars_per_word"]
    (False, 100)
    >>> _ = open(os.path.join(directory, "vocab.txt"), "w").write("[PAD]\\nLondon\\nlondon\\n")
    >>> os.remove(os.path.join(directory, "tokenizer_config.json"))
    >>> read_tokenizer_settings(directory)["lowercase"]  # its vocabulary is cased
    False
    """
    settings = _tokenizer_settings(directory)
    if settings["lowercase"]:
        _warn_of_upper_case_tokens(directory)
    return settings


def _tokenizer_settings(directory):
    own = _read_json(_existing(directory, OWN_CONFIG_FILE)) or {}
    if "tokenizer" in own:
        return tokenizer_settings(**own["tokenizer"])
    if original.is_checkpoint(directory):
        return tokenizer_settings(
            **_original_casing(directory),
            max_input_chars_per_word=ORIGINAL_MAX_CHARS_PER_WORD,
        )
    keras_hub_settings = keras_hub.read_tokenizer_settings(directory)
    if keras_hub_settings is not None:
        return keras_hub_settings
    config = _read_json(_existing(directory, "tokenizer_config.json"))
    fast = _read_json(_existing(directory, "tokenizer.json"))
    if config is None and fast is None:
        if _existing(directory, huggingface.CONFIG_FILE) is None:
            return tokenizer_settings(**_original_casing(directory))
        return tokenizer_settings(max_input_chars_per_word=HUGGING_FACE_MAX_CHARS_PER_WORD)
    config, fast = config or {}, fast or {}
    normalizer = fast.get("normalizer") or {}
    return tokenizer_settings(
        lowercase=config.get("do_lower_case", normalizer.get("lowercase", True)),
        strip_accents=config.get("strip_accents", normalizer.get("strip_accents")),
        tokenize_chinese_chars=config.get(
            "tokenize_chinese_chars", normalizer.get("handle_chinese_chars", True)
        ),
        max_input_chars_per_word=(fast.get("model") or {}).get(
            "max_input_chars_per_word", HUGGING_FACE_MAX_CHARS_PER_WORD
        ),
    )


# Upper-case letters in this share of a vocabulary's ordinary tokens make it
# cased; an uncased vocabulary with a few tokens added by hand stays uncased.
_CASED_SHARE = 0.01
# Directories warned about once already, by warning.
_WARNED = set()


def _original_casing(directory):
    """An original release's casing: its vocabulary's when cased, else its name's, else {}."""
    named = original.tokenizer_casing(directory)
    tokens, upper_case = _vocabulary_upper_case(directory)
    if len(upper_case) < _CASED_SHARE * max(len(tokens), 1):
        return named
    if named.get("lowercase"):
        _warn_once(
            ("name", directory),
            "%s's name says uncased, but %d of its %d tokens hold upper-case letters (%s), "
            "which no uncased vocabulary has: read as cased. To lower-case anyway, pass "
            "lowercase=True to BertTokenizer.from_preset.",
            directory,
            len(upper_case),
            len(tokens),
            _examples(upper_case),
        )
    return {"lowercase": False}


def _warn_of_upper_case_tokens(directory):
    """Warns of the tokens an uncased tokenizer of `directory` can never produce."""
    tokens, upper_case = _vocabulary_upper_case(directory)
    if upper_case:
        _warn_once(
            ("lowercase", directory),
            "The tokenizer of %s lower-cases its text, so %d of its %d tokens, which hold "
            "upper-case letters (%s), are never produced; if the model is cased, pass "
            "lowercase=False to BertTokenizer.from_preset.",
            directory,
            len(upper_case),
            len(tokens),
            _examples(upper_case),
        )


def _vocabulary_upper_case(directory):
    """(the tokens of `directory`'s vocabulary, those that hold upper-case letters); both [] without one."""
    path = vocabulary_file(directory)
    if path is None:
        return [], []
    try:
        tokens = read_vocabulary(path)
    except ValueError:
        return [], []  # reading the checkpoint names the problem
    return tokens, upper_case_tokens(tokens)


def _examples(tokens):
    return ", ".join(repr(token) for token in tokens[:3]) + (", ..." if len(tokens) > 3 else "")


def _warn_once(key, message, *arguments):
    if key not in _WARNED:
        _WARNED.add(key)
        logging.warning(message, *arguments)


def vocabulary_file(directory):
    """The file holding a checkpoint directory's vocabulary, or None.

    vocab.txt; else a keras-hub preset's assets/tokenizer/vocabulary.txt; else
    a Hugging Face tokenizer.json of a WordPiece model (transformers 5 saves
    no vocab.txt). `bert_keras.checkpoints.vocabulary.read_vocabulary` reads
    each.

    Example:
    >>> import os, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> _ = open(os.path.join(directory, "tokenizer.json"), "w").write(
    ...     '{"model": {"type": "WordPiece", "vocab": {"[PAD]": 0}}}')
    >>> os.path.basename(vocabulary_file(directory))
    'tokenizer.json'
    """
    tokenizer_json = _existing(directory, TOKENIZER_JSON)
    return (
        _existing(directory, "vocab.txt")
        or keras_hub.vocabulary_file(directory)
        or (
            tokenizer_json
            if tokenizer_json and is_wordpiece_tokenizer_json(tokenizer_json)
            else None
        )
    )


def _read_huggingface(directory):
    config, architecture, raw = huggingface.read_config(directory)
    tensor_file = huggingface.TensorFile(directory)
    names = {huggingface.table_name(name): name for name in tensor_file.shapes}
    heads = dict(huggingface.HEAD_TABLES)
    # Both classifications name their head `classifier.*`; the class says which it is.
    del heads["classifier" if architecture == "BertForTokenClassification" else "token_classifier"]
    checkpoint = read_tables(
        tensor_file,
        names,
        config,
        huggingface.BACKBONE_TABLE,
        heads,
        ignored=huggingface.IGNORED_TENSORS,
        tied=huggingface.TIED_TENSORS,
        config_file=(os.path.join(directory, huggingface.CONFIG_FILE), raw),
        config_table=huggingface.CONFIG_TABLE,
    )
    checkpoint.format, checkpoint.directory, checkpoint.extra_config = "huggingface", directory, raw
    checkpoint.label_names = _label_names(
        raw.get("id2label"), checkpoint.num_named_labels(), os.path.join(directory, "config.json")
    )
    checkpoint.vocabulary_file = vocabulary_file(directory)
    checkpoint.tokenizer_settings = read_tokenizer_settings(directory)
    return checkpoint


def _label_names(id2label, num_labels, path):
    """id2label's names in id order when it names exactly the head's `num_labels` outputs.

    Names that do not fit a head are not read, with a warning.
    """
    if not id2label or num_labels is None:
        return None
    names = [id2label.get(str(index)) for index in range(num_labels)]
    if len(id2label) != num_labels or None in names:
        logging.warning(
            "%s: id2label names ids %s but the head has %d outputs (ids 0 to %d): its label "
            "names are not read.",
            path,
            sorted(id2label, key=str),
            num_labels,
            num_labels - 1,
        )
        return None
    return names


def _read_own(directory):
    checkpoint = _read_huggingface(directory)
    own_path = os.path.join(directory, OWN_CONFIG_FILE)
    own_config = _read_json(own_path)
    if not isinstance(own_config, dict) or not isinstance(own_config.get("config"), dict):
        raise ValueError(
            f'{own_path} has no "config" (the BertBackbone config of a bert_keras checkpoint); '
            "remove the file, or read the directory with format='huggingface' "
            "(--format=huggingface), to take the config from config.json."
        )
    checkpoint.backbone_config = own_config["config"]
    checkpoint.task_config = own_config.get("task", {})
    checkpoint.format = "bert_keras"
    return checkpoint


def _read_original(directory):
    config = original.read_config(directory)
    config_path = os.path.join(directory, original.CONFIG_FILE)
    tensor_file = original.TensorFile(directory)
    checkpoint = read_tables(
        tensor_file,
        {name: name for name in tensor_file.shapes},
        config,
        original.BACKBONE_TABLE,
        original.HEAD_TABLES,
        ignored=original.IGNORED_PATTERNS,
        config_file=(config_path, read_json(config_path)),
        config_table=original.CONFIG_TABLE,
    )
    checkpoint.format, checkpoint.directory = "original", directory
    checkpoint.vocabulary_file = _existing(directory, original.VOCABULARY_FILE)
    return _with_settings_beside(checkpoint, directory)


def _read_keras_hub(directory):
    return _with_settings_beside(keras_hub.read_preset(directory), directory)


def _with_settings_beside(checkpoint, directory):
    """What bert_keras.json beside an original or keras-hub checkpoint adds (see writing).

    Its tokenizer settings come first in `read_tokenizer_settings`.
    """
    checkpoint.tokenizer_settings = read_tokenizer_settings(directory)
    settings = _read_json(_existing(directory, OWN_CONFIG_FILE)) or {}
    label_names = settings.get("label_names")
    if label_names is not None and len(label_names) == checkpoint.num_named_labels():
        checkpoint.label_names = list(label_names)
    checkpoint.task_config = settings.get("task", checkpoint.task_config)
    return checkpoint


def _read_keras(path):
    return keras_file_checkpoint(*load_keras_file(path))


def load_keras_file(path):
    """The model in a `.keras` file (or a directory's only one), loaded in safe mode, and its path.

    Keras builds only the classes registered with it: the model's class
    must have been imported (importing `bert_keras` registers them all).

    Raises:
        ValueError: a directory with no or several .keras files, or a file
            that is not a .keras (zip) file.

    Example:
    >>> import tempfile
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> path = tempfile.mkdtemp() + "/backbone.keras"
    >>> BertBackbone(9, 1, 2, 8, 16).save(path)
    >>> model, read = load_keras_file(path)
    >>> type(model).__name__, read == path
    ('BertBackbone', True)
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        files = _keras_files(path)
        if len(files) != 1:
            raise ValueError(f"{path} holds {len(files)} .keras files; expected one: {files}.")
        path = files[0]
    if not zipfile.is_zipfile(path):  # Keras would call it "File not found"
        raise ValueError(f"{path} is not a .keras (zip) file; it cannot be read.")
    return keras.saving.load_model(path, safe_mode=True), path


def keras_file_checkpoint(model, path):
    """The `Checkpoint` of a `BertBackbone` loaded from the .keras file at `path`.

    The vocabulary and tokenizer settings are those beside the file.

    Raises:
        ValueError: `model` is not a `BertBackbone`.

    Example:
    >>> import tempfile
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> path = tempfile.mkdtemp() + "/backbone.keras"
    >>> BertBackbone(9, 1, 2, 8, 16).save(path)
    >>> checkpoint = keras_file_checkpoint(*load_keras_file(path))
    >>> checkpoint.format, checkpoint.backbone_weights["pooler_dense/kernel"].shape
    ('keras', (8, 8))
    """
    if keras.saving.get_registered_name(type(model)) != _BACKBONE_CLASS:
        raise ValueError(
            f"{path} holds a {type(model).__name__}; expected a BertBackbone. A task model's "
            "file loads with keras.saving.load_model and converts, head included, with "
            "tools.convert_checkpoint; save its .backbone to read it here."
        )
    weights = {variable.path: keras.ops.convert_to_numpy(variable) for variable in model.weights}
    directory = os.path.dirname(path)
    return Checkpoint(
        backbone_config=model.get_config(),
        backbone_weights=weights,
        format="keras",
        directory=directory,
        vocabulary_file=vocabulary_file(directory),
        tokenizer_settings=read_tokenizer_settings(directory),
    )


def _keras_files(directory):
    return sorted(glob.glob(os.path.join(glob.escape(directory), "*.keras")))


def _existing(directory, name):
    path = os.path.join(directory, name)
    return path if os.path.isfile(path) else None


def _read_json(path):
    return None if path is None else read_json(path)
