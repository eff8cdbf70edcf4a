"""WordPiece vocabularies: the original's vocab.txt, or a Hugging Face tokenizer.json.

A vocab.txt holds one token per line, its id the line number; the original's
`load_vocab` reads lines ending in "\\n" and strips the whitespace around each
token, and so does `read_vocabulary` (`str.splitlines` would also cut at
U+2028, U+0085 and the like, which a token may hold). A UTF-8 byte-order mark
that begins the file (Windows editors write one) is skipped: it is no part of
the first token. transformers 5 saves a BERT tokenizer as tokenizer.json
alone: its `model.vocab` maps each token to its id.

Example:
>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
>>> write_vocabulary(["[PAD]", "a\\u2028b", "hello"], path)
>>> read_vocabulary(path)
['[PAD]', 'a\\u2028b', 'hello']
"""

import json
import os

from bert_keras.atomic_files import write_text

TOKENIZER_JSON = "tokenizer.json"


def check_vocabulary_fits(vocabulary_file, backbone_config):
    """Refuses a vocabulary of more tokens than the word embeddings: its last ids would have none.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> _ = open(path, "w").write("[PAD]\\na\\nb\\n")
    >>> check_vocabulary_fits(path, {"vocabulary_size": 3})
    >>> check_vocabulary_fits(path, {"vocabulary_size": 2})
    Traceback (most recent call last):
    ...
    ValueError: .../vocab.txt holds 3 tokens but the checkpoint has 2 word embeddings ...
    """
    size = backbone_config.get("vocabulary_size")
    if vocabulary_file is None or size is None:
        return
    tokens = len(read_vocabulary(vocabulary_file))
    if tokens > size:
        raise ValueError(
            f"{vocabulary_file} holds {tokens} tokens but the checkpoint has {size} word "
            f"embeddings (vocabulary_size): ids {size} to {tokens - 1} would index past them."
        )


def read_vocabulary(path):
    """The tokens of a vocab.txt, or of a tokenizer.json's WordPiece model, in id order.

    Args:
        path: a vocab.txt (any name not ending in .json), or a tokenizer.json.

    Returns:
        The list of tokens; a token's id is its index.

    Raises:
        FileNotFoundError: naming `path`.
        ValueError: a tokenizer.json that holds no WordPiece vocabulary, or
            whose ids are not 0 to its size - 1 (the error names the file).

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "tokenizer.json")
    >>> _ = open(path, "w").write(
    ...     '{"model": {"type": "WordPiece", "vocab": {"[UNK]": 1, "[PAD]": 0, "hi": 2}}}')
    >>> read_vocabulary(path)
    ['[PAD]', '[UNK]', 'hi']
    """
    path = str(path)
    text = _read_text(path)
    if path.endswith(".json"):
        return _tokenizer_json_tokens(text, path)
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the newline that ends the last token
    return [line.strip() for line in lines]


def upper_case_tokens(tokens):
    """The ordinary tokens (not "[...]" specials) that hold an upper-case letter.

    An uncased vocabulary is learned from lower-cased text, so it has none;
    a cased one learned from most natural text has many.

    Example:
    >>> upper_case_tokens(["[PAD]", "[unused0]", "london", "London", "##Ing", "[", "ß"])
    ['London', '##Ing']
    """
    return [
        token
        for token in tokens
        if token != token.lower() and not (len(token) > 2 and token[0] + token[-1] == "[]")
    ]


def upper_case_warning(tokens, vocab_file):
    """The warning for a vocabulary with upper-case tokens read with lower-casing; None without.

    Example:
    >>> upper_case_warning(["[CLS]", "apple", "Apple"], "vocab.txt")[:64]
    '--do_lower_case is true, but 1 of the 3 tokens of --vocab_file v'
    >>> upper_case_warning(["[CLS]", "apple"], "vocab.txt") is None
    True
    """
    upper_case = upper_case_tokens(tokens)
    if not upper_case:
        return None
    examples = ", ".join(map(repr, upper_case[:3])) + (", ..." if len(upper_case) > 3 else "")
    return (
        f"--do_lower_case is true, but {len(upper_case)} of the {len(tokens)} tokens of "
        f"--vocab_file {vocab_file} hold upper-case letters ({examples}), which lower-cased text "
        "never gives: for a cased vocabulary, pass --do_lower_case=false."
    )


def _read_text(path):
    """The text of a local file, or (gs://, ...) of one TensorFlow's file systems reach,
    without the byte-order mark it may begin with."""
    return _read_raw_text(path).removeprefix("\ufeff")


def _read_raw_text(path):
    if "://" in path:
        import tensorflow as tf

        if not tf.io.gfile.exists(path):
            raise FileNotFoundError(f"Vocabulary file {path!r} does not exist.")
        with tf.io.gfile.GFile(path, "r") as file:
            return file.read()
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Vocabulary file {path!r} does not exist.")
    with open(path, "rb") as file:
        data = file.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise ValueError(
            f"Vocabulary file {path!r} is not UTF-8 text: line {line} holds the byte "
            f"{data[error.start]:#04x}."
        ) from None


def write_vocabulary(tokens, path):
    """Writes `tokens` as a vocab.txt (atomically), one per line.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> write_vocabulary(["[PAD]", "hi"], path)
    >>> open(path).read()
    '[PAD]\\nhi\\n'
    """
    write_text(path, "".join(token + "\n" for token in tokens))


def is_wordpiece_tokenizer_json(path):
    """Whether `path` is a tokenizer.json whose model is WordPiece (BERT's).

    Example:
    >>> is_wordpiece_tokenizer_json("/nonexistent/tokenizer.json")
    False
    """
    try:
        with open(path, encoding="utf-8") as file:
            raw = json.load(file)
    except (OSError, ValueError):
        return False
    return _wordpiece_vocabulary(raw) is not None


def _wordpiece_vocabulary(raw):
    model = raw.get("model") if isinstance(raw, dict) else None
    if not isinstance(model, dict) or model.get("type") != "WordPiece":
        return None
    vocabulary = model.get("vocab")
    return vocabulary if isinstance(vocabulary, dict) else None


def _tokenizer_json_tokens(text, path):
    try:
        raw = json.loads(text)
    except ValueError as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from None
    vocabulary = _wordpiece_vocabulary(raw)
    if vocabulary is None:
        raise ValueError(
            f"{path} holds no WordPiece vocabulary (its model.type is "
            f"{(raw.get('model') or {}).get('type')!r}; BERT's tokenizer.json has 'WordPiece')."
        )
    tokens = sorted(vocabulary, key=vocabulary.get)
    ids = [vocabulary[token] for token in tokens]
    if ids != list(range(len(tokens))):
        missing = sorted(set(range(len(tokens))) - set(ids))
        raise ValueError(
            f"{path}: model.vocab's ids must run from 0 to {len(tokens) - 1}, one token each; "
            f"no token has the ids {missing[:5]}."
        )
    extra = [
        token["content"] for token in raw.get("added_tokens") or [] if token["id"] >= len(tokens)
    ]
    if extra:
        raise ValueError(
            f"{path} adds tokens beyond its WordPiece vocabulary ({extra[:5]}); bert_keras reads "
            "the WordPiece vocabulary only."
        )
    return tokens
