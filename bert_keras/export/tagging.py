"""The serving signatures of a tagger: text in, a tag for every word out.

`tasks.tag --do_predict` in one TensorFlow graph: each word (a
whitespace-separated piece of the text, as in a CoNLL file) is tokenized on
its own, [UNK] standing for a word of no pieces; a sentence too long for one
sequence becomes the overlapping windows of
`bert_keras.finetuning.word_windows.window_bounds`, each starting about half
a window after the previous one; every window of the batch runs through the
model at once; and each word takes the tag of its first piece in the window
that gives it the most context on its shorter side (the first such window on
a tie). No word is left out.
"""

import dataclasses

import tensorflow as tf
import tensorflow_text as tf_text

from bert_keras.export.signatures import REQUIRED_BACKEND
from bert_keras.export.signatures import check_backend
from bert_keras.export.signatures import checked_shape
from bert_keras.export.signatures import ids_signature
from bert_keras.export.signatures import text_specs
from bert_keras.text.preprocessor import packed_rows
from bert_keras.text.preprocessor import word_pieces

__all__ = ["REQUIRED_BACKEND", "sentence_windows", "tagger_signatures"]
# What Python's `str.split()` splits words at, as CoNLL readers do: ASCII whitespace,
# the information separators U+001C..U+001F, U+0085 and Unicode's separators (Z*).
# tensorflow-text's WhitespaceTokenizer ends a word inside a multi-byte space.
WORD_SEPARATORS = r"[\t\n\x0b\x0c\r\x1c-\x1f\x{85}\p{Z}]+"
# Stands for the piece offsets past a sentence's end, so that searches stop there.
_PAST_THE_END = 2**62


def tagger_signatures(model, preprocessor, tag_names):
    """`serving_default` and `serve_ids` of a `BertTokenClassifier`: a tag per word.

    Words are the text's whitespace-separated pieces, as in a CoNLL file;
    each is tagged on its first word piece, in the window of
    `preprocessor.sequence_length` tokens that `tasks.tag` tags it in (see
    the module docstring), so every word gets the tag that program writes.
    `serving_default` takes `text` strings `[batch]` and gives, per word
    `[batch, words]` padded to the batch's most words, `words` and `tags`
    strings, `start` and `end` int64 byte offsets into the text and `mask`
    int32 (1 for a word, 0 for padding). Invalid UTF-8 is first replaced by
    U+FFFD, and offsets count in the replaced text. `serve_ids` gives
    `logits` `[batch, length, tags]`.

    Args:
        model: a `BertTokenClassifier`.
        preprocessor: a `BertPreprocessor`: its tokenizer, and its
            `sequence_length` as the tokens of a window.
        tag_names: the names of the model's classes, in order.

    Raises:
        ValueError: a sequence length with no room for [CLS], a piece and [SEP].

    Example:
    >>> import tensorflow as tf
    >>> from bert_keras.models.bert_backbone import BertBackbone
    >>> from bert_keras.models.bert_token_classifier import BertTokenClassifier
    >>> from bert_keras.text.preprocessor import BertPreprocessor
    >>> from bert_keras.text.tokenizer import BertTokenizer
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
    >>> preprocessor = BertPreprocessor(tokenizer, sequence_length=4, padding="longest")
    >>> model = BertTokenClassifier(BertBackbone(6, 1, 2, 8, 16), num_classes=2)
    >>> serve = tagger_signatures(model, preprocessor, ["O", "B-X"])["serving_default"]
    >>> # Windows hold two words: the first text is tagged in four windows.
    >>> outputs = serve(tf.constant(["hi hi  hi hi hi", ""]))
    >>> outputs["mask"].numpy().tolist(), outputs["start"].numpy().tolist()
    ([[1, 1, 1, 1, 1], [0, 0, 0, 0, 0]], [[0, 3, 7, 10, 13], [0, 0, 0, 0, 0]])
    >>> all(tag in (b"O", b"B-X") for tag in outputs["tags"].numpy()[0])
    True
    """
    check_backend()
    tokenizer, sequence_length = preprocessor.tokenizer, preprocessor.sequence_length
    if sequence_length is None or sequence_length < 3:
        raise ValueError(
            f"sequence_length is {sequence_length} but a tagger's windows need room for [CLS], "
            "a word piece and [SEP]: at least 3."
        )
    names = tf.constant(tag_names)

    @tf.function(input_signature=text_specs("text"), autograph=False)
    def serve_text(text):
        text = checked_shape(text, [None])
        text = tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace")
        words, starts, ends = _words_with_offsets(text)
        windows = _word_windows(tokenizer, words, budget=sequence_length - 2)
        logits = model(windows.features, training=False)  # [windows, length, tags]
        tag_ids = tf.gather_nd(tf.argmax(logits, axis=-1), windows.first_pieces)  # [words]
        return {
            "words": words.to_tensor(""),
            "tags": words.with_flat_values(tf.gather(names, tag_ids)).to_tensor(""),
            "start": starts.to_tensor(0),
            "end": ends.to_tensor(0),
            "mask": tf.ones_like(starts, tf.int32).to_tensor(0),
        }

    return {
        "serving_default": serve_text,
        "serve_ids": ids_signature(model, lambda logits: {"logits": logits}),
    }


def _words_with_offsets(text):
    """`[batch, (words)]` words of `text` split at `WORD_SEPARATORS`, with byte offsets."""
    # tensorflow-text's regex split stops at a NUL byte; U+0001 stands in for it while splitting.
    separable = tf.strings.regex_replace(text, r"\x00", "\x01")
    _, starts, ends = tf_text.regex_split_with_offsets(separable, WORD_SEPARATORS)
    rows = tf.gather(text, starts.value_rowids())
    flat_words = tf.strings.substr(rows, starts.flat_values, ends.flat_values - starts.flat_values)
    return starts.with_flat_values(flat_words), starts, ends


def sentence_windows(piece_counts, budget):
    """`bert_keras.finetuning.word_windows.window_bounds` of a batch of sentences, in the graph.

    Args:
        piece_counts: int64 `[batch, (words)]` `tf.RaggedTensor`, the word
            pieces of each word, at least 1 (a word with more than `budget`
            counts as `budget`).
        budget: pieces a window holds, at least 1.

    Returns:
        `(firsts, ends, owners)`, int64 `tf.RaggedTensor`s: the first word
        of each window and the word past its last `[batch, (windows)]`, in
        order; and for each word the index among its sentence's windows of
        the window that predicts it `[batch, (words)]`. A sentence of no
        words has the one window (0, 0).

    Example:
    >>> import tensorflow as tf
    >>> counts = tf.ragged.constant([[1, 1, 1, 1, 1, 1], [9, 1], []], tf.int64)
    >>> firsts, ends, owners = sentence_windows(counts, 4)
    >>> firsts.to_list(), ends.to_list()
    ([[0, 2], [0, 1], [0]], [[4, 6], [1, 2], [0]])
    >>> owners.to_list()
    [[0, 0, 0, 1, 1, 1], [0, 1], []]
    """
    lengths = piece_counts.row_lengths()  # [batch]
    offsets = _piece_offsets(piece_counts, budget)  # [batch, words + 2]
    ends, nexts = _window_steps(offsets, lengths, budget)  # [batch, words + 1]
    firsts = _window_starts(ends, nexts, lengths)  # [batch, (windows)]
    ends = firsts.with_flat_values(
        tf.gather_nd(ends, tf.stack([firsts.value_rowids(), firsts.flat_values], axis=1))
    )
    return firsts, ends, _owners(offsets, firsts, ends, lengths)


def _piece_offsets(piece_counts, budget):
    """int64 `[batch, words + 2]`: the pieces before each word and past the last,
    then `_PAST_THE_END`."""
    counts = tf.ragged.map_flat_values(tf.minimum, piece_counts, tf.cast(budget, tf.int64))
    counts = counts.to_tensor(0)  # [batch, words]
    offsets = tf.pad(tf.cumsum(counts, axis=1), [[0, 0], [1, 1]])  # [batch, words + 2]
    word = tf.range(tf.shape(offsets, out_type=tf.int64)[1])
    past_the_end = word[tf.newaxis, :] > piece_counts.row_lengths()[:, tf.newaxis]
    return tf.where(past_the_end, tf.constant(_PAST_THE_END, tf.int64), offsets)


def _window_steps(offsets, lengths, budget):
    """For a window starting at each word `[batch, words + 1]`: the word past its
    last, and where the next window starts (`window_bounds`' rule)."""
    starts = offsets[:, :-1]  # the pieces before each word that may start a window
    last = lengths[:, tf.newaxis]

    def search(values, side):
        return tf.searchsorted(offsets, values, side=side, out_type=tf.int64)

    def at(words):
        return tf.gather(offsets, words, batch_dims=1)

    ends = tf.minimum(search(starts + budget, "right") - 1, last)
    # Half a window further on, but early enough that word `end` fits; the
    # offsets are integers, so a half is rounded up.
    halfway = search((starts + at(ends) + 1) // 2, "left")
    fitting = search(at(ends + 1) - budget, "left")
    word = tf.range(tf.shape(starts, out_type=tf.int64)[1])[tf.newaxis, :]
    nexts = tf.minimum(tf.maximum(tf.maximum(halfway, fitting), word + 1), last)
    return ends, nexts


def _window_starts(ends, nexts, lengths):
    """int64 `[batch, (windows)]`: each sentence's windows' first words, from word 0
    on until a window reaches the sentence's end."""
    batch_size = tf.shape(lengths)[0]

    def step(starts, current, more):
        starts = tf.concat([starts, tf.where(more, current, -1)[:, tf.newaxis]], axis=1)
        more = more & (tf.gather(ends, current, batch_dims=1) < lengths)
        return starts, tf.where(more, tf.gather(nexts, current, batch_dims=1), current), more

    starts, _, _ = tf.while_loop(
        lambda starts, current, more: tf.reduce_any(more),
        step,
        (
            tf.zeros([batch_size, 0], tf.int64),
            tf.zeros([batch_size], tf.int64),
            tf.ones([batch_size], tf.bool),
        ),
        shape_invariants=(
            tf.TensorShape([None, None]),
            tf.TensorShape([None]),
            tf.TensorShape([None]),
        ),
    )
    return tf.ragged.boolean_mask(starts, starts >= 0)


def _owners(offsets, firsts, ends, lengths):
    """int64 `[batch, (words)]`: the window each word takes its prediction from.

    The one of most context on the word's shorter side, the first on a tie.
    """
    sentence_words = tf.ragged.range(firsts.flat_values, ends.flat_values)  # [windows, (words)]
    window = sentence_words.value_rowids()  # [pairs]: every word of every window
    word = sentence_words.flat_values
    sentence = tf.gather(firsts.value_rowids(), window)

    def at(words):
        return tf.gather_nd(offsets, tf.stack([sentence, words], axis=1))

    context = tf.minimum(
        at(word) - at(tf.gather(firsts.flat_values, window)),
        at(tf.gather(ends.flat_values, window)) - at(word + 1),
    )
    batch_word = tf.gather(tf.cumsum(lengths, exclusive=True), sentence) + word
    num_words = tf.reduce_sum(lengths)
    most = tf.math.unsorted_segment_max(context, batch_word, num_words)
    owner = tf.math.unsorted_segment_min(
        tf.where(tf.equal(context, tf.gather(most, batch_word)), window, tf.int64.max),
        batch_word,
        num_words,
    )  # [words]
    sentence_of_word = tf.repeat(tf.range(tf.size(lengths, tf.int64)), lengths)
    first_window = tf.gather(firsts.row_starts(), sentence_of_word)
    return tf.RaggedTensor.from_row_lengths(owner - first_window, lengths)


@dataclasses.dataclass
class _Windows:
    """The packed windows of a batch of texts, and where each word's tag is.

    Attributes:
        features: the model's inputs, int32 `[windows, length]`.
        first_pieces: int64 `[words, 2]`, over the batch's words: the window
            and the position whose logits tag the word.
    """

    features: dict
    first_pieces: tf.Tensor


def _word_windows(tokenizer, words, budget):
    """`_Windows` as `bert_keras.finetuning.word_windows.word_windows` packs them."""
    pieces = word_pieces(tokenizer, words.flat_values)[:, :budget]  # [words, (pieces)]
    kept = pieces.row_lengths()  # [words]
    firsts, ends, owners = sentence_windows(words.with_flat_values(kept), budget)
    sentence_starts = tf.gather(words.row_starts(), firsts.value_rowids())  # [windows]
    window_words = tf.ragged.range(
        firsts.flat_values + sentence_starts, ends.flat_values + sentence_starts
    )  # [windows, (words)], indices over the batch's words
    tokens = tf.gather(pieces, window_words).merge_dims(1, 2)  # [windows, (pieces)]
    # Each word's owner window, its first word, and the pieces before the word there.
    owner = owners.flat_values + tf.gather(firsts.row_starts(), owners.value_rowids())
    owner_first = tf.gather(firsts.flat_values + sentence_starts, owner)
    pieces_before = tf.cumsum(kept, exclusive=True)
    position = 1 + pieces_before - tf.gather(pieces_before, owner_first)  # after [CLS]
    return _Windows(
        _single_segment_features(tokens, tokenizer),
        first_pieces=tf.stack([owner, position], axis=1),
    )


def _single_segment_features(tokens, tokenizer):
    """`[CLS] pieces [SEP]` features of `[windows, (pieces)]`, padded to the longest."""
    lengths = tokens.row_lengths() + 2
    width = tf.reduce_max(tf.concat([lengths, [2]], axis=0))
    cls, sep, pad = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id
    token_ids = packed_rows((cls, tokens, sep), pad, width)
    return {
        "token_ids": tf.cast(token_ids, tf.int32),
        "segment_ids": tf.zeros_like(token_ids, tf.int32),
        "padding_mask": tf.cast(tf.sequence_mask(lengths, width), tf.int32),
    }
