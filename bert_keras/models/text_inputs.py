"""Raw text for `fit`, `evaluate` and `predict`: a tf.data pipeline that tokenizes in-graph.

A task model with a preprocessor takes strings; these functions turn them
(Python lists, numpy arrays, TensorFlow tensors or a `tf.data.Dataset`) into
batches of the model's integer inputs. Tokenizing runs as TensorFlow ops
inside `tf.data` (batched, in parallel, prefetched), so the model only ever
sees ids, under every Keras backend.

TensorFlow is imported only once there is text to prepare: telling text from
token ids needs none, so models fed ids run where TensorFlow is not installed.
"""

import sys
import time

import numpy as np

DEFAULT_BATCH_SIZE = 32  # keras.Model.fit's default.
PACKING_CHUNK = 256  # texts per call of the preprocessor in `packed_features`
# About what tracing a BertPreprocessor into a graph takes on a CPU: `TextPacker`
# packs eagerly until it has spent this long doing so.
PACKING_TRACE_SECONDS = 0.5


def holds_text(data):
    """Whether `data` (inputs, a tuple of text segments or a dataset) holds strings.

    Tuples and dicts are structure, as in `tf.data.Dataset.from_tensor_slices`;
    anything else is one array, looked at by its dtype or first element.

    Example:
    >>> holds_text(["a movie", "a film"]), holds_text((["a"], ["b"]))
    (True, True)
    >>> holds_text({"token_ids": np.ones((2, 3), "int32")})
    False
    """
    tf = _imported_tensorflow()
    if tf and isinstance(data, tf.data.Dataset):
        return any(spec.dtype == tf.string for spec in tf.nest.flatten(data.element_spec))
    if isinstance(data, tuple):
        return any(holds_text(part) for part in data)
    if isinstance(data, dict):
        return any(holds_text(part) for part in data.values())
    return _is_text_array(data)


def holds_words(data):
    """Whether `data` holds sentences split into words: `[batch, (words)]` strings.

    `data` is a `tf.RaggedTensor` or 2-D tensor or array of strings, a list of
    lists of strings, or a batched `tf.data.Dataset` whose elements (or their
    first part) are such.

    Example:
    >>> holds_words([["EU", "rejects"], ["Peter"]]), holds_words(["EU rejects"])
    (True, False)
    >>> holds_words([[], ["Peter"]]), holds_words([[]]), holds_words([[101, 102]])
    (True, True, False)
    >>> holds_words(np.array([["EU", "rejects"], ["Peter"]], dtype=object))
    True
    """
    tf = _imported_tensorflow()
    if tf and isinstance(data, tf.data.Dataset):
        words = tf.nest.flatten(data.element_spec)[0]
        return words.dtype == tf.string and words.shape.rank == 2
    if is_array_of_rows(data):
        data = list(data)
    elif isinstance(data, np.ndarray) or (tf and isinstance(data, (tf.Tensor, tf.RaggedTensor))):
        return _is_text_array(data) and len(data.shape) == 2
    if not (isinstance(data, list) and data and all(isinstance(item, list) for item in data)):
        return False
    words = next((sentence for sentence in data if sentence), None)
    return words is None or _is_text_array(words)  # sentences of no words are words too


def is_array_of_rows(data):
    """Whether `data` is a 1-D numpy object array of lists or arrays: ragged rows, as numpy holds them.

    Example:
    >>> is_array_of_rows(np.array([["EU", "rejects"], ["Peter"]], dtype=object))
    True
    >>> is_array_of_rows(np.array(["EU rejects", "Peter"], dtype=object))
    False
    """
    if not (isinstance(data, np.ndarray) and data.dtype.kind == "O" and data.ndim == 1):
        return False
    return isinstance(_first_present(data), (list, np.ndarray))


def _imported_tensorflow():
    """TensorFlow if this process has imported it: an input can be a TensorFlow object only then."""
    return sys.modules.get("tensorflow")


def _is_text_array(array):
    if isinstance(array, (str, bytes)):
        return True
    tf = _imported_tensorflow()
    if tf and isinstance(array, (tf.Tensor, tf.RaggedTensor)):
        return array.dtype == tf.string
    if isinstance(array, np.ndarray):
        if array.dtype.kind in "US":
            return True
        return array.dtype.kind == "O" and _is_text_array(_first_present(array.flat))
    if isinstance(array, list):
        return _is_text_array(_first_present(array))
    return False


def _first_present(items):
    """The first of `items` that is not None (a missing text, which the checks name) or [], else None."""
    return next((item for item in items if item is not None and not _is_empty_list(item)), None)


def _is_empty_list(item):
    return isinstance(item, list) and not item


def text_dataset(
    preprocess, x, y=None, sample_weight=None, batch_size=None, shuffle=False, check_labels=None
):
    """Batches of the model's inputs (and labels, weights) made from raw text.

    Args:
        preprocess: batch of texts -> dict of the model's input tensors; plain
            TensorFlow (e.g. a `BertPreprocessor`), as it runs in `tf.data`.
        x: texts (a list, numpy array or tensor of strings), a tuple of two
            such for pairs, or a batched `tf.data.Dataset` whose elements are
            `texts`, `(texts, labels)` or `(texts, labels, sample_weights)`;
            `texts` may be a tuple `(texts_a, texts_b)`, and an element
            `(texts_a, texts_b)` of two strings is a pair.
        y: labels for array-like `x`.
        sample_weight: weights for array-like `x`.
        batch_size: examples per batch for array-like `x` (default 32).
        shuffle: reshuffle array-like `x` every epoch, as `fit` does.
        check_labels: optional labels -> labels, in TensorFlow: checks a
            dataset's labels as they pass (arrays are checked before).

    Returns:
        A `tf.data.Dataset` of the model's inputs, or of `(inputs, labels)`
        or `(inputs, labels, sample_weights)`.

    Raises:
        ValueError: labels given beside a dataset, or a dataset of single
            (unbatched) strings.

    Example:
    >>> from bert_keras.text.tokenizer import BertTokenizer
    >>> from bert_keras.text.preprocessor import BertPreprocessor
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
    >>> dataset = text_dataset(BertPreprocessor(tokenizer, 5), ["hi", "hi hi"], [0, 1])
    >>> features, labels = next(iter(dataset))
    >>> features["token_ids"].numpy().tolist(), labels.numpy().tolist()
    ([[2, 5, 3, 0, 0], [2, 5, 5, 3, 0]], [0, 1])
    """
    import tensorflow as tf

    # Plain TensorFlow ops throughout: AutoGraph would only slow the trace,
    # and it cannot convert Keras layers' methods.
    @tf.autograph.experimental.do_not_convert
    def preprocessed(texts, rest):
        features = preprocess(texts)
        return (features, *rest) if rest else features

    if isinstance(x, tf.data.Dataset):
        if y is not None or sample_weight is not None:
            raise ValueError(
                "x is a tf.data.Dataset: give its labels (and sample weights) inside it, as "
                "elements (texts, labels), not as y or sample_weight."
            )
        _check_batched(x.element_spec)

        def checked(texts, rest):
            if check_labels is not None and rest:
                rest = (check_labels(rest[0]), *rest[1:])
            return preprocessed(texts, rest)

        dataset = x.map(
            lambda *element: checked(*_texts_and_rest(element)),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
    else:
        columns = (x,) + tuple(part for part in (y, sample_weight) if part is not None)
        dataset = tf.data.Dataset.from_tensor_slices(columns)
        if shuffle:
            dataset = dataset.shuffle(dataset.cardinality(), reshuffle_each_iteration=True)
        dataset = dataset.batch(batch_size or DEFAULT_BATCH_SIZE).map(
            lambda texts, *rest: preprocessed(texts, rest),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
    return dataset.prefetch(tf.data.AUTOTUNE)


def with_segment_ids_checked(features, num_segments):
    """Packed `features` whose "segment_ids", once computed, must be below `num_segments`.

    A pair's second text is segment 1, which a checkpoint of one segment
    has no embedding for (jax would look it up as NaN): the check fails in
    the graph, with a message that says so.

    Example:
    >>> import tensorflow as tf
    >>> features = {"segment_ids": tf.constant([[0, 0, 1, 1]])}
    >>> with_segment_ids_checked(features, 2)["segment_ids"].numpy().tolist()
    [[0, 0, 1, 1]]
    >>> with_segment_ids_checked(features, 1)
    Traceback (most recent call last):
    ...
    tensorflow.python.framework.errors_impl.InvalidArgumentError: ...segment ids run from 0 to 0 (num_segments 1)...
    """
    import tensorflow as tf

    segment_ids = features["segment_ids"]
    check = tf.debugging.assert_less(
        segment_ids,
        tf.cast(num_segments, segment_ids.dtype),
        message=(
            f"the packed texts hold a segment id of {num_segments} or more, and the backbone's "
            f"segment ids run from 0 to {num_segments - 1} (num_segments {num_segments}): a "
            "pair's second text is segment 1, so give single texts"
        ),
    )
    with tf.control_dependencies([check]):
        return {**features, "segment_ids": tf.identity(segment_ids)}


def _texts_and_rest(element):
    """`(texts, (labels, ...))` of a dataset element, texts being one or two segments."""
    if len(element) == 1:
        return element[0], ()
    if isinstance(element[0], tuple):  # ((texts_a, texts_b), labels, ...)
        return element[0], tuple(element[1:])
    if all(_is_text_array(part) for part in element[:2]):  # (texts_a, texts_b, ...)
        return tuple(element[:2]), tuple(element[2:])
    return element[0], tuple(element[1:])


def dataset_labels(dataset):
    """The element specs that follow a text dataset's texts: its labels (and weights), () if none.

    As `text_dataset` reads the elements: a first part that is a tuple is a
    pair of texts, and so are two string parts (`(texts_a, texts_b)`).

    Example:
    >>> import tensorflow as tf
    >>> texts = tf.data.Dataset.from_tensor_slices((["a film"], [1])).batch(1)
    >>> [spec.dtype.name for spec in dataset_labels(texts)]
    ['int32']
    >>> dataset_labels(tf.data.Dataset.from_tensor_slices((["a film"], ["a movie"])).batch(1))
    ()
    """
    spec = dataset.element_spec
    element = spec if isinstance(spec, tuple) else (spec,)
    if len(element) == 1:
        return ()
    if isinstance(element[0], tuple):
        return tuple(element[1:])
    if all(getattr(part, "dtype", None) == "string" for part in element[:2]):
        return tuple(element[2:])
    return tuple(element[1:])


def _check_batched(element_spec):
    import tensorflow as tf

    for spec in tf.nest.flatten(element_spec):
        if spec.dtype == tf.string and spec.shape.rank == 0:
            raise ValueError(
                "The tf.data.Dataset yields single strings (element_spec "
                f"{element_spec}); batch it first, e.g. dataset.batch(32)."
            )


def holds_dataset(data):
    """Whether `data` is a `tf.data.Dataset` (False where TensorFlow is not imported).

    Example:
    >>> holds_dataset(["a text"])
    False
    """
    tf = _imported_tensorflow()
    return bool(tf) and isinstance(data, tf.data.Dataset)


def packed_features(preprocess, x):
    """The model's inputs for array-like texts `x`: a dict of numpy arrays.

    `preprocess` packs the texts (see `text_dataset`) eagerly,
    `PACKING_CHUNK` at a time: a tf.data pipeline would trace it first,
    which takes longer than packing a dev set. Chunks it pads to
    different widths are padded with zeros (masked) to the widest: the
    per-token features (`PACKED_FEATURES`) to the most tokens, any other
    (a masked LM's `masked_positions`) to its own widest chunk.

    Example:
    >>> from bert_keras.text.tokenizer import BertTokenizer
    >>> from bert_keras.text.preprocessor import BertPreprocessor
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
    >>> features = packed_features(BertPreprocessor(tokenizer, 5), ["hi hi", "hi"])
    >>> features["token_ids"].tolist()
    [[2, 5, 5, 3, 0], [2, 5, 3, 0, 0]]
    """
    import tensorflow as tf

    from bert_keras.data.length_batching import PACKED_FEATURES

    x = _map_arrays(_sliceable, x)
    count = int(next(array for array in _flat_arrays(x)).shape[0])

    def chunk(start):
        texts = _map_arrays(
            lambda array: tf.convert_to_tensor(array[start : start + PACKING_CHUNK]), x
        )
        return {name: tensor.numpy() for name, tensor in preprocess(texts).items()}

    batches = [chunk(start) for start in range(0, count, PACKING_CHUNK)]
    tokens = max(batch["padding_mask"].shape[-1] for batch in batches)

    def stacked(name):
        arrays = [batch[name] for batch in batches]
        width = tokens if name in PACKED_FEATURES else max(array.shape[-1] for array in arrays)
        return np.concatenate(
            [
                np.pad(array, [(0, 0)] * (array.ndim - 1) + [(0, width - array.shape[-1])])
                for array in arrays
            ]
        )

    return {name: stacked(name) for name in batches[0]}


class TextPacker:
    """Packs array-like texts as `packed_features` does: eagerly, until a graph would have paid.

    Traced into a graph, a preprocessor packs texts far faster than
    eagerly, but tracing it takes about `PACKING_TRACE_SECONDS`. Whether
    that pays depends on the calls still to come, which are not known, so
    the texts are packed eagerly until the time spent so reaches a trace's,
    then by a graph traced once per input structure: at most about twice
    the time of the better choice made in advance. Many small `predict`
    calls gain most.

    Args:
        preprocess: batch of texts -> dict of the model's input tensors, as
            for `packed_features`.

    Example:
    >>> from bert_keras.text.tokenizer import BertTokenizer
    >>> from bert_keras.text.preprocessor import BertPreprocessor
    >>> tokenizer = BertTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"])
    >>> packer = TextPacker(BertPreprocessor(tokenizer, 5))
    >>> packer(["hi hi", "hi"])["token_ids"].tolist(), packer.traced_structures
    ([[2, 5, 5, 3, 0], [2, 5, 3, 0, 0]], 0)
    """

    def __init__(self, preprocess):
        self.preprocess = preprocess
        self.eager_seconds = 0.0
        self._graphs = {}  # input structure -> traced preprocess

    @property
    def traced_structures(self):
        """How many input structures (texts, pairs, ...) have a traced graph."""
        return len(self._graphs)

    def __call__(self, x):
        if self.eager_seconds < PACKING_TRACE_SECONDS:
            start = time.perf_counter()
            features = packed_features(self.preprocess, x)
            self.eager_seconds += time.perf_counter() - start
            return features
        return packed_features(self._graph(x), x)

    def _graph(self, x):
        import tensorflow as tf

        specs = _map_arrays(lambda array: tf.TensorSpec([None] * np.ndim(array), tf.string), x)
        key = str(specs)
        if key not in self._graphs:
            # Plain TensorFlow ops: AutoGraph would only slow the trace.
            self._graphs[key] = tf.function(
                tf.autograph.experimental.do_not_convert(self.preprocess), input_signature=[specs]
            )
        return self._graphs[key]


def split_for_validation(arrays, validation_split):
    """Splits array-like `(x, y, sample_weight)` into the first and last parts, as `fit` does.

    Args:
        arrays: a tuple of array-likes (lists, numpy arrays, tuples or
            dicts of them) or None, all with the same number of examples;
            `tf.RaggedTensor`s (sentences of words) too.
        validation_split: fraction, in (0, 1), of the examples, taken from
            the end, to validate on.

    Returns:
        `(training_arrays, validation_arrays)`.

    Example:
    >>> train, validation = split_for_validation((["a", "b", "c", "d"], [0, 1, 0, 1]), 0.25)
    >>> train[0].tolist(), validation[0].tolist(), validation[1].tolist()
    (['a', 'b', 'c'], ['d'], [1])
    >>> _, validation = split_for_validation((["a", "b"], {"start": [1, 2], "end": [3, 4]}), 0.5)
    >>> validation[1]["end"].tolist()
    [4]
    """
    arrays = _map_arrays(_sliceable, arrays)
    count = int(next(array for array in _flat_arrays(arrays)).shape[0])
    split_at = int(count * (1.0 - validation_split))
    if split_at in (0, count):
        raise ValueError(
            f"validation_split={validation_split} of {count} examples leaves none to "
            "train or to validate on."
        )
    return (
        _map_arrays(lambda array: array[:split_at], arrays),
        _map_arrays(lambda array: array[split_at:], arrays),
    )


def first_examples(arrays, count):
    """The first `count` examples of array-likes (lists, arrays, nested tuples of them; None stays).

    Example:
    >>> texts, labels, weights = first_examples((["a", "b", "c"], [0, 1, 2], None), 2)
    >>> texts.tolist(), labels.tolist(), weights
    (['a', 'b'], [0, 1], None)
    """
    return _map_arrays(lambda array: _sliceable(array)[:count], arrays)


def _sliceable(array):
    tf = _imported_tensorflow()
    return array if tf and isinstance(array, tf.RaggedTensor) else np.asarray(array)


def _map_arrays(function, arrays):
    """`function` on every array of nested tuples and dicts; lists are arrays, None stays."""
    if isinstance(arrays, tuple):
        return tuple(_map_arrays(function, part) for part in arrays)
    if isinstance(arrays, dict):
        return {name: _map_arrays(function, part) for name, part in arrays.items()}
    return None if arrays is None else function(arrays)


def _flat_arrays(arrays):
    if isinstance(arrays, tuple):
        return [array for part in arrays for array in _flat_arrays(part)]
    if isinstance(arrays, dict):
        return [array for part in arrays.values() for array in _flat_arrays(part)]
    return [] if arrays is None else [arrays]
