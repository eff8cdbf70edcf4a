"""The pretraining record schema of google-research/bert, and a reader for it.

Files written by `tools/create_pretraining_data.py` (and by the original
program) hold one `tf.train.Example` per sentence pair, zero padded:

| feature                | dtype   | length                  |
|------------------------|---------|-------------------------|
| `input_ids`            | int64   | max_seq_length          |
| `input_mask`           | int64   | max_seq_length          |
| `segment_ids`          | int64   | max_seq_length          |
| `masked_lm_positions`  | int64   | max_predictions_per_seq |
| `masked_lm_ids`        | int64   | max_predictions_per_seq |
| `masked_lm_weights`    | float32 | max_predictions_per_seq |
| `next_sentence_labels` | int64   | 1 (0 = B follows A)     |

`pretraining_dataset` reads them as the `(features, labels)` batches that
`bert_keras.models.BertPretrainer` trains on, under any Keras backend.
"""

import tensorflow as tf

from bert_keras.data.length_batching import PAD_TO_MULTIPLE_OF
from bert_keras.data.length_batching import batch_by_length
from bert_keras.data.length_batching import trimmed_batch
from bert_keras.data.pretraining_corpus import check_shards_finished
from bert_keras.data.pretraining_corpus import resolve_input_files

_GZIP_MAGIC = b"\x1f\x8b"
# Records parsed at once before bucketing splits them into examples again.
_PARSE_BATCH = 256


def original_feature_spec(max_seq_length, max_predictions_per_seq):
    """The parse spec of the original `run_pretraining.py` `input_fn_builder`.

    Example:
    >>> spec = original_feature_spec(128, 20)
    >>> spec["masked_lm_weights"]
    FixedLenFeature(shape=[20], dtype=tf.float32, default_value=None)
    """
    return {
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


def record_compression(path):
    """ "GZIP" when the file starts with gzip's magic bytes, else "".

    Example:
    >>> import gzip, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "records")
    >>> with gzip.open(path, "wb") as file:
    ...     _ = file.write(b"x")
    >>> record_compression(path)
    'GZIP'
    """
    with tf.io.gfile.GFile(path, "rb") as file:
        return "GZIP" if file.read(2) == _GZIP_MAGIC else ""


def _record_lengths(path, compression):
    """(max_seq_length, max_predictions_per_seq) of the file's first record, None if it has none."""
    try:
        records = list(tf.data.TFRecordDataset(path, compression_type=compression).take(1))
    except tf.errors.DataLossError as error:
        raise ValueError(f"{path} is not a file of TFRecords: {error.message}") from None
    if not records:
        return None
    feature = tf.train.Example.FromString(records[0].numpy()).features.feature
    return (
        len(feature["input_ids"].int64_list.value),
        len(feature["masked_lm_ids"].int64_list.value),
    )


def check_record_lengths(paths, max_seq_length, max_predictions_per_seq, compressions=None):
    """Raises ValueError naming a file whose records have other lengths, or the files if all are empty.

    Args:
        paths: the records files.
        max_seq_length: the records' expected sequence length.
        max_predictions_per_seq: the records' expected number of masked positions.
        compressions: each file's compression ("" or "GZIP"); by default
            each file's own (`record_compression`).

    Example:
    >>> import os, tempfile
    >>> empty = os.path.join(tempfile.mkdtemp(), "empty.tfrecord")
    >>> open(empty, "wb").close()
    >>> check_record_lengths([empty], 128, 20)
    Traceback (most recent call last):
    ...
    ValueError: ...empty.tfrecord holds no records: there is nothing to read.
    """
    if compressions is None:
        compressions = [record_compression(path) for path in paths]
    empty = []
    for path, compression in zip(paths, compressions):
        lengths = _record_lengths(path, compression)
        if lengths is None:
            empty.append(path)
            continue
        seq_length, predictions = lengths
        if seq_length != max_seq_length:
            raise ValueError(
                f"{path}: records have max_seq_length {seq_length} but "
                f"{max_seq_length} was expected."
            )
        if predictions != max_predictions_per_seq:
            raise ValueError(
                f"{path}: records have max_predictions_per_seq {predictions} but "
                f"{max_predictions_per_seq} was expected."
            )
    if paths and len(empty) == len(paths):
        named = ", ".join(empty[:3]) + (f" and {len(empty) - 3} more" if len(empty) > 3 else "")
        raise ValueError(
            f"{named} {'holds' if len(empty) == 1 else 'hold'} no records: there is nothing to read."
        )


def _to_model_inputs(examples, pad_to_multiple_of):
    """Parsed int64 examples -> (features, labels) with int32 ids, trimmed to the longest."""

    def as_int32(name):
        return tf.cast(examples[name], tf.int32)

    features = {
        "token_ids": as_int32("input_ids"),  # [batch, seq]
        "segment_ids": as_int32("segment_ids"),
        "padding_mask": as_int32("input_mask"),
        "masked_positions": as_int32("masked_lm_positions"),  # [batch, predictions]
    }
    if pad_to_multiple_of:
        features = trimmed_batch(features, pad_to_multiple_of)
    labels = {
        "masked_lm_ids": as_int32("masked_lm_ids"),
        "masked_lm_weights": examples["masked_lm_weights"],
        "next_sentence_labels": as_int32("next_sentence_labels")[:, 0],  # [batch]
    }
    return features, labels


def pretraining_dataset(
    file_pattern,
    max_seq_length,
    max_predictions_per_seq,
    batch_size,
    shuffle=False,
    repeat=False,
    seed=None,
    drop_remainder=True,
    skip_batches=0,
    pad_to_multiple_of=PAD_TO_MULTIPLE_OF,
    bucket_by_length=False,
):
    """Batches of pretraining records as `(features, labels)`.

    `features`: "token_ids", "segment_ids", "padding_mask" [batch, seq] and
    "masked_positions" [batch, predictions], int32. `labels`:
    "masked_lm_ids" (int32) and "masked_lm_weights" (float32)
    [batch, predictions], "next_sentence_labels" [batch] (int32). Each batch
    is only as long as its longest record, rounded up to a multiple of
    `pad_to_multiple_of` (records of short sequences make short batches; the
    cut-off positions are padding, so the losses are the full length's). Gzip files
    are recognised by their first bytes, each file on its own. Every file's first
    record is checked against the expected lengths before reading starts; files
    that together hold no record are an error (repeating them would wait forever).

    Args:
        file_pattern: a glob, a comma-separated list of globs, or a list;
            each must match a file (FileNotFoundError names one that does not).
        max_seq_length: the records' sequence length.
        max_predictions_per_seq: the records' number of masked positions.
        batch_size: examples per batch.
        shuffle: shuffle file order and examples (in a 10,000-example buffer).
        repeat: repeat forever.
        seed: seed of the shuffles.
        drop_remainder: drop a last, smaller batch.
        skip_batches: start after this many batches (a resumed run's
            position). With a `seed` the order is the same on every run
            (the file interleave is made deterministic too), so the batches
            after the skipped ones are those an uninterrupted run would see.
        pad_to_multiple_of: batch widths are multiples of it; None keeps
            every batch `max_seq_length` long.
        bucket_by_length: batch records of one rounded length together
            (`length_batching.batch_by_length(bucket=True)` after the
            shuffle), so batches of short records carry little padding.
            `skip_batches` then skips batches of the bucketed stream, which
            reads (but does not train on) the records they hold.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "records.tfrecord")
    >>> example = tf.train.Example()
    >>> for name, spec in original_feature_spec(8, 2).items():
    ...     values = [1] * spec.shape[0]
    ...     if spec.dtype == tf.float32:
    ...         example.features.feature[name].float_list.value.extend(values)
    ...     else:
    ...         example.features.feature[name].int64_list.value.extend(values)
    >>> with tf.io.TFRecordWriter(path) as writer:
    ...     writer.write(example.SerializeToString())
    >>> features, labels = next(iter(pretraining_dataset(path, 8, 2, batch_size=1)))
    >>> features["token_ids"].shape, labels["next_sentence_labels"].shape
    (TensorShape([1, 8]), TensorShape([1]))
    >>> pretraining_dataset(path, 16, 2, batch_size=1)
    Traceback (most recent call last):
    ...
    ValueError: ...records.tfrecord: records have max_seq_length 8 but 16 was expected.
    """
    # Every glob must match, as for the programs' --input_file.
    paths = sorted(resolve_input_files(file_pattern, "file_pattern", "*.tfrecord*"))
    check_shards_finished(paths, "file_pattern")
    compressions = [record_compression(path) for path in paths]
    check_record_lengths(paths, max_seq_length, max_predictions_per_seq, compressions)
    # Repeated before the file shuffle, as the original does, so each pass
    # over the files has another order. No reshuffle per iteration: every
    # iterator over this dataset (Keras makes two under tf.distribute) yields
    # the same order, which resuming and data parallelism rely on.
    files = tf.data.Dataset.from_tensor_slices((paths, compressions))
    if repeat:
        files = files.repeat()
    if shuffle:
        files = files.shuffle(len(paths), seed=seed, reshuffle_each_iteration=False)
    dataset = files.interleave(
        lambda path, compression: tf.data.TFRecordDataset(path, compression_type=compression),
        cycle_length=min(len(paths), 8),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=not shuffle or seed is not None,
    )
    if shuffle:
        dataset = dataset.shuffle(10_000, seed=seed, reshuffle_each_iteration=False)
    spec = original_feature_spec(max_seq_length, max_predictions_per_seq)
    if bucket_by_length:
        examples = _parsed(dataset.batch(_PARSE_BATCH), spec, None).unbatch()
        dataset = batch_by_length(
            examples,
            batch_size,
            pad_to_multiple_of or max_seq_length,
            drop_remainder=drop_remainder,
            bucket=True,
        ).skip(skip_batches)
        return dataset.prefetch(tf.data.AUTOTUNE)
    # Skipped as records, before they are parsed: cheap even deep into a run.
    dataset = dataset.skip(skip_batches * batch_size)
    batches = dataset.batch(batch_size, drop_remainder=drop_remainder)
    return _parsed(batches, spec, pad_to_multiple_of).prefetch(tf.data.AUTOTUNE)


def _parsed(batches, spec, pad_to_multiple_of):
    """Batches of records -> `(features, labels)`, trimmed unless `pad_to_multiple_of` is None."""
    return batches.map(
        lambda records: _to_model_inputs(tf.io.parse_example(records, spec), pad_to_multiple_of),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
