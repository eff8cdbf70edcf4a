"""Pretraining batches straight from text, masked afresh on every pass.

RoBERTa (Liu et al. 2019, §4.1) draws new masks every epoch instead of fixing
`dupe_factor` maskings in files. This pipeline does that in `tf.data`, with
tensorflow-text's `RandomItemSelector`, `MaskValuesChooser` and
`mask_language_model`: the masks come from TensorFlow's stateful random ops,
so each pass over the dataset (each epoch) sees other masks, and two runs see
other masks too unless `tf.random.set_seed` was called first.

Pairs are simpler than the original's chunks: segment A is a line and
segment B the line after it in the same document (label 0) or, with
probability 1/2, a line drawn from a shuffle buffer of
`RANDOM_NEXT_BUFFER` lines of the corpus (label 1), so that it comes from
another document as the original's random next does, in any corpus of more
than a few documents; the pair is trimmed round-robin to fit. The output has the layout of
`pretraining_records.pretraining_dataset`, so the same model trains on either.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from bert_keras.data.length_batching import PAD_TO_MULTIPLE_OF
from bert_keras.data.length_batching import trimmed_batch

# Lines a random next is drawn from: the next lines of the file would come
# from A's own document.
RANDOM_NEXT_BUFFER = 10_000
# A line of nothing but Unicode whitespace (a no-break space, say) and
# characters the tokenizer drops: no sentence, but a break between documents,
# as `str.strip()` makes it in tools.create_pretraining_data.
_BLANK_LINE = r"[\pZ\p{Cc}\p{Cf}\x{FFFD}]*"


def _sentence_pairs(file_pattern):
    """(A, B) pairs of consecutive non-blank lines (`_BLANK_LINE`) of one document."""
    patterns = file_pattern.split(",") if isinstance(file_pattern, str) else file_pattern
    paths = sorted(path for pattern in patterns for path in tf.io.gfile.glob(pattern))
    if not paths:
        raise FileNotFoundError(f"No file matches {file_pattern!r}.")
    # Each file on its own, so no pair spans two files.
    files = tf.data.Dataset.from_tensor_slices(paths)

    def pairs_of_file(path):
        lines = tf.data.TextLineDataset(path)
        return tf.data.Dataset.zip((lines, lines.skip(1))).filter(
            lambda first, second: tf.logical_not(
                tf.strings.regex_full_match(first, _BLANK_LINE)
                | tf.strings.regex_full_match(second, _BLANK_LINE)
            )
        )

    return files.flat_map(pairs_of_file)


def _check_one_batch(pairs, batch_size, file_pattern):
    """Raises ValueError where the files give no whole batch of sentence pairs (read up to one)."""
    found = int(pairs.take(batch_size).reduce(0, lambda count, _: count + 1))
    if found < batch_size:
        raise ValueError(
            f"{file_pattern!r} gives {found} sentence pairs, fewer than batch_size={batch_size}: "
            "a pair is two consecutive non-blank lines of one document (a sentence a line, a "
            "blank line between documents), so one-line documents give none."
        )


def dynamic_masking_dataset(
    file_pattern,
    tokenizer,
    max_seq_length=128,
    max_predictions_per_seq=20,
    masked_lm_prob=0.15,
    batch_size=32,
    shuffle_buffer=None,
    pad_to_multiple_of=PAD_TO_MULTIPLE_OF,
):
    """Masked pretraining batches from text files (a sentence a line).

    Args:
        file_pattern: a glob, a comma-separated list of globs, or a list;
            one sentence per line, a blank line between documents.
        tokenizer: a `bert_keras.text.tokenizer.BertTokenizer`.
        max_seq_length: padded length, [CLS] and both [SEP] included.
        max_predictions_per_seq: at most this many masked positions.
        masked_lm_prob: fraction of the tokens masked.
        batch_size: examples per batch (the last, smaller one is dropped).
        shuffle_buffer: pairs to shuffle in, or None to keep file order.
        pad_to_multiple_of: each batch is as long as its longest pair,
            rounded up to a multiple of this; None pads to `max_seq_length`.

    Returns:
        A `tf.data.Dataset` of `(features, labels)` as in
        `pretraining_records.pretraining_dataset`.

    Example:
    >>> import os, tempfile
    >>> from bert_keras.text.tokenizer import BertTokenizer
    >>> directory = tempfile.mkdtemp()
    >>> _ = open(os.path.join(directory, "corpus.txt"), "w").write(
    ...     "the cat sat .\\nthe dog ran .\\nthe cat ran .\\n")
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    ...                            "the", "cat", "dog", "sat", "ran", "."])
    >>> dataset = dynamic_masking_dataset(os.path.join(directory, "*.txt"), tokenizer,
    ...                                   max_seq_length=16, max_predictions_per_seq=3,
    ...                                   batch_size=2)
    >>> features, labels = next(iter(dataset))
    >>> features["token_ids"].shape, features["masked_positions"].shape
    (TensorShape([2, 16]), TensorShape([2, 3]))
    """
    if not 0 < masked_lm_prob < 1:
        raise ValueError(f"masked_lm_prob is {masked_lm_prob} but must be in (0, 1).")
    if max_seq_length < 5:
        raise ValueError(f"max_seq_length is {max_seq_length} but must be at least 5.")
    pairs = _sentence_pairs(file_pattern)
    _check_one_batch(pairs, batch_size, file_pattern)
    if shuffle_buffer:
        pairs = pairs.shuffle(shuffle_buffer)
    special_ids = [tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id]
    item_selector = tf_text.RandomItemSelector(
        max_selections_per_batch=max_predictions_per_seq,
        selection_rate=masked_lm_prob,
        unselectable_ids=special_ids,
    )
    values_chooser = tf_text.MaskValuesChooser(
        tokenizer.vocabulary_size(),
        tokenizer.mask_token_id,
        mask_token_rate=0.8,
        random_token_rate=0.1,
    )
    trimmer = tf_text.RoundRobinTrimmer(max_seq_length - 3)

    def to_model_inputs(first, second, random_second):
        is_random_next = tf.random.uniform(tf.shape(first)) < 0.5
        segment_a = tokenizer.tokenize(first)  # [batch, (tokens)]
        segment_b = tokenizer.tokenize(tf.where(is_random_next, random_second, second))
        segment_a, segment_b = trimmer.trim([segment_a, segment_b])
        token_ids, segment_ids = tf_text.combine_segments(
            [segment_a, segment_b], tokenizer.cls_token_id, tokenizer.sep_token_id
        )
        masked_ids, positions, labels = tf_text.mask_language_model(
            token_ids, item_selector, values_chooser
        )
        token_ids, padding_mask = tf_text.pad_model_inputs(masked_ids, max_seq_length)
        segment_ids, _ = tf_text.pad_model_inputs(segment_ids, max_seq_length)
        positions, weights = tf_text.pad_model_inputs(positions, max_predictions_per_seq)
        labels, _ = tf_text.pad_model_inputs(labels, max_predictions_per_seq)
        features = {
            "token_ids": tf.cast(token_ids, tf.int32),  # [batch, seq]
            "segment_ids": tf.cast(segment_ids, tf.int32),
            "padding_mask": tf.cast(padding_mask, tf.int32),
            "masked_positions": tf.cast(positions, tf.int32),  # [batch, predictions]
        }
        targets = {
            "masked_lm_ids": tf.cast(labels, tf.int32),
            "masked_lm_weights": tf.cast(weights, tf.float32),
            "next_sentence_labels": tf.cast(is_random_next, tf.int32),  # [batch]
        }
        if pad_to_multiple_of:
            features = trimmed_batch(features, pad_to_multiple_of)
        return features, targets

    random_seconds = pairs.map(lambda first, second: second).repeat().shuffle(RANDOM_NEXT_BUFFER)
    return (
        tf.data.Dataset.zip(pairs, random_seconds)
        .map(lambda pair, random_second: (*pair, random_second))
        .batch(batch_size, drop_remainder=True)
        .map(to_model_inputs, num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )
