"""Clear errors for bad array inputs to a task model's `fit`, `evaluate` and `predict`.

Without these checks, such inputs fail deep inside Keras or TensorFlow with
messages that do not say which input is wrong (`KeyError: 'pop from an empty
set'` for no examples, `IndexError` for one string, `Dimensions 3 and 2 are
not compatible` for labels of another length). Worse, on jax a class id out
of range trains without an error, on a wrong loss.
"""

import numbers

import numpy as np

from bert_keras.models.text_inputs import dataset_labels
from bert_keras.models.text_inputs import holds_dataset
from bert_keras.models.text_inputs import holds_text

_SHOWN_CHARACTERS = 40
# The backbone inputs with a sequence axis, last.
_SEQUENCE_INPUTS = ("token_ids", "segment_ids", "padding_mask")


def check_array_inputs(x, y=None, sample_weight=None, batch_size=None, source=""):
    """Raises a ValueError naming what is wrong in array-like `x`, `y` and `sample_weight`.

    Checks that `x` is a batch (not one string) of at least one example;
    that every text in lists or object arrays is a string; that the parts
    of a tuple `x` (text pairs), `y` and `sample_weight` hold as many
    examples as `x`; that labels are not strings; and that `batch_size` is
    positive. Other inputs (a `tf.data.Dataset`, a generator, a
    `keras.utils.PyDataset`) pass unchecked.

    Args:
        x: texts (a list or array of strings, a tuple of such for pairs,
            nested lists for words or choices) or arrays of token ids
            (a dict); TensorFlow tensors are counted, not looked into.
        y: labels, or None.
        sample_weight: weights, or None.
        batch_size: examples per batch, or None: a positive whole number.
        source: where the arrays come from, to begin their names in errors
            (such as "validation_data: ").

    Raises:
        ValueError: naming the input, the example and what was expected.

    Example:
    >>> check_array_inputs(["a film", "a movie"], [0, 1])
    >>> check_array_inputs(["a film", "a movie"], [0])
    Traceback (most recent call last):
    ...
    ValueError: y holds 1 examples for the 2 of x.
    """
    check_positive_count(f"{source}batch_size", batch_size)
    if x is None:
        raise ValueError(f"{source}x is None; give a batch, such as a list of texts.")
    if isinstance(x, (str, bytes, numbers.Number)) or (isinstance(x, np.ndarray) and x.ndim == 0):
        raise ValueError(
            f"{source}x is one string or number ({_shown(x)}); give a batch, such as a list of "
            "texts."
        )
    if not _is_array_like(x):
        return
    parts = _named_parts(f"{source}x", x)
    if not parts:
        raise ValueError(f"{source}x is an empty {type(x).__name__}: it holds no inputs.")
    if isinstance(x, tuple) and holds_text(x):
        _check_text_pair(f"{source}x", parts)
    _check_no_tuples_of_texts(f"{source}x", x)
    count = _count(parts[0][1])
    if count == 0:
        raise ValueError(f"{parts[0][0]} holds no examples; give at least one.")
    for name, part in parts:
        _check_texts_are_strings(name, part)
    labels = _named_parts(f"{source}y", y)
    weights = _named_parts(f"{source}sample_weight", sample_weight)
    for name, column in parts[1:] + labels + weights:
        if _count(column) != count:
            raise ValueError(
                f"{name} holds {_count(column)} examples for the {count} of {parts[0][0]}."
            )
    for name, column in labels:
        _check_not_strings(name, column)


def check_token_ids(inputs, vocabulary_size, num_segments, name="x"):
    """Raises a ValueError naming an id out of range in `inputs`' token or segment ids.

    An id past the embedding table is not an error on every backend: jax
    gathers NaN for it, and a negative id wraps round to the table's end.
    Numpy arrays and lists are checked; tensors pass (reading them would
    wait for the device).

    Args:
        inputs: a backbone's input dict (anything else passes).
        vocabulary_size: token ids run from 0 to this - 1.
        num_segments: segment ids run from 0 to this - 1.
        name: what `inputs` is called in the error.

    Example:
    >>> check_token_ids({"token_ids": [[2, 9, 3]], "segment_ids": [[0, 0, 1]]}, 10, 2)
    >>> check_token_ids({"token_ids": [[2, 10, 3]]}, 10, 2)
    Traceback (most recent call last):
    ...
    ValueError: x['token_ids'] holds the id 10 (at index (0, 1)); ids run from 0 to 9 (vocabulary_size 10).
    """
    if not isinstance(inputs, dict):
        return
    _check_indices(inputs, "token_ids", vocabulary_size, "vocabulary_size", name)
    _check_indices(inputs, "segment_ids", num_segments, "num_segments", name)


def check_masked_positions(inputs, name="x"):
    """Raises a ValueError naming a masked position off `inputs`' token ids.

    A position past the sequence is not an error on every backend either:
    jax gathers NaN for it, torch another row. Numpy arrays and lists are
    checked, where the token ids' width is known.

    Example:
    >>> ids = [[2, 9, 3, 0]]
    >>> check_masked_positions({"token_ids": ids, "masked_positions": [[1, 2]]})
    >>> check_masked_positions({"token_ids": ids, "masked_positions": [[1, 4]]})
    Traceback (most recent call last):
    ...
    ValueError: x['masked_positions'] holds the position 4 (at index (0, 1)); positions run from 0 to 3...
    """
    if not isinstance(inputs, dict) or "masked_positions" not in inputs:
        return
    shape = _known_shape(inputs.get("token_ids"))
    if shape:
        _check_indices(
            inputs, "masked_positions", shape[-1], "token_ids' width", name, kind="position"
        )


def _check_indices(inputs, key, size, limit_name, name, kind="id"):
    """Raises where `inputs[key]`, a numpy array or list, holds a value outside [0, size)."""
    values = inputs.get(key)
    if not isinstance(values, (list, np.ndarray)) or size < 1:
        return
    values = np.asarray(values)
    if values.size == 0 or not np.issubdtype(values.dtype, np.number):
        return
    outside = np.argwhere((values < 0) | (values >= size))
    if len(outside):
        index = tuple(int(position) for position in outside[0])
        raise ValueError(
            f"{name}[{key!r}] holds the {kind} {values[index]} (at index {index}); {kind}s run "
            f"from 0 to {size - 1} ({limit_name} {size})."
        )


def check_sequence_widths(inputs, max_sequence_length, name="x"):
    """Raises a ValueError where `inputs`' token ids, segment ids or mask are wider than allowed.

    Checked before Keras' `fit`, `evaluate` or `predict` loop: inside it the
    backbone raises the same error while tracing, and on jax Keras has by
    then taken the weights off the model's variables for the loop and never
    puts them back, so every later call fails. The last axis is the
    sequence (`[batch, seq]`, or `[batch, num_choices, seq]`); arrays,
    lists and tensors of known shape are checked, anything else passes.

    Args:
        inputs: a backbone's input dict (anything else passes).
        max_sequence_length: the backbone's positions.
        name: what `inputs` is called in the error.

    Example:
    >>> import numpy as np
    >>> check_sequence_widths({"token_ids": np.zeros((2, 8), "int32")}, 8)
    >>> check_sequence_widths({"token_ids": np.zeros((2, 9), "int32")}, 8)
    Traceback (most recent call last):
    ...
    ValueError: max_sequence_length is 8 but x['token_ids'] has 9 positions (shape (2, 9)).
    """
    if not isinstance(inputs, dict):
        return
    for key in _SEQUENCE_INPUTS:
        shape = _shape(inputs.get(key))
        if shape and shape[-1] is not None and shape[-1] > max_sequence_length:
            raise ValueError(
                f"max_sequence_length is {max_sequence_length} but {name}[{key!r}] has "
                f"{shape[-1]} positions (shape {tuple(shape)})."
            )


def check_matching_shapes(inputs, name="x"):
    """Raises a ValueError where segment ids or the padding mask are not of the token ids' shape.

    Each holds one value per token; a mask of another shape would be
    broadcast (one example's mask over the whole batch) or fail deep inside
    attention with a message that names none of them. Arrays, lists and
    tensors of fully known shape are checked, anything else passes.

    Example:
    >>> import numpy as np
    >>> ids = np.ones((2, 5), "int32")
    >>> check_matching_shapes({"token_ids": ids, "segment_ids": 0 * ids, "padding_mask": ids})
    >>> check_matching_shapes({"token_ids": ids, "padding_mask": ids[:1]})
    Traceback (most recent call last):
    ...
    ValueError: x['padding_mask'] has shape (1, 5) but x['token_ids'] (2, 5): one value per token.
    """
    if not isinstance(inputs, dict):
        return
    expected = _known_shape(inputs.get("token_ids"))
    if expected is None:
        return
    for key in _SEQUENCE_INPUTS[1:]:
        shape = _known_shape(inputs.get(key))
        if shape is not None and shape != expected:
            raise ValueError(
                f"{name}[{key!r}] has shape {shape} but {name}['token_ids'] {expected}: "
                "one value per token."
            )


def check_a_label_per_token(x, y, source=""):
    """Raises a ValueError where labels `y` are not one per token of `x`'s token ids.

    Arrays, lists and tensors of fully known shape are checked, anything
    else (ragged labels per word) passes.

    Example:
    >>> import numpy as np
    >>> check_a_label_per_token({"token_ids": np.ones((2, 5))}, np.zeros((2, 5)))
    >>> check_a_label_per_token({"token_ids": np.ones((2, 5))}, np.zeros(2))
    Traceback (most recent call last):
    ...
    ValueError: y has the shape (2,), but x['token_ids'] has the shape (2, 5): a token classifier ...
    """
    expected, shape = _known_shape(x.get("token_ids")), _known_shape(y)
    if expected is not None and shape is not None and shape != expected[:2]:
        raise ValueError(
            f"{source}y has the shape {shape}, but {source}x['token_ids'] has the shape "
            f"{expected}: a token classifier takes one label per token, [batch, sequence]."
        )


def _known_shape(array):
    shape = _shape(array)
    if shape is None or any(size is None for size in shape):
        return None
    return tuple(int(size) for size in shape)


def _shape(array):
    """The shape of an array, tensor or rectangular nested list; None for anything else."""
    if isinstance(array, (list, tuple)):
        try:
            return np.shape(array)
        except ValueError:  # ragged lists
            return None
    shape = getattr(array, "shape", None)
    try:
        return None if shape is None else tuple(shape)
    except (TypeError, ValueError):  # a TensorShape of unknown rank
        return None


def check_class_ids(y, num_classes, name="y", ignored_label=None):
    """Raises a ValueError if class ids `y` are not whole numbers in `[0, num_classes)`.

    Args:
        y: labels: an array, a (nested) list or a `tf.RaggedTensor`.
        num_classes: how many classes there are.
        name: what the error calls `y`.
        ignored_label: a label that marks an example (or word) to leave out
            of the loss, also accepted; None for none.

    Raises:
        ValueError: naming the first label out of range.

    Example:
    >>> check_class_ids([0, 1, 1], num_classes=2)
    >>> check_class_ids([0, 2], num_classes=2)
    Traceback (most recent call last):
    ...
    ValueError: y holds the label 2 (at index 1 of its 2 labels); class ids run from 0 to 1 (2 classes).
    """
    labels = _flat_values(y)
    if labels.size == 0 or labels.dtype.kind not in "iuf":
        return
    wrong = (labels < 0) | (labels >= num_classes) | (labels != np.round(labels))
    if ignored_label is not None:
        wrong &= labels != ignored_label
    if wrong.any():
        index = int(np.argmax(wrong))
        label = labels[index].item()
        raise ValueError(
            f"{name} holds the label {label} (at index {index} of its {labels.size} labels); "
            f"class ids run from 0 to {num_classes - 1} ({num_classes} classes)."
        )


def class_ids_checked_in_graph(labels, num_classes, ignored_label=None, name="the labels in x"):
    """`labels`, a tensor in `tf.data`, with an assertion that they are class ids in `[0, num_classes)`.

    What `check_class_ids` checks in arrays, for labels no one sees before
    they pass (a dataset's): the iterator raises an `InvalidArgumentError`
    naming the first wrong label. Labels that are not integers pass.

    Example:
    >>> import tensorflow as tf
    >>> class_ids_checked_in_graph(tf.constant([0, 1, -100]), 2, ignored_label=-100).numpy()
    array([   0,    1, -100], dtype=int32)
    """
    import tensorflow as tf

    if not labels.dtype.is_integer:
        return labels
    valid = (labels >= 0) & (labels < num_classes)
    if ignored_label is not None:
        valid |= tf.equal(labels, tf.cast(ignored_label, labels.dtype))
    check = tf.debugging.Assert(
        tf.reduce_all(valid),
        [
            f"{name} hold one outside the class ids 0 to {num_classes - 1} "
            f"({num_classes} classes), the first:",
            tf.boolean_mask(labels, tf.logical_not(valid))[:1],
        ],
    )
    with tf.control_dependencies([check]):
        return tf.identity(labels)


def check_one_label_per_example(y, name="y"):
    """Raises a ValueError unless `y` holds one class id per example: `[examples]` or `[examples, 1]`.

    One-hot or soft rows pass the class-id range check (their values are 0
    and 1) and fail inside the sparse loss, whose error does not name them.

    Example:
    >>> check_one_label_per_example([[0], [1]])
    >>> check_one_label_per_example([[1, 0], [0, 1]])
    Traceback (most recent call last):
    ...
    ValueError: y has the shape (2, 2), where the loss reads one class id per example...
    """
    shape = np.shape(y)
    if len(shape) > 2 or (len(shape) == 2 and shape[1] != 1):
        raise ValueError(
            f"{name} has the shape {shape}, where the loss reads one class id per example, "
            f"shape ({shape[0]},); one-hot or soft rows go with "
            "loss=keras.losses.CategoricalCrossentropy(from_logits=True)."
        )


def check_one_text_per_example(x, name="x", pairs="sentence pairs as a tuple (texts, text_pairs)"):
    """Raises a ValueError where a classifier's texts `x` (or a tuple's parts) nest.

    Sentence pairs come as a tuple of two lists; as a list of two, or a 2-D
    array, they would fail in the tokenizer, whose error names a tensor.
    `pairs` says, in the error, how to give them.

    Example:
    >>> check_one_text_per_example(["a film", "a movie"])
    >>> check_one_text_per_example([["a film", "a movie"], ["good", "bad"]])
    Traceback (most recent call last):
    ...
    ValueError: x holds lists (x[0] is a list) where one text per example goes...
    """
    for part_name, texts in _named_parts(name, x):
        _check_texts_are_flat(texts, part_name, pairs)


def _check_texts_are_flat(texts, name, pairs):
    if isinstance(texts, np.ndarray) and texts.ndim > 1 and holds_text(texts):
        raise ValueError(
            f"{name} is an array of texts of the shape {texts.shape} where one text per example "
            f"goes: give {pairs}."
        )
    if not isinstance(texts, list) or not holds_text(texts):
        return
    for index, text in enumerate(texts):
        if isinstance(text, (list, tuple, np.ndarray)):
            raise ValueError(
                f"{name} holds lists ({name}[{index}] is a {type(text).__name__}) where one text "
                f"per example goes: give {pairs}."
            )


def check_token_positions(positions, lengths, name="y", ignored_label=None):
    """Raises a ValueError unless each position is a whole number indexing a token of its example.

    For span labels (`BertQuestionAnswerer`): a start or end must fall in
    `[0, length)` of its example's packed tokens, not on padding, whose
    logits the model masks (a label there makes a loss of about 1e8; past
    the sequence, on jax, a wrong loss without an error).

    Args:
        positions: one position per example: an array or list `[examples]`
            (or `[examples, 1]`).
        lengths: each example's packed tokens, `[examples]`.
        name: what the error calls `positions`.
        ignored_label: a label that leaves an example out of the loss, also
            accepted; None for none.

    Raises:
        ValueError: naming the first example whose position is wrong.

    Example:
    >>> check_token_positions([0, 4], lengths=[3, 5])
    >>> check_token_positions([0, 4], lengths=[3, 4])
    Traceback (most recent call last):
    ...
    ValueError: y holds the position 4 for example 1, whose packed tokens are 4 (positions 0 to 3)...
    """
    values = _flat_values(positions)
    if values.dtype.kind not in "iuf":
        return
    lengths = np.asarray(lengths).reshape(-1)
    wrong = (values < 0) | (values >= lengths) | (values != np.round(values))
    if ignored_label is not None:
        wrong &= values != ignored_label
    if wrong.any():
        index = int(np.argmax(wrong))
        raise ValueError(
            f"{name} holds the position {values[index].item()} for example {index}, whose "
            f"packed tokens are {lengths[index]} (positions 0 to {lengths[index] - 1}): a span "
            "label indexes a token of the packed input, not padding."
        )


def check_positive_count(name, value):
    """Raises a ValueError unless `value` is None or a positive whole number (a batch size, steps).

    Example:
    >>> check_positive_count("steps", 2)
    >>> check_positive_count("steps", -1)
    Traceback (most recent call last):
    ...
    ValueError: steps must be a positive whole number, got -1.
    """
    if value is None:
        return
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive whole number, got {value!r}.")


def labels_of_one_output(labels):
    """`labels` as a list where it is a tuple of single labels (as `zip(*rows)` gives them).

    Keras takes a tuple of labels for a model of several outputs, one part
    each; a tuple of numbers or strings is one output's labels.

    Example:
    >>> texts, labels = zip(*[("a good film", 1), ("a bad one", 0)])
    >>> labels_of_one_output(labels)
    [1, 0]
    >>> labels_of_one_output(([0, 2], [1, 3]))  # start and end positions: two outputs
    ([0, 2], [1, 3])
    """
    scalars = (numbers.Number, str, bytes, np.generic)
    if isinstance(labels, tuple) and labels and all(isinstance(v, scalars) for v in labels):
        return list(labels)
    return labels


def check_dataset_labels(dataset, source=""):
    """Raises where a `tf.data.Dataset` of texts has string labels (see `text_inputs.dataset_labels`).

    As for arrays (see `check_array_inputs`); anything else passes.

    Example:
    >>> import tensorflow as tf
    >>> pairs = (["a film"], ["a movie"])
    >>> check_dataset_labels(tf.data.Dataset.from_tensor_slices((pairs, ["same"])).batch(1))
    Traceback (most recent call last):
    ...
    ValueError: x's labels are strings (tf.string); labels are numbers, such as class ids from 0: ...
    """
    labels = dataset_labels(dataset) if holds_dataset(dataset) else ()
    if not labels:
        return
    import tensorflow as tf  # imported already: `dataset` is a tf.data.Dataset

    if any(spec.dtype == tf.string for spec in tf.nest.flatten(labels[0])):
        raise ValueError(
            f"{source}x's labels are strings (tf.string); labels are numbers, such as class ids "
            "from 0: map your label names to them first (in the dataset, with a "
            "tf.lookup.StaticHashTable, say)."
        )


def _is_array_like(data):
    """Lists, tuples, dicts, numpy arrays and tensors: inputs whose examples can be counted."""
    if isinstance(data, (list, tuple, dict, np.ndarray)):
        return True
    return hasattr(data, "shape") and hasattr(data, "dtype")


def _named_parts(name, data):
    """`[(name, array)]` for the arrays of `data`: a tuple's parts and a dict's values named."""
    if data is None:
        return []
    if isinstance(data, tuple):
        return [(f"{name}[{index}]", part) for index, part in enumerate(data)]
    if isinstance(data, dict):
        return [(f"{name}[{key!r}]", part) for key, part in data.items()]
    return [(name, data)]


def _count(array):
    shape = getattr(array, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) else 1
    return len(array)


def _check_text_pair(name, parts):
    """A tuple of texts is a pair of batches `(texts, text_pairs)`: two parts, neither one string."""
    for part_name, part in parts:
        if part is None or isinstance(part, (str, bytes)):
            raise ValueError(
                f"{part_name} is {'None' if part is None else f'one string ({_shown(part)})'}; "
                f"a tuple {name} holds pairs (texts, text_pairs), each part a batch: give single "
                "texts as one list, pairs as a tuple of two lists."
            )
    if len(parts) != 2:
        raise ValueError(
            f"{name} is a tuple of {len(parts)} parts; a tuple of texts holds a pair (texts, "
            "text_pairs), each part a batch."
        )


def _check_no_tuples_of_texts(name, texts):
    """A list of `(text_a, text_b)` tuples: pairs, which go as a tuple of two batches instead."""
    if not isinstance(texts, list) or not texts or not isinstance(texts[0], tuple):
        return
    if holds_text(list(texts[0])):
        raise ValueError(
            f"{name} holds tuples ({name}[0] is a tuple) where one text per example goes: give "
            "sentence pairs as a tuple (texts, text_pairs), such as tuple(zip(*pairs))."
        )


def _check_texts_are_strings(name, texts):
    """Every leaf of lists (or object arrays) holding text is a string."""
    if not (isinstance(texts, list) or (isinstance(texts, np.ndarray) and texts.dtype == object)):
        return  # string arrays and tensors hold strings by their dtype
    if not holds_text(texts):
        return  # not text: token ids, which Keras checks
    for index, text in enumerate(texts):
        if isinstance(text, (list, tuple, np.ndarray)):
            _check_texts_are_strings(f"{name}[{index}]", list(text))
        elif not isinstance(text, (str, bytes)):
            raise ValueError(
                f"{name}[{index}] is {_shown(text)}, not a string: every text is a str or bytes."
            )


def _check_not_strings(name, labels):
    if isinstance(labels, (list, np.ndarray)) and holds_text(labels):
        raise ValueError(
            f"{name} holds strings ({_shown(_first_leaf(labels))}, …); labels are numbers, such as class ids "
            "from 0: map your label names to them first."
        )


def _first_leaf(data):
    """The first element of nested lists or arrays, or None where there is none."""
    while isinstance(data, (list, tuple, np.ndarray)):
        if len(data) == 0:
            return None
        data = data[0]
    return data


def _flat_values(data):
    """All numbers of an array, nested lists or a `tf.RaggedTensor`, as one numpy vector."""
    flat_values = getattr(data, "flat_values", None)  # a tf.RaggedTensor
    if flat_values is not None:
        return np.asarray(flat_values).ravel()
    if isinstance(data, (list, tuple)) and any(
        isinstance(item, (list, tuple, np.ndarray)) for item in data
    ):
        parts = [_flat_values(item) for item in data]
        return np.concatenate(parts) if parts else np.zeros([0])
    return np.asarray(data).ravel()


def _shown(value):
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARACTERS else text[: _SHOWN_CHARACTERS - 1] + "…"
