"""BERT's WordPiece tokenizer as an in-graph TensorFlow Keras layer.

`BertTokenizer` reproduces the original google-research BERT tokenizer (and the
Rust `tokenizers.BertWordPieceTokenizer` that Hugging Face ships) token for
token, using only core TensorFlow ops and tensorflow-text ops that
tensorflow-text 2.12.1 registers (the version stock TF Serving embeds), so the
layer runs in `tf.data` under every Keras backend and inside a SavedModel.

Why not tensorflow-text's `BertTokenizer` / `FastBertTokenizer` or keras-hub's
`WordPieceTokenizer`: they case-fold with NFKC (so "ß", "ﬁ" and full-width
letters change), drop or [UNK] the spacing accent "´" (U+00B4), and count the
word-length limit in bytes. Here each rule of the original is written out from
small ops instead:

1. Normalisation, with string ops of core TensorFlow (RE2 regular expressions,
   ICU lower-casing) and tensorflow-text (NFD): control characters are
   dropped, whitespace becomes " ", CJK ideographs and punctuation get spaces
   around them, accents are stripped (NFD, then drop category Mn) and the rest
   is lower-cased. Every rule acts on each character on its own.
2. For token ids alone, whole texts are normalised. For offsets, the text is
   decoded into code points, every distinct code point of the batch is
   normalised as a one-character string, and the results are gathered back
   into place; a table maps each normalised byte to the original character it
   came from, which is how offsets point into the original string.
3. The normalised text is split on " " into words; WordPiece splits the words
   (tensorflow-text's `FastWordpieceTokenizer`, which gives the original's
   greedy longest-match-first pieces in linear time).

Plain text (printable ASCII, tab, newline, carriage return: most English
text) takes a shortcut: there only lower-casing and the split on whitespace
and punctuation change anything, and `FastWordpieceTokenizer` in its
end-to-end mode does that split itself, exactly like the original, with its
byte limit equal to the character limit, and every byte stays in place for the
offsets. So plain texts take `tf.strings.lower` and one tensorflow-text op
instead of the rules one by one (`python -m benchmarks.tokenizer` measures
both); a mask sends every other text through the rules, in the same graph.

Offsets are UTF-8 byte offsets into the original string by default (pass
`unit="character"` for code-point offsets).

Where the original Python code and the Rust reference differ, this follows
the one named here, and tests/text/test_tokenizer.py checks it:

* "Σ" at the end of a word: Python's `str.lower()` gives "ς", the Rust
  reference (one character at a time) "σ"; this follows the original.
* Private-use characters (category Co): the original keeps them, so their
  word becomes [UNK]; the Rust reference drops them (as the original did
  before 2019, with every category C*); this follows the original.
* CJK ideographs U+2B820..U+2B91F: the original puts spaces around them, the
  Rust reference (whose range starts at U+2B920) does not; this follows the
  original.
* Characters assigned after Unicode 3.2 may be classified differently by the
  Unicode tables of Python, RE2/ICU (used here) and Rust; see
  tests/text/unicode_corpus.py for which ones.

Lower-casing is ICU's for the process's default locale; under a Turkish or
Lithuanian locale "I" and some accented letters lower-case differently.
"""

import os

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from bert_keras.checkpoints.reading import read_tokenizer_settings
from bert_keras.checkpoints.reading import vocabulary_file
from bert_keras.checkpoints.vocabulary import read_vocabulary

# The methods have no Python control flow on tensors, so AutoGraph would only
# add seconds to every trace (tf.function, tf.data).
_without_autograph = tf.autograph.experimental.do_not_convert
# Ragged tensors here are built from row partitions of other valid ragged
# tensors, so they are made with `validate=False`: the checks would only add
# ops (and tracing time).

UNK_TOKEN = "[UNK]"
CLS_TOKEN = "[CLS]"
SEP_TOKEN = "[SEP]"
PAD_TOKEN = "[PAD]"
MASK_TOKEN = "[MASK]"
SPECIAL_TOKENS = (PAD_TOKEN, UNK_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN)

# Character classes of the original tokenizer, in RE2 syntax.
# `_clean_text` drops NUL, U+FFFD and what `_is_control` calls control:
# categories Cc and Cf, except \t \n \r, which are whitespace. Private-use
# (Co) and unassigned (Cn) characters stay, so their words become [UNK].
_DROPPED_CHARACTER = r"[^\P{Cc}\t\n\r]|\p{Cf}|\x{FFFD}"
# `_is_whitespace` (space, \t, \n, \r, Zs) plus Zl and Zp, on which the
# original's `str.split()` also splits; " " itself is left out, as it stays.
# `[^\PZ ]` is "in category Z and not a space".
_WHITESPACE = r"[\t\n\r]|[^\PZ ]"
# `_is_punctuation`: printable ASCII that is not a letter or digit, and P*.
_PUNCTUATION = r"[!-/:-@\[-`{-~\p{P}]"
# `_is_chinese_char`: the CJK Unified Ideographs blocks.
_CJK_IDEOGRAPH = (
    r"[\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}"
    r"\x{2A700}-\x{2B73F}\x{2B740}-\x{2B81F}\x{2B820}-\x{2CEAF}"
    r"\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}]"
)
_NONSPACING_MARK = r"\p{Mn}"
# Plain text: printable ASCII, tab, newline and carriage return. In it the
# only rules that change anything are lower-casing and the split on whitespace
# and punctuation, and there tensorflow-text's end-to-end
# `FastWordpieceTokenizer` splits words exactly like the original
# (tests/text/test_tokenizer.py checks every ASCII character).
_PLAIN_TEXT = r"[\t\n\r -~]*"
# Special tokens written in plain text, each name's first letter captured:
# "[MASK]" -> "M". The first letters tell the special tokens apart.
_SPECIAL_TOKEN_INITIAL = r"\[(?:{})\]".format(
    "|".join(f"({token[1]}){token[2:-1]}" for token in SPECIAL_TOKENS)
)
# Control characters, which plain text cannot hold.
_CONTROL_CHARACTERS = [chr(code) for code in [*range(1, 9), *range(14, 32)]]
_CONTINUATION_PREFIX = "##"


def _utf8_byte_length(codepoints):
    """Number of UTF-8 bytes that encode each code point."""
    return (
        1
        + tf.cast(codepoints >= 0x80, codepoints.dtype)
        + tf.cast(codepoints >= 0x800, codepoints.dtype)
        + tf.cast(codepoints >= 0x10000, codepoints.dtype)
    )


@keras.saving.register_keras_serializable(package="bert_keras")
class BertTokenizer(keras.layers.Layer):
    """BERT's WordPiece tokenizer, identical to the original implementation.

    Splits text into words exactly like the original google-research BERT
    `FullTokenizer` (clean-up of control characters, whitespace normalisation,
    spaces around CJK ideographs, punctuation split, optional lower-casing and
    accent stripping) and each word greedily into the longest vocabulary pieces,
    with "##" marking pieces that continue a word. A word that cannot be split,
    or that is longer than `max_input_chars_per_word` characters, becomes
    "[UNK]".

    The layer is pure TensorFlow: call it eagerly, in a `tf.function` or in
    `tf.data.Dataset.map` under any Keras backend; it always returns TensorFlow
    tensors (a `tf.RaggedTensor` of int32 ids for a batch of strings, a dense
    int32 `tf.Tensor` for a single string).

    Args:
        vocabulary: a list of tokens (index = id), or the path of a vocab.txt
            or of a Hugging Face tokenizer.json (see
            `bert_keras.checkpoints.vocabulary.read_vocabulary`).
            It must contain "[PAD]", "[UNK]", "[CLS]", "[SEP]" and "[MASK]".
        lowercase: lower-case the text (uncased checkpoints).
        strip_accents: remove accents (NFD, then drop category Mn). `None`
            follows `lowercase`, as in the original and in Hugging Face.
        tokenize_chinese_chars: put spaces around CJK ideographs.
        special_tokens_in_strings: keep the special tokens written literally
            in the text ("[MASK]", "[SEP]", ...) as single tokens instead of
            splitting them like ordinary text.
        max_input_chars_per_word: words with more characters become "[UNK]".
            The original uses 200; Hugging Face `transformers` and `tokenizers`
            use 100.
        **kwargs: arguments of `keras.layers.Layer`.

    Call arguments:
        inputs: a string or a 1-D batch of strings (Python or TensorFlow).

    Example:
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    ...               "the", "time", "##time", "##out", "´", "##´", "!"]
    >>> tokenizer = BertTokenizer(vocabulary, lowercase=True)
    >>> tokenizer("The timeout!").numpy().tolist()
    [5, 6, 8, 11]
    >>> tokenizer(["´timeout´", "xyz"]).to_list()
    [[9, 7, 8, 10], [1]]
    """

    def __init__(
        self,
        vocabulary,
        lowercase=True,
        strip_accents=None,
        tokenize_chinese_chars=True,
        special_tokens_in_strings=False,
        max_input_chars_per_word=200,
        **kwargs,
    ):
        super().__init__(**kwargs)
        # Inputs are strings: keep them as TensorFlow tensors.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True

        self.vocabulary = vocabulary
        path = os.fspath(vocabulary) if isinstance(vocabulary, (str, os.PathLike)) else ""
        tokens = read_vocabulary(path) if path else [str(token) for token in vocabulary]
        _check_vocabulary(tokens, path)
        self._tokens = tokens
        self._token_ids = {token: index for index, token in enumerate(tokens)}
        self.lowercase = lowercase
        self.strip_accents = strip_accents
        self.tokenize_chinese_chars = tokenize_chinese_chars
        self.special_tokens_in_strings = special_tokens_in_strings
        self.max_input_chars_per_word = max_input_chars_per_word

        self.pad_token_id = self._token_ids[PAD_TOKEN]
        self.unk_token_id = self._token_ids[UNK_TOKEN]
        self.cls_token_id = self._token_ids[CLS_TOKEN]
        self.sep_token_id = self._token_ids[SEP_TOKEN]
        self.mask_token_id = self._token_ids[MASK_TOKEN]

        # Constants only, no lookup-table resources: a SavedModel that calls
        # the layer needs nothing tracked, under any Keras backend.
        self._vocabulary_tensor = tf.constant(tokens)
        # Its greedy longest-match-first result is the original's, computed
        # in linear time; the words come split already.
        self._wordpiece = tf_text.FastWordpieceTokenizer(
            tokens,
            suffix_indicator=_CONTINUATION_PREFIX,
            # Words over the limit are handled in characters, below, and
            # special tokens go whole whatever the limit; tf-text counts
            # bytes, so its own limit is set out of the way of both.
            max_bytes_per_word=4 * max_input_chars_per_word + max(map(len, SPECIAL_TOKENS)),
            token_out_type=tf.int64,
            unknown_token=UNK_TOKEN,
            no_pretokenization=True,
        )
        self._build_plain_text_path(tokens)
        self._word_splitter = tf_text.WhitespaceTokenizer()
        self._special_token_pattern = "|".join(_escape_regex(token) for token in SPECIAL_TOKENS)

    def _build_plain_text_path(self, tokens):
        """Prepares the one-op tokenization of plain text (see `_PLAIN_TEXT`).

        A special token in plain text becomes a two-character word: a control
        character that appears in no token, then the initial of the special
        token's name. The end-to-end WordPiece learns these words as extra
        tokens, whose ids past the vocabulary map to the special tokens' ids.
        """
        # The words of special tokens need a limit of two characters at least.
        if self.max_input_chars_per_word < 2:
            self._plain_text_wordpiece = None
            return
        marker = _unused_control_character(tokens)
        self._special_token_rewrite = " {}{} ".format(
            marker, "".join(f"\\{i + 1}" for i in range(len(SPECIAL_TOKENS)))
        )
        special_words = [marker + token[1] for token in SPECIAL_TOKENS]
        if self.lowercase:  # Plain text is lower-cased after the rewrite.
            special_words = [word.lower() for word in special_words]
        # On ASCII a byte is a character, so its word limit is the original's.
        self._plain_text_wordpiece = tf_text.FastWordpieceTokenizer(
            tokens + special_words,
            suffix_indicator=_CONTINUATION_PREFIX,
            max_bytes_per_word=self.max_input_chars_per_word,
            token_out_type=tf.int32,
            unknown_token=UNK_TOKEN,
        )
        self._plain_text_token_ids = tf.constant(
            list(range(len(tokens))) + [self._token_ids[token] for token in SPECIAL_TOKENS],
            tf.int32,
        )

    @classmethod
    def from_preset(cls, directory, **kwargs):
        """Builds the tokenizer of a checkpoint directory.

        Reads the vocabulary (see `bert_keras.checkpoints.vocabulary_file`)
        and the settings the directory's tokenizer files give (see
        `bert_keras.checkpoints.read_tokenizer_settings`: casing,
        accent stripping, Chinese characters, and the word-length limit of
        the checkpoint's format); without any the tokenizer is uncased with
        the original's limit. `kwargs` override them.

        Args:
            directory: a checkpoint directory (see `bert_keras.checkpoints`).
            **kwargs: other arguments of `BertTokenizer`.

        Example:
        >>> import os, tempfile
        >>> directory = tempfile.mkdtemp()
        >>> tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Hi"]
        >>> _ = open(os.path.join(directory, "vocab.txt"), "w").write(
        ...     "\\n".join(tokens))
        >>> _ = open(os.path.join(directory, "tokenizer_config.json"),
        ...          "w").write('{"do_lower_case": false}')
        >>> BertTokenizer.from_preset(directory)("Hi").numpy().tolist()
        [5]
        """
        vocabulary_path = vocabulary_file(directory)
        if vocabulary_path is None:
            raise FileNotFoundError(
                f"Checkpoint directory {directory!r} has no vocab.txt (nor a Hugging Face "
                "tokenizer.json of a WordPiece model, nor a keras-hub preset's "
                "assets/tokenizer/vocabulary.txt)."
            )
        return cls(vocabulary_path, **{**read_tokenizer_settings(directory), **kwargs})

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                # The tokens, not a vocab.txt path: a saved .keras model
                # carries its vocabulary wherever it is loaded.
                "vocabulary": list(self._tokens),
                "lowercase": self.lowercase,
                "strip_accents": self.strip_accents,
                "tokenize_chinese_chars": self.tokenize_chinese_chars,
                "special_tokens_in_strings": self.special_tokens_in_strings,
                "max_input_chars_per_word": self.max_input_chars_per_word,
            }
        )
        return config

    def vocabulary_size(self):
        """Number of tokens in the vocabulary.

        Example:
        >>> BertTokenizer(list(SPECIAL_TOKENS)).vocabulary_size()
        5
        """
        return len(self._tokens)

    def get_vocabulary(self):
        """The tokens, in id order.

        Example:
        >>> BertTokenizer(list(SPECIAL_TOKENS)).get_vocabulary()[:2]
        ['[PAD]', '[UNK]']
        """
        return list(self._tokens)

    def id_to_token(self, token_id):
        """The token string of an id.

        Example:
        >>> BertTokenizer(list(SPECIAL_TOKENS)).id_to_token(1)
        '[UNK]'
        """
        if not 0 <= token_id < len(self._tokens):
            raise ValueError(
                f"token_id {token_id} is outside the vocabulary [0, {len(self._tokens)})."
            )
        return self._tokens[token_id]

    def token_to_id(self, token):
        """The id of a token string.

        Example:
        >>> BertTokenizer(list(SPECIAL_TOKENS)).token_to_id("[MASK]")
        4
        """
        if token not in self._token_ids:
            raise ValueError(f"Token {token!r} is not in the vocabulary.")
        return self._token_ids[token]

    @_without_autograph
    def call(self, inputs):
        return self.tokenize(inputs)

    @_without_autograph
    def tokenize(self, inputs):
        """Token ids of a string or of a batch of strings.

        Args:
            inputs: a string (gives a dense [tokens] int32 tensor) or a 1-D
                batch of strings (gives a [batch, (tokens)] int32
                `tf.RaggedTensor`).

        Example:
        >>> tokenizer = BertTokenizer(list(SPECIAL_TOKENS) + ["hi", "!"])
        >>> tokenizer(["Hi!", ""]).to_list()
        [[5, 6], []]
        """
        token_ids, _, _ = self._tokenize(inputs, unit=None)
        return token_ids

    def split_words(self, texts):
        """The words WordPiece would see: normalized, split on spaces and punctuation.

        Args:
            texts: a 1-D batch of strings.

        Returns:
            a [batch, (words)] string `tf.RaggedTensor`.

        Example:
        >>> tokenizer = BertTokenizer(list(SPECIAL_TOKENS))
        >>> tokenizer.split_words(["Héllo, World"]).to_list()
        [[b'hello', b',', b'world']]
        """
        # Invalid UTF-8 bytes become U+FFFD, which normalization drops: the
        # original decodes with errors="ignore", and so do the offsets.
        texts = tf.strings.unicode_transcode(
            tf.convert_to_tensor(texts), "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
        )
        return tf.strings.split(self._normalize_text(texts))

    @_without_autograph
    def tokenize_with_offsets(self, inputs, unit="byte"):
        """Token ids and where each token is in the original string.

        Args:
            inputs: a string or a 1-D batch of strings.
            unit: "byte" for offsets in UTF-8 bytes, "character" for offsets
                in Unicode code points (Python `str` indices).

        Returns:
            A tuple `(token_ids, starts, ends)`; `token_ids` are int32,
            `starts` and `ends` int64 with `ends` exclusive, so that
            `text[start:end]` is the text the token came from. [UNK] spans its
            whole word. Shapes as for `tokenize`.

        Example:
        >>> tokenizer = BertTokenizer(list(SPECIAL_TOKENS) + ["cafe", "!"])
        >>> ids, starts, ends = tokenizer.tokenize_with_offsets("Café!")
        >>> starts.numpy().tolist(), ends.numpy().tolist()
        ([0, 5], [5, 6])
        >>> tokenizer.tokenize_with_offsets("Café!", unit="character")[2]
        ... # doctest: +ELLIPSIS
        <tf.Tensor: ... numpy=array([4, 5])>
        """
        if unit not in ("byte", "character"):
            raise ValueError(f'unit must be "byte" or "character", got {unit!r}.')
        return self._tokenize(inputs, unit)

    @_without_autograph
    def detokenize(self, token_ids):
        """Text of token ids: tokens joined by spaces, "##" pieces glued on.

        Args:
            token_ids: int ids, [tokens] or [batch, (tokens)], ragged or dense.

        Returns:
            A string tensor with one rank fewer than `token_ids`.

        Example:
        >>> tokenizer = BertTokenizer(
        ...     list(SPECIAL_TOKENS) + ["time", "##out", "now"])
        >>> tokenizer.detokenize([5, 6, 7]).numpy()
        b'timeout now'
        """
        if not isinstance(token_ids, tf.RaggedTensor):
            token_ids = tf.convert_to_tensor(token_ids)
        tokens = tf.gather(self._vocabulary_tensor, token_ids)
        text = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        return tf.strings.regex_replace(text, " " + _escape_regex(_CONTINUATION_PREFIX), "")

    def _tokenize(self, inputs, unit):
        """Ids, starts, ends; `unit=None` skips the offsets (gives None)."""
        texts = tf.convert_to_tensor(inputs, dtype=tf.string)
        if texts.shape.rank == 0:
            outputs = self._tokenize(texts[tf.newaxis], unit)
            return tuple(None if output is None else output[0] for output in outputs)
        if texts.shape.rank != 1:
            raise ValueError(
                "BertTokenizer takes a string or a 1-D batch of strings, got "
                f"a tensor of shape {texts.shape}."
            )
        if unit is None:
            return self._token_ids_of_texts(texts), None, None
        if self.special_tokens_in_strings:
            return self._tokenize_around_special_tokens(texts, unit)
        return self._tokenize_texts(texts, unit)

    def _by_path(self, texts, tokenize_plain, tokenize_other):
        """Tokenizes plain texts with `tokenize_plain`, others with
        `tokenize_other`, and gives the rows back in the order of `texts`."""
        if self._plain_text_wordpiece is None:
            return tokenize_other(texts)
        # Most text is plain, and one tensorflow-text op does all the work
        # there. Masks, not Python branches, pick the path of each text, so
        # one graph serves every batch.
        is_plain = tf.strings.regex_full_match(texts, _PLAIN_TEXT)
        is_other = tf.logical_not(is_plain)
        return _stitch_rows(
            [
                (is_plain, tokenize_plain(tf.boolean_mask(texts, is_plain))),
                (is_other, tokenize_other(tf.boolean_mask(texts, is_other))),
            ]
        )

    def _token_ids_of_texts(self, texts):
        """Token ids of a [batch] of texts."""
        return self._by_path(texts, self._token_ids_of_plain_texts, self._token_ids_by_every_rule)

    def _token_ids_of_plain_texts(self, texts):
        """Token ids of a [batch] of plain texts (see `_PLAIN_TEXT`)."""
        if self.special_tokens_in_strings:
            texts = tf.strings.regex_replace(
                texts, _SPECIAL_TOKEN_INITIAL, self._special_token_rewrite
            )
        if self.lowercase:
            texts = tf.strings.lower(texts)
        # [batch, (tokens)]
        token_ids = self._plain_text_wordpiece.tokenize(texts)
        if not self.special_tokens_in_strings:
            return token_ids
        return token_ids.with_flat_values(
            tf.gather(self._plain_text_token_ids, token_ids.flat_values)
        )

    def _token_ids_by_every_rule(self, texts):
        """Token ids of a [batch] of texts, every rule in turn."""
        if self.special_tokens_in_strings:
            return self._tokenize_around_special_tokens(texts, unit=None)[0]
        return self._token_ids_of_normalized_words(texts)

    def _tokenize_around_special_tokens(self, texts, unit):
        """Tokenizes the text between special tokens; those map to their id."""
        # regex_split_with_offsets stops at a NUL; U+0001 is dropped just like
        # NUL and has the same length, so offsets stay valid.
        texts = tf.strings.regex_replace(texts, r"\x00", "\x01")
        # [batch, (segments)]
        segments, segment_starts, _ = tf_text.regex_split_with_offsets(
            texts,
            self._special_token_pattern,
            keep_delim_regex_pattern=self._special_token_pattern,
        )
        flat_segments = segments.flat_values
        is_special = tf.strings.regex_full_match(flat_segments, self._special_token_pattern)
        # Ordinary segments give their tokens, special ones none ...
        ordinary_segments = tf.where(is_special, "", flat_segments)
        if unit is None:
            token_ids = self._token_ids_of_normalized_words(ordinary_segments)
        else:
            token_ids, starts, ends = self._tokenize_texts(ordinary_segments, unit)
        # ... and special ones their own id (WordPiece finds the whole token
        # in the vocabulary), spanning the whole segment.
        special_ids = tf.RaggedTensor.from_row_lengths(
            tf.cast(
                self._wordpiece.tokenize(tf.boolean_mask(flat_segments, is_special)).flat_values,
                tf.int32,
            ),
            tf.cast(is_special, tf.int64),
            validate=False,
        )

        def regroup(values):  # [segments, (tokens)] -> [batch, (tokens)]
            return tf.RaggedTensor.from_row_splits(
                values, segments.row_splits, validate=False
            ).merge_dims(1, 2)

        token_ids = regroup(tf.concat([token_ids, special_ids], axis=1))
        if unit is None:
            return token_ids, None, None

        segment_lengths = tf.strings.length(
            flat_segments, unit="UTF8_CHAR" if unit == "character" else "BYTE"
        )
        special_starts = special_ids.with_flat_values(
            tf.zeros_like(special_ids.flat_values, tf.int64)
        )
        special_ends = special_ids.with_flat_values(
            tf.cast(tf.boolean_mask(segment_lengths, is_special), tf.int64)
        )
        starts = tf.concat([starts, special_starts], axis=1)
        ends = tf.concat([ends, special_ends], axis=1)

        segment_offsets = segment_starts.flat_values
        if unit == "character":
            segment_offsets = _character_offsets(texts, segment_starts)
        # Offsets inside a segment become offsets inside the whole text.
        starts += tf.expand_dims(segment_offsets, 1)
        ends += tf.expand_dims(segment_offsets, 1)
        return token_ids, regroup(starts), regroup(ends)

    def _token_ids_of_normalized_words(self, texts):
        """Token ids of a [batch] of texts, no special tokens, no offsets."""
        # [batch, (words)]
        words = self.split_words(texts)
        piece_ids, _, _ = self._wordpiece_with_offsets(words.flat_values)
        return tf.RaggedTensor.from_row_splits(
            tf.cast(piece_ids, tf.int32), words.row_splits, validate=False
        ).merge_dims(1, 2)

    def _tokenize_texts(self, texts, unit):
        """Token ids and offsets of a [batch] of texts, no special tokens."""
        return self._by_path(
            texts,
            self._tokenize_plain_texts,
            lambda other_texts: self._tokenize_texts_by_every_rule(other_texts, unit),
        )

    def _tokenize_plain_texts(self, texts):
        """Ids and offsets of a [batch] of plain texts, no special tokens."""
        if self.lowercase:
            texts = tf.strings.lower(texts)
        # Plain text keeps every byte in place, and a byte is a character:
        # these offsets hold for both units.
        return self._plain_text_wordpiece.tokenize_with_offsets(texts)

    def _tokenize_texts_by_every_rule(self, texts, unit):
        """`_tokenize_texts`, every rule in turn."""
        # Every character of the batch, as code points: [batch, (characters)].
        codepoints, character_starts = tf.strings.unicode_decode_with_offsets(
            texts, "UTF-8", errors="replace"
        )
        character_ends = character_starts.flat_values + tf.cast(
            _utf8_byte_length(codepoints.flat_values), tf.int64
        )
        if self.lowercase:
            codepoints = _with_final_sigmas(codepoints, self._normalize_text)
        normalized_texts, source_character = self._normalize(codepoints)

        # [batch, (words)]; offsets into the normalized texts. After
        # normalization " " is the only whitespace left.
        words, word_starts, _ = self._word_splitter.tokenize_with_offsets(normalized_texts)
        piece_ids, piece_starts, piece_ends = self._wordpiece_with_offsets(words.flat_values)
        # Normalized bytes are numbered across the batch, row after row.
        text_byte_offsets = tf.cumsum(
            tf.cast(tf.strings.length(normalized_texts), tf.int64),
            exclusive=True,
        )
        word_offsets = tf.cast(word_starts.flat_values, tf.int64) + tf.gather(
            text_byte_offsets, words.value_rowids()
        )
        piece_word_offsets = tf.gather(word_offsets, piece_ids.value_rowids())
        first_byte = piece_starts.flat_values + piece_word_offsets
        last_byte = piece_ends.flat_values - 1 + piece_word_offsets
        first_character = tf.gather(source_character, first_byte)
        last_character = tf.gather(source_character, last_byte)

        if unit == "byte":
            starts = tf.gather(character_starts.flat_values, first_character)
            ends = tf.gather(character_ends, last_character)
        else:
            text_character_offsets = tf.gather(codepoints.row_starts(), codepoints.value_rowids())
            starts = first_character - tf.gather(text_character_offsets, first_character)
            ends = last_character + 1 - tf.gather(text_character_offsets, last_character)

        def regroup(values):  # [pieces] -> [batch, (tokens)]
            return tf.RaggedTensor.from_row_splits(
                piece_ids.with_flat_values(values),
                words.row_splits,
                validate=False,
            ).merge_dims(1, 2)

        return (
            regroup(tf.cast(piece_ids.flat_values, tf.int32)),
            regroup(starts),
            regroup(ends),
        )

    def _normalize(self, codepoints):
        """Applies the character rules to [batch, (characters)] code points.

        Returns:
            normalized_texts: [batch] strings in which words are separated by
                spaces.
            source_character: for each byte of the normalized texts, counted
                across the batch, the index of the character in
                `codepoints.flat_values` that it comes from.
        """
        # Each distinct character is normalized once.
        unique_codepoints, unique_index = tf.unique(codepoints.flat_values)
        unique_characters = tf.strings.unicode_encode(unique_codepoints[:, tf.newaxis], "UTF-8")
        normalized_unique = tf.strings.unicode_decode(
            self._normalize_text(unique_characters), "UTF-8"
        )
        # [characters, (normalized code points)]
        normalized_characters = tf.gather(normalized_unique, unique_index)
        # [batch, (normalized code points)]
        normalized_codepoints = tf.RaggedTensor.from_row_splits(
            normalized_characters.flat_values,
            tf.gather(normalized_characters.row_splits, codepoints.row_splits),
            validate=False,
        )
        normalized_texts = tf.strings.unicode_encode(normalized_codepoints, "UTF-8")
        source_character = tf.repeat(
            normalized_characters.value_rowids(),
            _utf8_byte_length(normalized_characters.flat_values),
        )
        return normalized_texts, source_character

    def _normalize_text(self, texts):
        """Applies the character rules to strings: words end up between " ".

        Control characters are dropped, whitespace becomes " ", CJK
        ideographs and punctuation get spaces around them, accents are
        stripped and letters lower-cased. Each rule but the lower-casing of
        "Σ" (`_with_final_sigmas`) maps every character on its own, so the
        same function normalizes whole texts (`split_words`) or distinct
        characters one by one (`_normalize`).
        """
        texts = tf.strings.regex_replace(texts, _DROPPED_CHARACTER, "")
        texts = tf.strings.regex_replace(texts, _WHITESPACE, " ")
        if self.tokenize_chinese_chars:
            texts = tf.strings.regex_replace(texts, _CJK_IDEOGRAPH, r" \0 ")
        if self._strips_accents():
            texts = tf.strings.regex_replace(
                tf_text.normalize_utf8(texts, "NFD"), _NONSPACING_MARK, ""
            )
        if self.lowercase:
            # ICU, as Python's str.lower() in the original, gives "ς" for a
            # "Σ" that ends a word (`_with_final_sigmas`).
            texts = tf.strings.lower(texts, encoding="utf-8")
        return tf.strings.regex_replace(texts, _PUNCTUATION, r" \0 ")

    def _strips_accents(self):
        if self.strip_accents is None:
            return self.lowercase
        return self.strip_accents

    def _wordpiece_with_offsets(self, words):
        """WordPiece of [words] -> [words, (pieces)] ids and byte offsets."""
        word_lengths = tf.strings.length(words, unit="UTF8_CHAR")
        too_long = word_lengths > self.max_input_chars_per_word
        # WordPiece maps the unknown token itself to its id.
        words_or_unknown = tf.where(too_long, UNK_TOKEN, words)
        piece_ids, starts, ends = self._wordpiece.tokenize_with_offsets(words_or_unknown)
        # That one [UNK] spans the whole long word.
        piece_of_long_word = tf.gather(too_long, ends.value_rowids())
        word_byte_lengths = tf.gather(
            tf.cast(tf.strings.length(words), tf.int64), ends.value_rowids()
        )
        ends = ends.with_flat_values(
            tf.where(piece_of_long_word, word_byte_lengths, ends.flat_values)
        )
        return piece_ids, starts, ends


def _unused_control_character(tokens):
    """A control character that plain text and the tokens do not hold."""
    used = set("".join(tokens))
    for character in _CONTROL_CHARACTERS:
        if character not in used:
            return character
    raise ValueError(
        "The vocabulary holds every control character U+0001..U+0008, "
        "U+000E..U+001F; BertTokenizer needs one that no token holds."
    )


def _stitch_rows(masks_and_rows):
    """Puts the rows of several ragged tensors back in their places.

    Args:
        masks_and_rows: pairs `(mask, rows)`: `rows` holds, in order, the rows
            of the result where the [batch] bool `mask` is true. The masks
            cover every row of the result once. `rows` is a ragged tensor or
            a tuple of them (ids, starts, ends), alike in every pair.

    Returns:
        The [batch, (n)] ragged tensor, or a tuple of them.
    """
    positions = tf.concat([tf.where(mask)[:, 0] for mask, _ in masks_and_rows], axis=0)
    order = tf.math.invert_permutation(positions)

    def stitch(parts):
        return tf.gather(tf.concat(list(parts), axis=0), order)

    parts = [rows for _, rows in masks_and_rows]
    if isinstance(parts[0], tuple):
        return tuple(stitch(same_kind) for same_kind in zip(*parts))
    return stitch(parts)


def _with_final_sigmas(codepoints, normalize_text):
    """[batch, (characters)] code points, each "Σ" lower-cased as in its text.

    Lower-casing gives "ς" for a "Σ" that ends a word, "σ" elsewhere, so it
    cannot go one character at a time as the other rules do. Each "Σ" takes
    the sigma that `normalize_text` makes of it in the whole text: no other
    character lower-cases or decomposes to a sigma, so the texts' sigmas,
    in order, match the normalized texts' sigmas.
    """
    sigmas = tf.constant([ord(sigma) for sigma in "Σσς"], codepoints.dtype)
    is_sigma = tf.reduce_any(codepoints.flat_values[:, tf.newaxis] == sigmas, axis=-1)

    def resolved():
        texts = tf.strings.unicode_encode(codepoints, "UTF-8")
        lowered = tf.strings.regex_replace(normalize_text(texts), "[^σς]", "")
        return tf.tensor_scatter_nd_update(
            codepoints.flat_values,
            tf.where(is_sigma),
            tf.strings.unicode_decode(lowered, "UTF-8").flat_values,
        )

    flat = tf.cond(
        tf.reduce_any(codepoints.flat_values == ord("Σ")), resolved, lambda: codepoints.flat_values
    )
    return codepoints.with_flat_values(flat)


def _character_offsets(texts, byte_offsets):
    """Converts [batch, (n)] byte offsets into `texts` to character offsets.

    Returns the flat values of the converted offsets.
    """
    byte_lengths = tf.cast(byte_offsets.flat_values, tf.int32)
    lengths_before = tf.strings.length(
        tf.strings.substr(
            tf.gather(texts, byte_offsets.value_rowids()),
            tf.zeros_like(byte_lengths),
            byte_lengths,
        ),
        unit="UTF8_CHAR",
    )
    return tf.cast(lengths_before, tf.int64)


def _escape_regex(text):
    """Escapes `text` for use as a literal in an RE2 pattern."""
    return "".join("\\" + character if not character.isalnum() else character for character in text)


def _check_vocabulary(tokens, path=""):
    """Refuses a vocabulary without the special tokens or with a token twice, naming its file."""
    where = f" {path}" if path else ""
    missing = [token for token in SPECIAL_TOKENS if token not in tokens]
    if missing:
        raise ValueError(
            f"The vocabulary{where} must contain the special tokens {SPECIAL_TOKENS}, "
            f"but {missing} are missing" + (" (it is empty)." if not tokens else ".")
        )
    seen = set()
    for index, token in enumerate(tokens):
        if token in seen:
            raise ValueError(
                f"Token {token!r} appears twice in the vocabulary{where} (again at "
                f"line {index + 1}); every token needs a single id."
            )
        seen.add(token)
