"""Packs texts into BERT's inputs: [CLS] A [SEP] (B [SEP]), truncated, padded.

Like the tokenizer, the packing is in-graph TensorFlow built from core ops only
(tensorflow-text's `RoundRobinTrimmer` op is newer than the tensorflow-text
2.12.1 inside stock TF Serving), so it runs in `tf.data` under every Keras
backend and inside a SavedModel.
"""

import functools
import numbers

import keras
import numpy as np
import tensorflow as tf

# The methods have no Python control flow on tensors, so AutoGraph would only
# add seconds to every trace (tf.function, tf.data).
_without_autograph = tf.autograph.experimental.do_not_convert

TRUNCATION_STRATEGIES = ("longest_first", "round_robin")
PADDING_STRATEGIES = ("max_length", "longest")


def truncated_pair_lengths(length_a, length_b, budget):
    """How many tokens of each segment fit in `budget` tokens in all.

    This is the original BERT's `_truncate_seq_pair` (drop the last token of
    the longer segment, of the second on a tie, until the pair fits) in closed
    form. Giving the budget to the segments one token at a time in turn
    (round robin, first segment first) ends at the same lengths.

    Args:
        length_a: int tensor, tokens of the first segments.
        length_b: int tensor, tokens of the second segments.
        budget: most tokens the two may keep together.

    Returns:
        The kept lengths `(kept_a, kept_b)`.

    Example:
    >>> kept_a, kept_b = truncated_pair_lengths([2, 9, 5], [9, 2, 5], 7)
    >>> kept_a.numpy().tolist(), kept_b.numpy().tolist()
    ([2, 5, 4], [5, 2, 3])
    """
    length_a = tf.convert_to_tensor(length_a)
    length_b = tf.cast(length_b, length_a.dtype)
    budget = tf.cast(budget, length_a.dtype)
    # Trimming the longer one first keeps the shorter whole while it has at
    # most half of the budget; otherwise the first gets the odd token.
    kept_a = tf.minimum(length_a, tf.maximum(budget - length_b, (budget + 1) // 2))
    fits = length_a + length_b <= budget
    kept_a = tf.where(fits, length_a, kept_a)
    kept_b = tf.where(fits, length_b, budget - kept_a)
    return kept_a, kept_b


@keras.saving.register_keras_serializable(package="bert_keras")
class BertPreprocessor(keras.layers.Layer):
    """Tokenizes and packs one text or a pair of texts for a BERT backbone.

    Gives `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]` as a dict of int32
    tensors `token_ids`, `segment_ids` (0 for `[CLS] A [SEP]`, 1 for
    `B [SEP]`) and `padding_mask` (1 on tokens, 0 on padding), the inputs of
    `BertBackbone`. Pairs that are too long lose tokens from the end of the
    longer segment first (the original BERT's `_truncate_seq_pair`).

    Args:
        tokenizer: a `BertTokenizer`.
        sequence_length: length of the packed sequences, or `None` to pad each
            batch to its longest sequence without truncating.
        truncate: "longest_first" (the original's) or "round_robin" (one
            token to each segment in turn); for a pair of segments they keep
            the same tokens.
        padding: "max_length" pads every batch to `sequence_length`;
            "longest" pads each batch only to its longest sequence (still
            truncated at `sequence_length`), so short texts cost little.
        pad_to_multiple_of: with "longest", batch widths are rounded up to a
            multiple of it (at most `sequence_length`), so that backends that
            compile one program per shape compile few.
        **kwargs: arguments of `keras.layers.Layer`.

    Call arguments:
        inputs: a string or a batch of strings (a list or a tensor), or a
            tuple `(texts_a, texts_b)` of two such for pairs.

    Example:
    >>> from bert_keras.text.tokenizer import BertTokenizer
    >>> tokenizer = BertTokenizer(
    ...     ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi", "you"])
    >>> preprocessor = BertPreprocessor(tokenizer, sequence_length=6)
    >>> features = preprocessor((["hi you"], ["you"]))
    >>> features["token_ids"].numpy().tolist()
    [[2, 5, 6, 3, 6, 3]]
    >>> features["segment_ids"].numpy().tolist()
    [[0, 0, 0, 0, 1, 1]]
    >>> preprocessor("hi")["padding_mask"].numpy().tolist()
    [1, 1, 1, 0, 0, 0]
    >>> by_length = BertPreprocessor(tokenizer, 128, padding="longest", pad_to_multiple_of=4)
    >>> by_length(["hi", "hi you you"])["padding_mask"].numpy().tolist()
    [[1, 1, 1, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 0, 0, 0]]
    """

    def __init__(
        self,
        tokenizer,
        sequence_length=512,
        truncate="longest_first",
        padding="max_length",
        pad_to_multiple_of=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        # Inputs are strings: keep them as TensorFlow tensors.
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True
        self.built = True
        if truncate not in TRUNCATION_STRATEGIES:
            raise ValueError(f"truncate must be one of {TRUNCATION_STRATEGIES}, got {truncate!r}.")
        if padding not in PADDING_STRATEGIES:
            raise ValueError(f"padding must be one of {PADDING_STRATEGIES}, got {padding!r}.")
        if pad_to_multiple_of is not None and (
            not isinstance(pad_to_multiple_of, int) or pad_to_multiple_of < 1
        ):
            raise ValueError(
                f"pad_to_multiple_of must be a positive integer or None, got {pad_to_multiple_of!r}."
            )
        if sequence_length is not None and not isinstance(sequence_length, numbers.Integral):
            raise ValueError(
                f"sequence_length must be an integer or None, got {sequence_length!r}."
            )
        if sequence_length is not None and sequence_length < 3:
            raise ValueError(
                f"sequence_length must leave room for [CLS] and two [SEP], got {sequence_length}."
            )
        self.tokenizer = tokenizer
        self.sequence_length = sequence_length
        self.truncate = truncate
        self.padding = padding
        self.pad_to_multiple_of = pad_to_multiple_of

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "tokenizer": keras.layers.serialize(self.tokenizer),
                "sequence_length": self.sequence_length,
                "truncate": self.truncate,
                "padding": self.padding,
                "pad_to_multiple_of": self.pad_to_multiple_of,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        from bert_keras.text import tokenizer  # noqa: F401 (registers BertTokenizer for Keras)

        config["tokenizer"] = keras.layers.deserialize(config["tokenizer"])
        return cls(**config)

    @_without_autograph
    def call(self, inputs):
        features, _, _ = self._pack(inputs, unit=None)
        return features

    @_without_autograph
    def call_with_offsets(self, inputs, unit="byte"):
        """The features, and where each token is in its segment's text.

        Args:
            inputs: as for `call`.
            unit: "byte" (UTF-8) or "character" (code point) offsets.

        Returns:
            A tuple `(features, starts, ends)`; `starts` and `ends` are int64
            [batch, sequence] offsets into the token's own text (A or B),
            0 and 0 for [CLS], [SEP] and padding.

        Example:
        >>> from bert_keras.text.tokenizer import BertTokenizer
        >>> tokenizer = BertTokenizer(
        ...     ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi", "you"])
        >>> preprocessor = BertPreprocessor(tokenizer, sequence_length=5)
        >>> _, starts, ends = preprocessor.call_with_offsets("hi  you")
        >>> starts.numpy().tolist(), ends.numpy().tolist()
        ([0, 0, 4, 0, 0], [0, 2, 7, 0, 0])
        """
        return self._pack(inputs, unit)

    @_without_autograph
    def call_with_word_ids(self, words):
        """Packs sentences given as words, and says which word each token is from.

        Each word is tokenized on its own; a word the tokenizer turns into
        nothing (only control characters, say) becomes [UNK], so every word
        has a first piece. Truncation to `sequence_length` keeps the first
        tokens, as `call` does: a word cut at the end keeps the pieces that
        fit, and later words have none.

        Args:
            words: `[batch, (words)]` strings: a `tf.RaggedTensor`, a 2-D
                tensor, or a list of lists.

        Returns:
            A tuple `(features, word_ids)`: the features of `call`, and int32
            `[batch, sequence]` word ids, the index in its sentence of the
            word each token comes from, -1 for [CLS], [SEP] and padding.

        Example:
        >>> from bert_keras.text.tokenizer import BertTokenizer
        >>> tokenizer = BertTokenizer(
        ...     ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi", "you", "##s"])
        >>> preprocessor = BertPreprocessor(tokenizer, sequence_length=6)
        >>> features, word_ids = preprocessor.call_with_word_ids([["hi", "yous"]])
        >>> features["token_ids"].numpy().tolist(), word_ids.numpy().tolist()
        ([[2, 5, 6, 7, 3, 0]], [[-1, 0, 1, 1, -1, -1]])
        """
        words = ragged_words(words)
        pieces = word_pieces(self.tokenizer, words.values)  # [words, (pieces)]
        token_ids = words.with_values(pieces).merge_dims(1, 2)  # [batch, (tokens)]
        word_indices = tf.cast(tf.ragged.range(words.row_lengths()).values, tf.int32)
        # Counted from 1 so that the 0 that packing puts on [CLS], [SEP] and
        # padding becomes -1.
        word_numbers = token_ids.with_values(tf.repeat(word_indices + 1, pieces.row_lengths()))
        segments = self._truncate([(token_ids, word_numbers, word_numbers)])
        features, word_numbers, _ = self._assemble(segments, with_offsets=True)
        return features, word_numbers - 1

    def _pack(self, inputs, unit):
        texts = _segment_texts(inputs)
        if texts[0].shape.rank == 0:
            outputs = self._pack_batch([text[tf.newaxis] for text in texts], unit)
            return tuple(
                None if output is None else tf.nest.map_structure(lambda tensor: tensor[0], output)
                for output in outputs
            )
        return self._pack_batch(texts, unit)

    def _pack_batch(self, texts, unit):
        segments = []  # (token_ids, starts, ends), each [batch, (tokens)]
        for text in texts:
            if unit is None:
                segments.append((self.tokenizer.tokenize(text), None, None))
            else:
                segments.append(self.tokenizer.tokenize_with_offsets(text, unit=unit))
        segments = self._truncate(segments)
        return self._assemble(segments, with_offsets=unit is not None)

    def _truncate(self, segments):
        if self.sequence_length is None:
            return segments
        budget = self.sequence_length - len(segments) - 1
        lengths = [token_ids.row_lengths() for token_ids, _, _ in segments]
        if len(segments) == 1:
            kept = [tf.minimum(lengths[0], budget)]
        else:
            kept = truncated_pair_lengths(lengths[0], lengths[1], budget)
        return [
            tuple(None if part is None else _keep_first(part, kept_length) for part in segment)
            for segment, kept_length in zip(segments, kept)
        ]

    def _assemble(self, segments, with_offsets):
        """[CLS] A [SEP] (B [SEP]), segment ids, padding, as dense tensors."""
        batch_size = segments[0][0].nrows()

        def pack(parts, cls_value, sep_values):  # -> [batch, (sequence)]
            def column(value):  # [batch, 1]
                return tf.fill([batch_size, 1], tf.cast(value, parts[0].dtype))

            pieces = [column(cls_value)]
            for part, sep_value in zip(parts, sep_values):
                pieces += [part, column(sep_value)]
            return tf.concat(pieces, axis=1)

        segment_count = range(len(segments))
        token_ids = pack(
            [ids for ids, _, _ in segments],
            self.tokenizer.cls_token_id,
            [self.tokenizer.sep_token_id for _ in segment_count],
        )
        segment_ids = pack(
            [tf.ones_like(ids) * index for index, (ids, _, _) in enumerate(segments)],
            0,
            list(segment_count),
        )
        # An empty batch still gets the width of [CLS] and the [SEP]s, which
        # every packed text has and the backbone reads ([CLS] for pooling).
        dense = functools.partial(
            _dense,
            sequence_length=self.sequence_length,
            padding=self.padding,
            min_length=len(segments) + 1,
            pad_to_multiple_of=self.pad_to_multiple_of,
        )
        features = {
            "token_ids": dense(token_ids, self.tokenizer.pad_token_id),
            "segment_ids": dense(segment_ids, 0),
            "padding_mask": dense(tf.ones_like(token_ids), 0),
        }
        if not with_offsets:
            return features, None, None
        # [CLS] and [SEP] span no text.
        starts = pack([s for _, s, _ in segments], 0, [0 for _ in segment_count])
        ends = pack([e for _, _, e in segments], 0, [0 for _ in segment_count])
        return features, dense(starts, 0), dense(ends, 0)


def _dense(ragged, fill, sequence_length, padding, min_length, pad_to_multiple_of):
    """`[batch, (length)]` -> `[batch, sequence_length]`, or to the longest row ("longest")."""
    if padding == "max_length":
        return ragged.to_tensor(fill, shape=[None, sequence_length])
    width = tf.maximum(tf.cast(ragged.bounding_shape(1), tf.int32), min_length)
    if pad_to_multiple_of:
        width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
        if sequence_length is not None:
            width = tf.minimum(width, sequence_length)
    return ragged.to_tensor(fill, shape=tf.stack([ragged.nrows(out_type=tf.int32), width]))


def _segment_texts(inputs):
    """The string tensors of the segments: a tuple holds segments, anything
    else (a list too) is one segment's texts."""
    if not isinstance(inputs, tuple):
        texts = tf.convert_to_tensor(inputs, tf.string)
        if texts.shape.rank == 2:
            raise ValueError(
                f"BertPreprocessor got texts of shape {texts.shape}; it packs a string, a batch "
                "of strings, or a pair of them as a tuple (texts_a, texts_b). For a list of "
                "pairs, pass tuple(zip(*pairs))."
            )
        return [texts]
    if len(inputs) not in (1, 2):
        raise ValueError(
            "BertPreprocessor packs a text or a pair (texts_a, texts_b), got "
            f"a sequence of {len(inputs)}."
        )
    texts = [tf.convert_to_tensor(text, tf.string) for text in inputs]
    if len(texts) == 1:
        return texts
    return _with_equal_batch_sizes(*texts)


def _with_equal_batch_sizes(texts_a, texts_b):
    """`[texts_a, texts_b]`, checked to hold as many texts each."""
    sizes = f"texts_a {_describe_texts(texts_a)} but texts_b {_describe_texts(texts_b)}"
    if texts_a.shape.rank != texts_b.shape.rank:
        raise ValueError(f"BertPreprocessor packs pairs of texts: {sizes}.")
    if texts_a.shape.rank != 1:
        return [texts_a, texts_b]
    size_a, size_b = texts_a.shape[0], texts_b.shape[0]
    if size_a is not None and size_b is not None:
        if size_a != size_b:
            raise ValueError(f"BertPreprocessor packs pairs of texts: {sizes}.")
        return [texts_a, texts_b]
    # Batch sizes known only when the graph runs.
    check = tf.debugging.assert_equal(
        tf.shape(texts_a)[0],
        tf.shape(texts_b)[0],
        message="BertPreprocessor packs pairs of texts: texts_a and texts_b hold different "
        "numbers of texts",
    )
    with tf.control_dependencies([check]):
        return [tf.identity(texts_a), tf.identity(texts_b)]


def _describe_texts(texts):
    if texts.shape.rank == 0:
        return "is a single string"
    if texts.shape.rank == 1 and texts.shape[0] is not None:
        return f"has {texts.shape[0]} texts"
    return f"has shape {texts.shape}"


def _keep_first(ragged, lengths):
    """The first `lengths[i]` values of each row i of a 2-D ragged tensor."""
    row_ids = ragged.value_rowids()
    positions = tf.range(tf.shape(row_ids, tf.int64)[0]) - tf.gather(ragged.row_starts(), row_ids)
    kept = positions < tf.gather(tf.cast(lengths, tf.int64), row_ids)
    return tf.RaggedTensor.from_row_lengths(
        tf.boolean_mask(ragged.flat_values, kept),
        tf.minimum(ragged.row_lengths(), tf.cast(lengths, tf.int64)),
        validate=False,
    )


def word_pieces(tokenizer, words):
    """The word-piece ids of each word on its own; [UNK] for a word the tokenizer drops.

    A word of only control characters, say, has no pieces; [UNK] gives it a
    first piece to carry its tag.

    Args:
        tokenizer: a `BertTokenizer`.
        words: `[words]` strings.

    Returns:
        int32 `[words, (pieces)]` `tf.RaggedTensor`, at least one piece a word.

    Example:
    >>> from bert_keras.text.tokenizer import BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi", "##s"])
    >>> word_pieces(tokenizer, ["his", "\\x00"]).to_list()
    [[5, 6], [1]]
    """
    pieces = tokenizer.tokenize(words)  # [words, (pieces)]
    no_pieces = tf.cast(tf.equal(pieces.row_lengths(), 0), tf.int64)
    unknown = tf.RaggedTensor.from_row_lengths(
        tf.fill([tf.reduce_sum(no_pieces)], tf.cast(tokenizer.unk_token_id, pieces.dtype)),
        no_pieces,
    )
    return tf.concat([pieces, unknown], axis=1)


def ragged_words(words):
    """Sentences of words as a `[batch, (words)]` string `tf.RaggedTensor`.

    Args:
        words: a `tf.RaggedTensor`, a 2-D tensor or array, or a list of
            lists of strings.

    Raises:
        ValueError: `words` is not `[batch, (words)]`.

    Example:
    >>> ragged_words([["EU", "rejects"], ["Peter"]]).row_lengths().numpy().tolist()
    [2, 1]
    """
    ragged = ragged_rows(words, tf.string)
    if ragged.shape.rank != 2 or ragged.dtype != tf.string:
        raise ValueError(
            "Words must be [batch, (words)] strings (a list of lists of words), got "
            f"{ragged.dtype.name} of shape {ragged.shape}."
        )
    return ragged


def ragged_rows(rows, dtype=None):
    """`[batch, (values)]` rows as a `tf.RaggedTensor`: from one, a 2-D tensor or array, or lists.

    Example:
    >>> ragged_rows([[1, 2], [3]]).row_lengths().numpy().tolist()
    [2, 1]
    >>> ragged_rows(np.array([[1, 2], [3]], dtype=object)).row_lengths().numpy().tolist()
    [2, 1]
    """
    if isinstance(rows, tf.RaggedTensor):
        return rows
    if _is_array_of_rows(rows):
        rows = [list(row) for row in rows]
    if isinstance(rows, list):
        return tf.ragged.constant(rows, dtype=dtype)
    return tf.RaggedTensor.from_tensor(tf.convert_to_tensor(rows, dtype))


def _is_array_of_rows(rows):
    """Whether `rows` is how numpy holds rows of many lengths: a 1-D object array of sequences."""
    return (
        isinstance(rows, np.ndarray)
        and rows.dtype.kind == "O"
        and rows.ndim == 1
        and all(isinstance(row, (list, np.ndarray)) for row in rows)
    )


def packed_rows(pieces, fill, width):
    """Each row's pieces one after the other, padded with `fill` to `width`: `[rows, width]`.

    Args:
        pieces: values and `[rows, (values)]` ragged tensors, in order; a
            value is one column of every row (e.g. [CLS]). The first ragged
            piece gives the dtype and the number of rows.
        fill: the value of padding.
        width: the rows' length, at least the longest row's.

    Example:
    >>> window = tf.ragged.constant([[7, 8], [9]], tf.int64)
    >>> packed_rows((101, window, 102), fill=0, width=5).numpy().tolist()
    [[101, 7, 8, 102, 0], [101, 9, 102, 0, 0]]
    """
    ragged = next(piece for piece in pieces if isinstance(piece, tf.RaggedTensor))
    dtype, count = ragged.dtype, ragged.nrows()

    def column(value):
        if isinstance(value, tf.RaggedTensor):
            return tf.cast(value, dtype)
        return tf.RaggedTensor.from_tensor(tf.fill([count, 1], tf.cast(value, dtype)))

    rows = tf.concat([column(piece) for piece in pieces], axis=1)
    return rows.to_tensor(tf.cast(fill, dtype), shape=tf.stack([count, width]))


def on_first_pieces(word_ids, word_values, fill):
    """Puts each word's value on its first token; `fill` on every other position.

    Args:
        word_ids: int `[batch, sequence]`, as `BertPreprocessor.call_with_word_ids`
            gives (-1 on [CLS], [SEP] and padding).
        word_values: `[batch, (words)]` values, one per word (ragged or dense).
        fill: the value of the other positions.

    Returns:
        `[batch, sequence]` values of `word_values`' dtype.

    Example:
    >>> word_ids = tf.constant([[-1, 0, 1, 1, -1, -1]])
    >>> on_first_pieces(word_ids, tf.ragged.constant([[7, 8]]), -100).numpy().tolist()
    [[-100, 7, 8, -100, -100, -100]]
    """
    if isinstance(word_values, tf.RaggedTensor):
        word_values = word_values.to_tensor(tf.cast(fill, word_values.dtype))
    word_values = tf.convert_to_tensor(word_values)  # [batch, max_words]
    fill = tf.cast(fill, word_values.dtype)
    word_ids = tf.cast(word_ids, tf.int32)
    previous = tf.pad(word_ids[:, :-1], [[0, 0], [1, 0]], constant_values=-1)
    first_piece = tf.logical_and(word_ids >= 0, tf.not_equal(word_ids, previous))
    # One more column of `fill` for every position that is not a first piece.
    with_fill = tf.pad(word_values, [[0, 0], [0, 1]], constant_values=fill)
    fill_column = tf.shape(with_fill)[1] - 1
    return tf.gather(with_fill, tf.where(first_piece, word_ids, fill_column), batch_dims=1)
