"""`tf.train.Example` bytes of pretraining instances, written with numpy.

Each row of a `pretraining_instances.Instances` becomes one record in the
original's schema (`pretraining_records.original_feature_spec`): the bytes
that `SerializeToString(deterministic=True)` gives for the same Example,
made without TensorFlow so that the worker processes that call it hold numpy
only, and for thousands of rows at once.

How: Example{features=1: Features{feature=1: map<string, Feature>}},
Feature's float_list=2 / int64_list=3, each a packed `value=1`; map entries
are in key order, as the deterministic serialization writes them. Each record
is first a row of "units": little-endian uint32s holding 0 to 4 of its bytes
(a varint, four one-byte values, a float, four header bytes). Dropping the
unused bytes of all rows at once leaves the records, one after the other,
without a Python loop over values.
"""

import functools

import numpy as np

_INT64_LIST, _FLOAT_LIST = 0x1A, 0x12
_UNIT_BYTES = 4
_VARINT_LIMIT = 1 << 21  # three varint bytes: vocabularies and positions fit
# The unit's bytes that hold data, by the unit's size, as booleans in a uint32.
_USED_BYTES = np.array([0, 0x1, 0x101, 0x10101, 0x1010101], "<u4")


def _varint(value):
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _delimited(tag, payload):
    return bytes([tag]) + _varint(len(payload)) + payload


def _varint_units(values):
    """Each value's varint as a unit: ([n, k] uint32, [n, k] byte counts)."""
    values = values.astype(np.uint32)
    two, three = values >= 1 << 7, values >= 1 << 14
    units = (values & 0x7F) | ((values << 1) & 0x7F00) | ((values << 2) & 0x7F0000)
    units |= (two.astype(np.uint32) << 7) | (three.astype(np.uint32) << 15)
    return units, (1 + two.astype(np.uint8) + three)


def _byte_units(values):
    """Values below 0x80 (one varint byte each), four to a unit."""
    num_rows, width = values.shape
    num_units = -(-width // _UNIT_BYTES)
    packed = np.zeros((num_rows, num_units * _UNIT_BYTES), np.uint8)
    packed[:, :width] = values
    sizes = np.clip(width - _UNIT_BYTES * np.arange(num_units), 0, _UNIT_BYTES).astype(np.uint8)
    return packed.view("<u4"), np.broadcast_to(sizes, (num_rows, num_units))


def _int64_units(values):
    """Units of the packed varints of non-negative [n, k] ints, k per row."""
    if values.size and (values.min() < 0 or values.max() >= _VARINT_LIMIT):
        raise ValueError(
            f"Feature values must be in [0, {_VARINT_LIMIT}), got {values.min()}..{values.max()}."
        )
    if not values.size or values.max() < 0x80:
        return _byte_units(values)
    return _varint_units(values)


def _float_units(values):
    """float32 values, one to a unit."""
    units = np.ascontiguousarray(values, "<f4").view("<u4")
    return units, np.full(units.shape, _UNIT_BYTES, np.uint8)


@functools.lru_cache(maxsize=4096)
def _feature_header(key, kind, payload_size):
    """Map entry bytes up to the packed payload of one feature."""
    packed = bytes([0x0A]) + _varint(payload_size)
    feature = bytes([kind]) + _varint(len(packed) + payload_size) + packed
    entry_tail = bytes([0x12]) + _varint(len(feature) + payload_size) + feature
    entry = _delimited(0x0A, key.encode()) + entry_tail
    return bytes([0x0A]) + _varint(len(entry) + payload_size) + entry


def _header_units(key, kind, payload_sizes):
    """Units of each row's feature header, which depends on its payload size."""
    unique_sizes, size_index = np.unique(payload_sizes, return_inverse=True)
    headers = [_feature_header(key, kind, int(size)) for size in unique_sizes]
    num_units = -(-max(len(header) for header in headers) // _UNIT_BYTES)
    table = np.zeros((len(headers), num_units * _UNIT_BYTES), np.uint8)
    for row, header in enumerate(headers):
        table[row, : len(header)] = np.frombuffer(header, np.uint8)
    lengths = np.array([len(header) for header in headers])[:, np.newaxis]
    sizes = np.clip(lengths - _UNIT_BYTES * np.arange(num_units), 0, _UNIT_BYTES).astype(np.uint8)
    return table.view("<u4")[size_index], sizes[size_index]


def encode_example_batch(instances):
    """Serialized examples of the rows of `instances` (a few thousand), packed.

    Returns `(data, lengths)`: the records one after the other ([bytes]
    uint8) and each one's byte count ([rows] int64).

    Example:
    >>> from bert_keras.data.pretraining_instances import Documents, InstanceOptions
    >>> from bert_keras.data.pretraining_instances import SpecialTokens, create_instances
    >>> documents = Documents.from_lists([[[5, 6], [7, 8]], [[9, 10]]])
    >>> instances = create_instances(documents, SpecialTokens(2, 3, 4, 12),
    ...     InstanceOptions(max_seq_length=8, dupe_factor=1), shard_index=0)
    >>> data, lengths = encode_example_batch(instances)
    >>> len(lengths) == len(instances), int(lengths.sum()) == len(data)
    (True, True)
    """
    payloads = {
        "input_ids": _int64_units(instances.input_ids),
        "input_mask": _int64_units(instances.input_mask),
        "masked_lm_ids": _int64_units(instances.masked_lm_ids),
        "masked_lm_positions": _int64_units(instances.masked_lm_positions),
        "masked_lm_weights": _float_units(instances.masked_lm_weights),
        "next_sentence_labels": _int64_units(instances.next_sentence_labels[:, np.newaxis]),
        "segment_ids": _int64_units(instances.segment_ids),
    }
    units, sizes = [None], [None]  # the example's own header goes first
    for key in sorted(payloads):
        payload_units, payload_sizes = payloads[key]
        kind = _FLOAT_LIST if key == "masked_lm_weights" else _INT64_LIST
        header_units, header_sizes = _header_units(key, kind, payload_sizes.sum(axis=1))
        units += [header_units, payload_units]
        sizes += [header_sizes, payload_sizes]
    features_size = sum(size.sum(axis=1, dtype=np.int64) for size in sizes[1:])  # [rows]
    size_units, size_sizes = _varint_units(features_size[:, np.newaxis])
    # Tag 0x0A and the varint size of the features, in one unit.
    units[0], sizes[0] = 0x0A | (size_units << 8), size_sizes + 1
    units = np.concatenate(units, axis=1).astype("<u4", copy=False)  # [rows, units]
    sizes = np.concatenate(sizes, axis=1)
    used = _USED_BYTES[sizes].reshape(-1).view(np.bool_)  # [rows * units * 4]
    return units.reshape(-1).view(np.uint8)[used], sizes.sum(axis=1, dtype=np.int64)


def _encode_rows(instances):
    """Serialized examples of all the rows of `instances`, as a list."""
    data, lengths = encode_example_batch(instances)
    data, ends = data.tobytes(), np.cumsum(lengths).tolist()
    return [data[begin:end] for begin, end in zip([0] + ends[:-1], ends)]


def encode_examples(instances, rows_per_batch=2048):
    """Serialized `tf.train.Example`s in the original's schema, one per row.

    Example:
    >>> from bert_keras.data.pretraining_instances import Documents, InstanceOptions
    >>> from bert_keras.data.pretraining_instances import SpecialTokens, create_instances
    >>> documents = Documents.from_lists([[[5, 6], [7, 8]], [[9, 10]]])
    >>> instances = create_instances(documents, SpecialTokens(2, 3, 4, 12),
    ...     InstanceOptions(max_seq_length=8, dupe_factor=1), shard_index=0)
    >>> records = encode_examples(instances)
    >>> len(records) == len(instances), b"masked_lm_weights" in records[0]
    (True, True)
    """
    records = []
    for start in range(0, len(instances), rows_per_batch):
        records += _encode_rows(instances.take(slice(start, start + rows_per_batch)))
    return records
