"""Batches of packed examples padded to their longest example, not to the sequence length.

Short texts make up most fine-tuning data (SST-2 sentences average about 13
word pieces), so a batch padded to `max_seq_length` computes mostly
padding. `batch_by_length` trims each packed example to its tokens and pads
each batch to its longest one, rounded up to a multiple of
`pad_to_multiple_of` so that backends compiling one program per shape (JAX,
TensorFlow with XLA) compile at most `sequence_length / pad_to_multiple_of`
of them. Padding is masked, so the model's outputs and losses are the
padded-to-the-maximum ones. With `bucket=True`, examples of one rounded
length are also batched together (tf.data's `bucket_by_sequence_length`),
so a shuffled stream's batches carry almost no padding at all.
`max_widths` caps the widths at a few chosen from the data's own lengths
(`fewest_padding_widths`); `compile_tokens` keeps only the widths whose
padding saved pays for their compile, and `compiled_widths` makes free
those an earlier call compiled. `trimmed_batch`
does the same to batches already padded to the sequence length
(pretraining records).
"""

import numpy as np
import tensorflow as tf
from absl import logging

# Widths of batches are multiples of this: 8 shapes for sequences of 128.
PAD_TO_MULTIPLE_OF = 16
# Where XLA compiles a program per batch width, the tokens whose prediction, or whose training
# steps, cost about as much as compiling one (BERT on CPUs; on accelerators, compiling costs more
# tokens): `fewest_padding_widths`' price of a width.
PREDICTION_COMPILE_TOKENS = 8192
TRAINING_COMPILE_TOKENS = 10240
# Where XLA compiles a program per prediction width, the widths are multiples of this: a later
# call on other texts then finds more of its widths compiled.
COMPILED_PREDICTION_MULTIPLE = 8
# In 16-bit precision, widths are multiples of this: the tensor cores' tile.
HALF_PRECISION_MULTIPLE = 8
# The per-token features of packed examples; others (masked positions) keep their length.
PACKED_FEATURES = ("token_ids", "segment_ids", "padding_mask")


def batch_by_length(
    dataset,
    batch_size,
    pad_to_multiple_of=PAD_TO_MULTIPLE_OF,
    token_labels_fill=None,
    drop_remainder=False,
    bucket=False,
    bucket_width=None,
    max_widths=None,
    compile_tokens=0,
    compiled_widths=None,
):
    """Batches `dataset`, each batch as long as its longest example (rounded up).

    Args:
        dataset: an unbatched `tf.data.Dataset` of packed features (a dict
            with `token_ids`, `segment_ids`, `padding_mask`, each
            `[sequence_length]` or `[num_choices, sequence_length]`, and
            maybe others, such as masked positions, kept as they are), or of
            `(features, labels)` or `(features, labels, sample_weights)`;
            labels may be a dict (e.g. a question answerer's positions).
        batch_size: examples per batch.
        pad_to_multiple_of: batch widths are multiples of it (or the
            sequence length).
        token_labels_fill: when labels (and weights) are per token
            (`[sequence_length]`, token tagging), the label that pads them;
            their weights are padded with 0. None: labels are per example.
        drop_remainder: drop a last, smaller batch.
        bucket: batch each example with others of its rounded length: a
            batch fills from the examples of one length bucket, in stream
            order. At the end of the stream the buckets' leftovers are
            batched together (mixed lengths, in at most one batch per
            bucket), so a pass has as many batches as without buckets. The
            stream's shuffling decides which examples meet; the order of
            batches follows it too, as each batch leaves when it is full.
        bucket_width: lengths per bucket (default `pad_to_multiple_of`):
            bucket k holds the lengths (k-1)*bucket_width+1 ... k*bucket_width.
        max_widths: at most this many batch widths, the multiples of
            `pad_to_multiple_of` that pad least (`fewest_padding_widths`)
            the examples (with `bucket`) or the batches of one pass in the
            stream's order (counted in one pass over `dataset`). Each batch
            is as wide as the narrowest width that holds it, and buckets
            (replacing `bucket_width`) hold the lengths between two widths;
            a last, smaller batch (a program of its own where XLA compiles
            each shape) takes the widest, whatever its examples, so that
            the passes compile one program for it, not one per width.
            None: every multiple, unless `compile_tokens`.
        compile_tokens: the tokens (of every sequence: a multiple-choice
            example has several) a width should save in one pass to earn
            its compile (`fewest_padding_widths`, counted in one pass as
            with `max_widths`); 0: widths cost nothing.
        compiled_widths: the widths the training step has compiled, by
            batch shape without the width (a dict such as
            `BertTask.compiled_widths("train")`): with `compile_tokens`,
            they cost no compile, and the widths chosen are added. None:
            every width costs one.

    Returns:
        A batched `tf.data.Dataset` of the same structure.

    Raises:
        ValueError: features without `padding_mask` or a static sequence
            length.

    Example:
    >>> import tensorflow as tf
    >>> mask = tf.constant([[1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0]])
    >>> features = {"token_ids": mask * 7, "segment_ids": mask * 0, "padding_mask": mask}
    >>> dataset = tf.data.Dataset.from_tensor_slices((features, [0, 1, 2]))
    >>> batches = batch_by_length(dataset, batch_size=2, pad_to_multiple_of=2)
    >>> [batch["token_ids"].numpy().tolist() for batch, _ in batches]
    [[[7, 7, 0, 0], [7, 7, 7, 0]], [[7, 0]]]
    >>> buckets = batch_by_length(dataset, batch_size=2, pad_to_multiple_of=2, bucket=True)
    >>> [batch["token_ids"].numpy().tolist() for batch, _ in buckets]
    [[[7, 7], [7, 0]], [[7, 7, 7, 0]]]
    >>> masks = tf.sequence_mask([2, 3, 1, 4, 2, 3], 6, dtype=tf.int32)
    >>> six = tf.data.Dataset.from_tensor_slices(
    ...     ({"token_ids": masks, "segment_ids": masks * 0, "padding_mask": masks}, tf.range(6)))
    >>> [(labels.numpy().tolist(), batch["token_ids"].shape[1]) for batch, labels in
    ...  batch_by_length(six, batch_size=2, pad_to_multiple_of=2, bucket=True)]
    [([0, 2], 2), ([1, 3], 4), ([4, 5], 4)]
    >>> [(labels.numpy().tolist(), batch["token_ids"].shape[1]) for batch, labels in
    ...  batch_by_length(six, batch_size=2, pad_to_multiple_of=1, bucket=True, bucket_width=2)]
    [([0, 2], 2), ([1, 3], 4), ([4, 5], 3)]
    >>> [(labels.numpy().tolist(), batch["token_ids"].shape[1]) for batch, labels in
    ...  batch_by_length(six, batch_size=2, pad_to_multiple_of=1, bucket=True, max_widths=2)]
    [([0, 2], 2), ([1, 3], 4), ([4, 5], 4)]
    """
    features_spec = _features_spec(dataset.element_spec)
    sequence_length = features_spec["padding_mask"].shape[-1]
    if sequence_length is None:
        raise ValueError(
            "batch_by_length needs features of a static sequence length, got padding_mask "
            f"of shape {features_spec['padding_mask'].shape}."
        )
    per_token = token_labels_fill is not None
    chosen = max_widths is not None or compile_tokens > 0
    if not chosen:
        widths = _candidate_widths(sequence_length, pad_to_multiple_of, sequence_length)
    else:
        lengths = _dataset_lengths(dataset)
        sequences = np.prod(features_spec["padding_mask"].shape[:-1], dtype=int)
        if not bucket:  # a batch is as long as its longest example
            lengths = _longest_per_batch(lengths, batch_size)
            sequences *= batch_size
        compiled = _compiled_at(
            compiled_widths, (batch_size, *features_spec["padding_mask"].shape[:-1])
        )
        widths = _logged_widths(
            "training " + ("examples" if bucket else "batches"),
            lengths,
            sequences,
            max_widths,
            pad_to_multiple_of,
            sequence_length,
            compile_tokens,
            compiled,
        )
        compiled.update(int(width) for width in widths)  # reshuffled batches may take any
        if bucket and len(widths) == 1:
            logging.warning(
                "Bucketing by length keeps one width (%d) for these examples (max_widths, or "
                "what XLA's compiles cost, allow no other): one bucket, so the batches are "
                "those of a run without bucket_by_length.",
                int(widths[0]),
            )

    def trimmed(*element):
        features, *rest = element
        length = _example_length(features)

        def trim(tensor):
            return tensor[..., :length]

        features = {
            name: trim(tensor) if name in PACKED_FEATURES else tensor
            for name, tensor in features.items()
        }
        rest = [tf.nest.map_structure(trim, part) if per_token else part for part in rest]
        return (features, *rest) if rest else features

    def widened(*batch):
        shape = tf.shape(batch[0]["padding_mask"])
        target = tf.gather(widths, tf.searchsorted(widths, shape[-1:]))[0]
        if chosen:
            target = tf.where(shape[0] < batch_size, widths[-1], target)
        return _padded_to(
            batch if len(batch) > 1 else batch[0], target, per_token, token_labels_fill
        )

    padding_values = _padding_values(dataset.element_spec, per_token, token_labels_fill)
    dataset = dataset.map(trimmed, num_parallel_calls=tf.data.AUTOTUNE)
    if bucket:
        if not chosen:
            # Bucket k holds the lengths (k-1)*w+1 ... k*w; 0 and 1..w share one.
            width = bucket_width or pad_to_multiple_of
            boundaries = list(range(width + 1, sequence_length + 1, width))
        else:
            boundaries = [int(width) + 1 for width in widths[:-1]]
        dataset = dataset.bucket_by_sequence_length(
            lambda *element: tf.shape(element[0]["padding_mask"])[-1],
            boundaries,
            [batch_size] * (len(boundaries) + 1),
            padding_values=padding_values,
        )
        # Full batches only, until the stream ends and each bucket's partial
        # batch follows. Batched again, every full batch stays as it is (it
        # starts a whole number of batches into the stream), and the partial
        # ones pool into full batches of mixed lengths: one smaller batch
        # at most, the last, so no new batch sizes for XLA to compile.
        dataset = dataset.unbatch()
    dataset = dataset.padded_batch(
        batch_size, padding_values=padding_values, drop_remainder=drop_remainder
    )
    return dataset.map(widened, num_parallel_calls=tf.data.AUTOTUNE)


def trimmed_batch(features, pad_to_multiple_of=PAD_TO_MULTIPLE_OF):
    """A padded batch cut to its longest example, rounded up to a multiple of `pad_to_multiple_of`.

    Only `PACKED_FEATURES` (`[batch, sequence_length]`) are cut; the cut-off
    positions are padding of every example, which the model masks.

    Args:
        features: a dict of batched features with `padding_mask`.
        pad_to_multiple_of: the width is a multiple of it (or the sequence
            length).

    Returns:
        The features, `PACKED_FEATURES` `[batch, width]`.

    Example:
    >>> import tensorflow as tf
    >>> mask = tf.constant([[1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0]])
    >>> features = {"token_ids": mask * 7, "segment_ids": mask * 0, "padding_mask": mask,
    ...             "masked_positions": tf.constant([[1], [2]])}
    >>> batch = trimmed_batch(features, pad_to_multiple_of=2)
    >>> batch["token_ids"].numpy().tolist(), batch["masked_positions"].shape.as_list()
    ([[7, 7, 0, 0], [7, 7, 7, 0]], [2, 1])
    """
    mask = features["padding_mask"]
    sequence_length = tf.shape(mask)[-1]
    longest = tf.reduce_max(tf.reduce_sum(mask, axis=-1))
    width = tf.minimum(-(-longest // pad_to_multiple_of) * pad_to_multiple_of, sequence_length)
    return {
        name: tensor[..., :width] if name in PACKED_FEATURES else tensor
        for name, tensor in features.items()
    }


def _example_length(features):
    """An unbatched packed example's tokens (of several sequences, its longest's)."""
    return tf.reduce_max(tf.reduce_sum(features["padding_mask"], axis=-1))


def _dataset_lengths(dataset):
    """Each example's tokens, `[examples]`, in one pass over an unbatched packed `dataset`."""
    counted = dataset.map(
        lambda *element: _example_length(element[0]), num_parallel_calls=tf.data.AUTOTUNE
    ).batch(4096)
    return np.concatenate([batch.numpy() for batch in counted])


def _longest_per_batch(lengths, batch_size):
    """The longest of each run of `batch_size` consecutive `lengths`."""
    return np.maximum.reduceat(lengths, np.arange(0, len(lengths), batch_size))


def _features_spec(element_spec):
    features = element_spec[0] if isinstance(element_spec, tuple) else element_spec
    if not isinstance(features, dict) or "padding_mask" not in features:
        raise ValueError(
            "batch_by_length takes examples of packed features (a dict with padding_mask), "
            f"got {element_spec}."
        )
    return features


def _padding_values(element_spec, per_token, token_labels_fill):
    def fill_of(value):
        return lambda spec: tf.constant(value, spec.dtype)

    if not isinstance(element_spec, tuple):
        return tf.nest.map_structure(fill_of(0), element_spec)
    features, *rest = element_spec
    fills = [token_labels_fill if per_token else 0, 0]
    return (
        tf.nest.map_structure(fill_of(0), features),
        *(tf.nest.map_structure(fill_of(fill), spec) for spec, fill in zip(rest, fills)),
    )


def _padded_to(element, width, per_token, token_labels_fill):
    def padder(fill):
        def pad(tensor):
            if tensor.shape.rank < 2:  # a batch of per-example values
                return tensor
            padding = [[0, 0]] * (tensor.shape.rank - 1) + [[0, width - tf.shape(tensor)[-1]]]
            return tf.pad(tensor, padding, constant_values=tf.cast(fill, tensor.dtype))

        return pad

    def padded_features(features):
        return {
            name: padder(0)(tensor) if name in PACKED_FEATURES else tensor
            for name, tensor in features.items()
        }

    if not isinstance(element, tuple):
        return padded_features(element)
    features, *rest = element
    fills = [token_labels_fill if per_token else 0, 0]
    return (
        padded_features(features),
        *(
            tf.nest.map_structure(padder(fill), part) if per_token else part
            for part, fill in zip(rest, fills)
        ),
    )


def predict_by_length(
    predict_batch,
    features,
    batch_size,
    per_token_outputs=False,
    fill=0.0,
    pad_to_multiple_of=PAD_TO_MULTIPLE_OF,
    full_batches=False,
    max_widths=None,
    compile_tokens=0,
    compiled_widths=None,
    filling_tokens=None,
):
    """Predictions for packed examples, batched shortest first, in the examples' order.

    Examples are sorted by length, batched, and each batch trimmed to its
    longest example rounded up to `pad_to_multiple_of`; the predictions come
    back in the original order. Sorting puts texts of similar length
    together, so batches carry little padding.

    Args:
        predict_batch: a batch of features -> an array or a dict of arrays
            (e.g. `model.predict_on_batch`).
        features: dict of int32 arrays `[examples, ..., sequence_length]`
            with `padding_mask`; others (`masked_positions`), which are
            not per token, are batched uncut.
        batch_size: examples per batch.
        per_token_outputs: the outputs have a length axis after the batch
            axis (`[batch, length, ...]`: token logits, span logits); they
            are padded back to `sequence_length` with `fill`.
        fill: the value of per-token outputs on the positions cut off.
        pad_to_multiple_of: batch widths are multiples of it.
        full_batches: fill a short last batch up to `batch_size` with copies
            of its last example (`whole_batches`), whose outputs are dropped:
            where each input shape compiles a program (XLA), the last batch
            then needs none of its own.
        max_widths: at most this many batch widths, those that pad these
            batches least (`fewest_padding_widths`); each batch is as wide
            as the narrowest that holds it. None: every multiple, unless
            `compile_tokens`.
        compile_tokens: the tokens (of every sequence: a multiple-choice
            example has several) a width should save to earn its compile
            (`fewest_padding_widths`); 0: widths cost nothing.
        compiled_widths: the widths `predict_batch` has compiled, by batch
            shape without the width (a dict such as
            `BertTask.compiled_widths("predict")`): with `compile_tokens`,
            they cost no compile, and each batch's width is added at its
            shape (a short last batch's at its own). None: every width
            costs one.
        filling_tokens: with `full_batches` and `compile_tokens`, a dict
            that a model keeps from call to call: a call of one short batch
            (a few texts) is then filled as a last batch is, up to the rows
            of a program in `compiled_widths`, rather than compiling its own
            rows, until the tokens that filling has cost beyond the call's
            own, counted here by the program it would compile (`((rows,
            ...), width)`), reach `compile_tokens`
            (a ski rental: a few calls take the programs at hand, many
            calls pay one compile more than the better choice in hindsight).
            None: such a call compiles its own.

    Returns:
        The predictions of all examples: an array or a dict of arrays.

    Example:
    >>> import numpy as np
    >>> mask = np.array([[1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0]])
    >>> features = {"token_ids": mask, "segment_ids": mask * 0, "padding_mask": mask}
    >>> widths = lambda batch: np.full(len(batch["token_ids"]), batch["token_ids"].shape[1])
    >>> predict_by_length(widths, features, batch_size=2, pad_to_multiple_of=1).tolist()
    [3, 2, 2]
    >>> sizes = lambda batch: np.full(len(batch["token_ids"]), len(batch["token_ids"]))
    >>> predict_by_length(sizes, features, batch_size=2, full_batches=True).tolist()
    [2, 2, 2]
    """
    features = {name: np.asarray(array) for name, array in features.items()}
    sequence_length = features["padding_mask"].shape[-1]
    lengths = example_lengths(features["padding_mask"])
    order, filled, widths = _prediction_plan(
        lengths,
        features,
        batch_size,
        pad_to_multiple_of,
        full_batches,
        max_widths,
        compile_tokens,
        compiled_widths,
        filling_tokens,
    )
    features = _widened(features, widths[-1])
    batches = []
    for start in range(0, len(filled), batch_size):
        rows = filled[start : start + batch_size]
        width = int(widths[np.searchsorted(widths, lengths[rows].max())])
        outputs = predict_batch(
            {
                name: array[rows, ..., :width] if name in PACKED_FEATURES else array[rows]
                for name, array in features.items()
            }
        )
        if per_token_outputs:
            outputs = _tree_map(
                lambda array: _padded_length_axis(np.asarray(array), sequence_length, fill), outputs
            )
        batches.append(outputs)
    return _tree_map(lambda *arrays: in_input_order(np.concatenate(arrays), order), *batches)


def length_sorted_dataset(
    features,
    batch_size,
    pad_to_multiple_of=PAD_TO_MULTIPLE_OF,
    full_batches=False,
    max_widths=None,
    compile_tokens=0,
    compiled_widths=None,
    filling_tokens=None,
    columns=(),
):
    """Packed examples shortest first, batched as `predict_by_length` batches them: a dataset.

    For `keras.Model.predict` and `evaluate`: each batch is as wide as the
    narrowest width that holds its longest example, the widths chosen as
    `predict_by_length` chooses them (its arguments have its meanings).
    `in_input_order(predictions, order)` puts the predictions back in the
    examples' order. `columns` (labels, sample weights: numpy
    arrays `[examples, ...]`, or dicts of them) come along in the same order; give them without
    `full_batches`, which repeats examples.

    Returns:
        `(order, dataset)`: the examples' order in the dataset, and a
        `tf.data.Dataset` of dicts of int tensors `[batch, ..., width]`,
        or of tuples `(features, *columns)`.

    Example:
    >>> mask = np.array([[1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0]])
    >>> features = {"token_ids": mask, "segment_ids": mask * 0, "padding_mask": mask}
    >>> order, dataset = length_sorted_dataset(features, batch_size=2, pad_to_multiple_of=1)
    >>> order.tolist(), [batch["padding_mask"].shape.as_list() for batch in dataset]
    ([1, 2, 0], [[2, 2], [1, 3]])
    """
    features = {name: np.asarray(array) for name, array in features.items()}
    lengths = example_lengths(features["padding_mask"])
    order, filled, widths = _prediction_plan(
        lengths,
        features,
        batch_size,
        pad_to_multiple_of,
        full_batches,
        max_widths,
        compile_tokens,
        compiled_widths,
        filling_tokens,
    )
    features = _widened(features, widths[-1])
    widths = tf.constant(widths)

    @tf.autograph.experimental.do_not_convert
    def trimmed(batch):
        longest = tf.reduce_max(tf.reduce_sum(batch["padding_mask"], axis=-1))
        width = tf.gather(widths, tf.searchsorted(widths, [tf.cast(longest, widths.dtype)]))[0]
        return {
            name: tensor[..., :width] if name in PACKED_FEATURES else tensor
            for name, tensor in batch.items()
        }

    sorted_features = {name: array[filled] for name, array in features.items()}
    if not columns:
        dataset = tf.data.Dataset.from_tensor_slices(sorted_features).batch(batch_size)
        return order, dataset.map(trimmed)
    sorted_columns = tf.nest.map_structure(lambda array: np.asarray(array)[filled], columns)
    dataset = tf.data.Dataset.from_tensor_slices((sorted_features, *sorted_columns))
    return order, dataset.batch(batch_size).map(lambda batch, *rest: (trimmed(batch), *rest))


def _prediction_plan(
    lengths,
    features,
    batch_size,
    pad_to_multiple_of,
    full_batches,
    max_widths,
    compile_tokens,
    compiled_widths,
    filling_tokens,
):
    """`predict_by_length`'s batches: `(order, filled, widths)`.

    `order` takes the examples shortest first; `filled` is `order` filled
    up to whole batches where `full_batches`; `widths` are the batches'.
    `compiled_widths`, where given, makes the widths compiled at the
    batches' shape free, and gets each batch's width at its shape (a short
    last batch's at its own). `filling_tokens`, where given, lets a call of
    one short batch fill its rows up to a compiled program's.
    """
    sequence_length = features["padding_mask"].shape[-1]
    order = np.argsort(lengths, kind="stable")
    filled = whole_batches(order, batch_size) if full_batches else order
    if max_widths is None and not compile_tokens:
        widths = _candidate_widths(lengths.max(), pad_to_multiple_of, sequence_length)
        return order, filled, widths
    per_example = features["padding_mask"].shape[1:-1]
    if full_batches and compile_tokens and filling_tokens is not None and len(order) < batch_size:
        compiled_batch = _compiled_batch_holding(
            order,
            lengths[order[-1]],
            batch_size,
            per_example,
            _candidate_widths(lengths[order[-1]], pad_to_multiple_of, sequence_length)[-1],
            compile_tokens,
            compiled_widths,
            filling_tokens,
        )
        if compiled_batch is not None:
            return (order, *compiled_batch)
    batch_shape = (min(batch_size, len(filled)), *per_example)
    longest = _longest_per_batch(lengths[filled], batch_size)
    compiled = _compiled_at(compiled_widths, batch_shape)
    widths = _logged_widths(
        "prediction batches",
        longest,
        np.prod(batch_shape, dtype=int),
        max_widths,
        pad_to_multiple_of,
        sequence_length,
        compile_tokens,
        compiled,
    )
    taken = widths[np.searchsorted(widths, longest)].tolist()  # each batch's width
    short = len(filled) % batch_size if len(filled) > batch_size else 0
    if short:  # the last batch, shorter, compiles a program of its own shape
        _compiled_at(compiled_widths, (short, *per_example)).add(taken.pop())
    compiled.update(taken)
    return order, filled, widths


def _compiled_batch_holding(
    order,
    longest,
    batch_size,
    per_example,
    new_width,
    compile_tokens,
    compiled_widths,
    filling_tokens,
):
    """One short batch filled to a compiled program's rows, while filling has cost less than a compile.

    A call of fewer examples than `batch_size` (an interactive user's, a
    service's small request) would compile its own widths at its own rows.
    Filled with copies of its last example up to the rows of a program
    compiled before (no more than `batch_size`), at a width that holds
    `longest`, it computes the padding instead: the tokens beyond its own
    `new_width` are added to `filling_tokens` at the program it would
    compile (its shape and `new_width`), as long as they stay within
    `compile_tokens` there.

    Returns:
        `(filled, widths)` as `_prediction_plan` gives them, or None where
        the call compiles its own.
    """
    per_row = int(np.prod(per_example, dtype=int))
    program = ((len(order), *per_example), int(new_width))  # the one it would compile
    cost, rows, width = min(
        (
            (compiled[0] * per_row * width, compiled[0], width)
            for compiled, widths in (compiled_widths or {}).items()
            if tuple(compiled[1:]) == tuple(per_example) and len(order) <= compiled[0] <= batch_size
            for width in widths
            if width >= longest
        ),
        default=(np.inf, None, None),
    )
    paid = filling_tokens.get(program, 0) + cost - len(order) * per_row * new_width
    if paid > compile_tokens:
        return None
    filling_tokens[program] = int(paid)
    logging.info(
        "A batch of %d examples filled to %d rows, at width %d compiled already.",
        len(order),
        rows,
        width,
    )
    return _filled_to(order, rows), np.array([width], np.int32)


def precision_width_multiple(compute_dtype):
    """Batch widths are multiples of this: 1 in float32, 8 in 16-bit (the tensor cores' tile).

    Example:
    >>> precision_width_multiple("float32"), precision_width_multiple("bfloat16")
    (1, 8)
    """
    return 1 if compute_dtype == "float32" else HALF_PRECISION_MULTIPLE


def prediction_width_multiple(pad_to_multiple_of, compiled_per_shape):
    """Prediction's widths are multiples of this: coarser where XLA compiles each width.

    Where each width compiles a program, widths of `COMPILED_PREDICTION_MULTIPLE`
    serve more of the lengths that later calls bring.

    Example:
    >>> prediction_width_multiple(1, compiled_per_shape=True), prediction_width_multiple(1, False)
    (8, 1)
    """
    if compiled_per_shape:
        return max(pad_to_multiple_of, COMPILED_PREDICTION_MULTIPLE)
    return pad_to_multiple_of


def fewest_padding_widths(
    lengths,
    max_widths=None,
    pad_to_multiple_of=PAD_TO_MULTIPLE_OF,
    sequence_length=None,
    compile_tokens=0,
    compiled_widths=(),
):
    """The batch widths that pad sequences of `lengths` least, each new width costing `compile_tokens`.

    Candidates are the multiples of `pad_to_multiple_of` (and
    `sequence_length`, the widest) up to the longest sequence's, and
    `compiled_widths`; a sequence (an example in a bucket, or a batch's
    longest) takes the narrowest chosen width that holds it. Of all choices
    of at most `max_widths` widths that hold every sequence, the one with
    the fewest tokens in all plus `compile_tokens` per width not compiled
    yet (found exactly, by dynamic programming over the candidates). Where
    each width compiles a program (XLA), this spares the compiles that a
    run's rare lengths would otherwise each add for a few batches, and
    takes the widths of earlier calls where they pad less than a compile
    costs.

    Args:
        lengths: each sequence's tokens, `[sequences]`.
        max_widths: how many widths at most, >= 1; None: any number.
        pad_to_multiple_of: widths are multiples of it (or `sequence_length`).
        sequence_length: the widest a batch may be; None: no limit.
        compile_tokens: what one more width costs, in tokens of `lengths`
            (a compile's worth of computing); 0: padding alone decides.
        compiled_widths: widths that cost nothing (compiled already), of
            any multiple.

    Returns:
        The widths, ascending: an int32 array whose last element holds the
        longest sequence.

    Raises:
        ValueError: `max_widths` < 1, no lengths, or lengths beyond
            `sequence_length`.

    Example:
    >>> lengths = [3] * 50 + [20] * 30 + [40] * 5 + [50]
    >>> fewest_padding_widths(lengths, max_widths=3).tolist()  # 40 and 50 share 64
    [16, 32, 64]
    >>> fewest_padding_widths(lengths).tolist()
    [16, 32, 48, 64]
    >>> fewest_padding_widths(lengths, compile_tokens=100).tolist()  # 48 saves 5 * 16 tokens
    [16, 32, 64]
    >>> fewest_padding_widths(lengths, compile_tokens=100, compiled_widths=[24, 56]).tolist()
    [16, 24, 56]
    >>> fewest_padding_widths(lengths, max_widths=1, sequence_length=60).tolist()
    [60]
    """
    lengths = np.asarray(lengths, np.int64).reshape(-1)
    if (max_widths is not None and max_widths < 1) or not len(lengths):
        raise ValueError(
            f"fewest_padding_widths needs max_widths >= 1 and some lengths, got "
            f"max_widths={max_widths} and {len(lengths)} lengths."
        )
    if sequence_length is not None and lengths.max() > sequence_length:
        raise ValueError(
            f"A sequence of {lengths.max()} tokens is longer than sequence_length "
            f"{sequence_length}."
        )
    multiples = _candidate_widths(lengths.max(), pad_to_multiple_of, sequence_length)
    # Only widths that some sequence rounds up to can be best: another narrows for less.
    rounded = multiples[np.searchsorted(multiples, lengths)]
    compiled = _useful_compiled_widths(compiled_widths, lengths, sequence_length)
    candidates = np.union1d(rounded, compiled).astype(np.int32)
    counts = np.bincount(np.searchsorted(candidates, lengths), minlength=len(candidates))
    width_costs = np.where(np.isin(candidates, compiled), 0.0, compile_tokens)
    max_widths = min(max_widths or len(candidates), len(candidates))
    return candidates[_least_padding_choice(candidates, counts, max_widths, width_costs)]


def _useful_compiled_widths(compiled_widths, lengths, sequence_length):
    """Of `compiled_widths`, those that can be best: some sequence fits, no wider than needed."""
    compiled = np.unique(np.asarray(list(compiled_widths), np.int64))
    compiled = compiled[(compiled >= lengths.min()) & (compiled <= (sequence_length or np.inf))]
    holding_all = compiled[compiled >= lengths.max()]
    return np.concatenate([compiled[compiled < lengths.max()], holding_all[:1]])


def _logged_widths(
    counted,
    lengths,
    sequences,
    max_widths,
    pad_to_multiple_of,
    sequence_length,
    compile_tokens,
    compiled_widths,
):
    """`fewest_padding_widths` for `lengths`, free where in `compiled_widths` (a set), and logged.

    A length counted stands for `sequences` rows of that width (a batch's
    rows, an example's choices), so a compile costs `compile_tokens /
    sequences` of it. The caller records the widths its batches compile.
    """
    widths = fewest_padding_widths(
        lengths,
        max_widths,
        pad_to_multiple_of,
        sequence_length,
        compile_tokens / sequences,
        compiled_widths,
    )
    reused = sorted(set(widths.tolist()) & set(compiled_widths))
    logging.info(
        "Batch widths %s, those that pad %d %s least%s%s.",
        widths.tolist(),
        len(lengths),
        counted,
        f", each compile costing {compile_tokens:g} tokens" if compile_tokens else "",
        f" ({reused} compiled already)" if reused else "",
    )
    return widths


def _compiled_at(compiled_widths, batch_shape):
    """The widths of `compiled_widths` compiled at `batch_shape`: a set to add to."""
    return set() if compiled_widths is None else compiled_widths.setdefault(batch_shape, set())


def _candidate_widths(longest, pad_to_multiple_of, sequence_length):
    """Multiples of `pad_to_multiple_of` up to `longest`'s, capped at `sequence_length`."""
    widest = -(-int(longest) // pad_to_multiple_of) * pad_to_multiple_of
    widths = np.arange(pad_to_multiple_of, widest + 1, pad_to_multiple_of)
    if sequence_length is not None:
        widths = np.unique(np.minimum(widths, sequence_length))
    return widths.astype(np.int32)


def _least_padding_choice(widths, counts, max_widths, width_costs):
    """Indices of at most `max_widths` of `widths`, the widest holding every count, costing least.

    The cost is the tokens the widths pad `counts` to, plus each chosen
    width's `width_costs`.

    `tokens[k][j]`: the least cost of the examples up to candidate j, with
    k+1 chosen widths, the widest being j.
    """
    size = len(widths)
    prefix = np.cumsum(counts)
    tokens = np.full((max_widths, size), np.inf)
    previous = np.full((max_widths, size), -1)
    tokens[0] = widths * prefix + width_costs
    # padded[j, i]: the examples past candidate i up to j, padded to width j (i < j).
    padded = np.where(
        np.tri(size, k=-1, dtype=bool),
        widths[:, None] * (prefix[:, None] - prefix[None, :]),
        np.inf,
    )
    for k in range(1, max_widths):
        costs = tokens[k - 1][None, :] + padded  # [j, i]: i the next narrower chosen width
        previous[k] = np.argmin(costs, axis=1)
        tokens[k] = costs.min(axis=1) + width_costs
    holds_all = prefix == prefix[-1]
    k, j = np.unravel_index(np.argmin(np.where(holds_all, tokens, np.inf)), tokens.shape)
    chosen = []
    while k >= 0:
        chosen.append(j)
        j, k = previous[k][j], k - 1
    return np.array(chosen[::-1])


def whole_batches(order, batch_size):
    """`order` with its last index repeated to fill its last batch, if it has more than one.

    For prediction where each input shape compiles a program (XLA): a short
    last batch would need a program of its own. The caller drops the
    outputs past `len(order)`. A single short batch is left as it is.

    Example:
    >>> import numpy as np
    >>> whole_batches(np.array([2, 0, 1]), batch_size=2).tolist()
    [2, 0, 1, 1]
    >>> whole_batches(np.array([2, 0, 1]), batch_size=4).tolist()
    [2, 0, 1]
    """
    if len(order) <= batch_size:
        return order
    return _filled_to(order, -(-len(order) // batch_size) * batch_size)


def _filled_to(order, rows):
    """`order` with its last index repeated up to `rows` indices."""
    return np.concatenate([order, np.repeat(order[-1:], rows - len(order))])


def in_input_order(predictions, order):
    """Predictions made in `order` (perhaps filled by `whole_batches`), back in the input's.

    Example:
    >>> import numpy as np
    >>> in_input_order(np.array([20, 0, 10, 10]), order=np.array([2, 0, 1])).tolist()
    [0, 10, 20]
    """
    return predictions[: len(order)][np.argsort(order, kind="stable")]


def example_lengths(padding_mask):
    """Each example's tokens: `[examples]` from a mask `[examples, ..., sequence_length]`.

    An example of several sequences (multiple choice) is as long as its longest.

    Example:
    >>> example_lengths(np.array([[[1, 1, 0], [1, 0, 0]], [[1, 0, 0], [1, 0, 0]]])).tolist()
    [2, 1]
    """
    mask = np.asarray(padding_mask)
    return mask.reshape(len(mask), -1, mask.shape[-1]).sum(axis=-1).max(axis=-1)


def _widened(features, width):
    """Packed `features` padded (masked) to `width` tokens where narrower: a filled call's compiled width."""
    return {
        name: _padded_length_axis(array, width, 0, axis=-1)
        if name in PACKED_FEATURES and array.shape[-1] < width
        else array
        for name, array in features.items()
    }


def _padded_length_axis(array, length, fill, axis=1):
    """`[batch, width, ...]` -> `[batch, length, ...]` (or along another `axis`), cut where wider."""
    if array.shape[axis] > length:
        array = np.take(array, np.arange(length), axis=axis)
    padding = [(0, 0)] * array.ndim
    padding[axis] = (0, length - array.shape[axis])
    return np.pad(array, padding, constant_values=fill)


def _tree_map(function, *structures):
    if isinstance(structures[0], dict):
        return {
            key: function(*(structure[key] for structure in structures)) for key in structures[0]
        }
    return function(*(np.asarray(structure) for structure in structures))
