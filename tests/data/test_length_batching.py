"""Batches as long as their longest example: bounded shapes, and the same numbers as full padding."""

import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_keras.data.length_batching import batch_by_length
from bert_keras.data.length_batching import fewest_padding_widths
from bert_keras.data.length_batching import in_input_order
from bert_keras.data.length_batching import length_sorted_dataset
from bert_keras.data.length_batching import predict_by_length
from bert_keras.models.bert_classifier import BertClassifier
from bert_keras.models.bert_token_classifier import IGNORED_LABEL
from bert_keras.models.bert_token_classifier import BertTokenClassifier
from tests.test_case import TRAINING_BACKBONE
from tests.test_case import tiny_backbone

SEQUENCE_LENGTH = TRAINING_BACKBONE["max_sequence_length"]  # 32
LENGTHS = [3, 17, 5, 9, 32, 4, 12, 6, 2, 20, 7, 3]  # tokens of each packed example


def _packed_examples(lengths=LENGTHS, sequence_length=SEQUENCE_LENGTH):
    """Packed features padded to `sequence_length`, as the fine-tuning programs make them."""
    rng = np.random.default_rng(0)
    positions = np.arange(sequence_length)[None, :]
    mask = (positions < np.array(lengths)[:, None]).astype("int32")
    return {
        "token_ids": rng.integers(5, 40, mask.shape).astype("int32") * mask,
        "segment_ids": (positions >= np.array(lengths)[:, None] // 2).astype("int32") * mask,
        "padding_mask": mask,
    }


def _fixed_and_by_length(dataset, batch_size, **kwargs):
    return dataset.batch(batch_size), batch_by_length(dataset, batch_size, **kwargs)


def test_batches_are_as_long_as_their_longest_example_rounded_up():
    dataset = tf.data.Dataset.from_tensor_slices((_packed_examples(), np.arange(len(LENGTHS))))
    widths = []
    batches = list(batch_by_length(dataset, batch_size=3, pad_to_multiple_of=8))
    for features, _ in batches:
        width = features["token_ids"].shape[1]
        longest = int(features["padding_mask"].numpy().sum(axis=1).max())
        assert width % 8 == 0 and longest <= width < longest + 8
        assert {name: tensor.shape[1] for name, tensor in features.items()} == dict.fromkeys(
            features, width
        )
        widths.append(width)
    assert widths == [24, 32, 16, 24]
    assert batches[-1][1].numpy().tolist() == [9, 10, 11]  # per-example labels as they were


# Buckets of 8 lengths, batches as wide as their longest example rounded to 8 or not at all.
@pytest.mark.parametrize("pad_to_multiple_of, bucket_width", [(8, None), (1, 8)])
def test_buckets_batch_each_example_once_per_pass_with_others_of_its_rounded_length(
    pad_to_multiple_of, bucket_width
):
    lengths = np.random.default_rng(2).integers(1, SEQUENCE_LENGTH + 1, 96).tolist()
    dataset = tf.data.Dataset.from_tensor_slices((_packed_examples(lengths), np.arange(96)))
    shuffled = dataset.shuffle(96, seed=0, reshuffle_each_iteration=True)
    buckets = batch_by_length(
        shuffled, 4, pad_to_multiple_of, bucket=True, bucket_width=bucket_width
    )
    passes = [list(buckets), list(buckets)]
    for batches in passes:
        indices = np.concatenate([labels.numpy() for _, labels in batches])
        assert sorted(indices.tolist()) == list(range(96))
        # As many batches as without buckets, all full: the buckets' leftovers
        # are pooled, so no batch of another size (another shape to compile).
        assert [len(labels) for _, labels in batches] == [4] * (96 // 4)
        for position, (features, labels) in enumerate(batches):
            longest = max(lengths[index] for index in labels.numpy())
            width = -(-longest // pad_to_multiple_of) * pad_to_multiple_of
            assert features["token_ids"].shape[1] == width
            if position < len(batches) - 4:  # before the (at most 4) batches of leftovers
                assert len({-(-lengths[index] // 8) for index in labels.numpy()}) == 1
    first, second = ([labels.numpy().tolist() for _, labels in batches] for batches in passes)
    assert first != second  # each pass meets the examples in a new order
    padding = [
        sum(int(tf.size(f["padding_mask"]) - tf.reduce_sum(f["padding_mask"])) for f, _ in b)
        for b in (passes[0], list(batch_by_length(shuffled, 4, pad_to_multiple_of=8)))
    ]
    assert padding[0] < padding[1] / 2


def test_per_token_labels_and_weights_are_padded_with_their_fill():
    features = _packed_examples([2, 3])
    labels = np.where(features["padding_mask"] == 1, 4, IGNORED_LABEL).astype("int32")
    weights = features["padding_mask"].astype("float32")
    dataset = tf.data.Dataset.from_tensor_slices((features, labels, weights))
    (batch, batch_labels, batch_weights) = next(
        iter(batch_by_length(dataset, 2, pad_to_multiple_of=5, token_labels_fill=IGNORED_LABEL))
    )
    assert batch["token_ids"].shape == (2, 5)
    assert batch_labels.numpy().tolist() == [[4, 4, -100, -100, -100], [4, 4, 4, -100, -100]]
    assert batch_weights.numpy().tolist() == [[1, 1, 0, 0, 0], [1, 1, 1, 0, 0]]


def test_multiple_choice_examples_are_trimmed_to_their_longest_choice():
    features = {
        name: np.stack([tensor[:2], tensor[2:4]])
        for name, tensor in _packed_examples([3, 5, 2, 9]).items()
    }  # two examples of two choices
    dataset = tf.data.Dataset.from_tensor_slices(features)
    shapes = [batch["token_ids"].shape for batch in batch_by_length(dataset, 1, 4)]
    assert shapes == [(1, 2, 8), (1, 2, 12)]
    # One width for both: the longest choice of all (9 tokens), rounded up.
    one_width = [batch["token_ids"].shape for batch in batch_by_length(dataset, 1, 4, max_widths=1)]
    assert one_width == [(1, 2, 12), (1, 2, 12)]


def test_masked_positions_keep_their_width_in_predictions_and_length_sorted_batches():
    features = dict(
        _packed_examples([2, 6, 3]),
        masked_positions=np.array([[1, 0, 0, 0], [1, 2, 3, 5], [1, 2, 0, 0]]),
    )
    shapes = []

    def positions_of(batch):
        shapes.append((batch["token_ids"].shape, batch["masked_positions"].shape))
        return batch["masked_positions"]

    predicted = predict_by_length(positions_of, features, batch_size=2, pad_to_multiple_of=1)
    assert predicted.tolist() == features["masked_positions"].tolist()
    assert shapes == [((2, 3), (2, 4)), ((1, 6), (1, 4))]
    _, dataset = length_sorted_dataset(features, batch_size=2, pad_to_multiple_of=1)
    assert [batch["masked_positions"].shape for batch in dataset] == [(2, 4), (1, 4)]


def test_features_without_a_padding_mask_are_refused():
    dataset = tf.data.Dataset.from_tensor_slices({"token_ids": np.ones((2, 4), "int32")})
    with pytest.raises(ValueError, match="a dict with padding_mask"):
        batch_by_length(dataset, 2)


def test_a_classifier_computes_the_same_predictions_loss_and_step_either_way():
    features = _packed_examples()
    labels = np.arange(len(LENGTHS)) % 3
    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    fixed, by_length = _fixed_and_by_length(dataset, batch_size=4)

    def model():
        keras.utils.set_random_seed(0)
        classifier = BertClassifier(tiny_backbone(**TRAINING_BACKBONE, dropout=0.0), 3)
        classifier.compile(learning_rate=1e-2, num_train_steps=10)
        return classifier

    first, second = model(), model()
    np.testing.assert_allclose(
        first.predict(fixed, verbose=0), second.predict(by_length, verbose=0), atol=1e-5
    )
    np.testing.assert_allclose(
        first.evaluate(fixed, verbose=0), second.evaluate(by_length, verbose=0), atol=1e-5
    )
    first.fit(fixed.take(1), verbose=0)
    second.fit(by_length.take(1), verbose=0)
    for a, b in zip(first.trainable_weights, second.trainable_weights):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5, err_msg=a.path)


def test_a_tagger_computes_the_same_loss_with_per_token_labels():
    features = _packed_examples()
    labels = np.where(features["padding_mask"] == 1, features["token_ids"] % 3, IGNORED_LABEL)
    dataset = tf.data.Dataset.from_tensor_slices((features, labels.astype("int32")))
    fixed = dataset.batch(4)
    by_length = batch_by_length(dataset, 4, token_labels_fill=IGNORED_LABEL)
    keras.utils.set_random_seed(0)
    tagger = BertTokenClassifier(tiny_backbone(**TRAINING_BACKBONE, dropout=0.0), 3)
    tagger.compile(learning_rate=1e-2, num_train_steps=10)
    np.testing.assert_allclose(
        tagger.evaluate(fixed, verbose=0), tagger.evaluate(by_length, verbose=0), atol=1e-5
    )


@pytest.mark.every_backend
@pytest.mark.skipif(keras.backend.backend() != "jax", reason="counts XLA compilations of JAX")
def test_jax_compiles_one_train_step_per_batch_width():
    import jax

    compilations = []

    def listener(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compilations.append(event)

    jax.monitoring.register_event_duration_secs_listener(listener)
    lengths = np.random.default_rng(1).integers(2, SEQUENCE_LENGTH + 1, 96).tolist()
    dataset = tf.data.Dataset.from_tensor_slices((_packed_examples(lengths), np.zeros(96, "int32")))

    def compilations_of_two_epochs(batches):
        classifier = BertClassifier(tiny_backbone(**TRAINING_BACKBONE), 2)
        classifier.compile(learning_rate=1e-3, num_train_steps=48)
        before = len(compilations)
        classifier.fit(batches, verbose=0)
        first_epoch = len(compilations)
        classifier.fit(batches, verbose=0)
        assert len(compilations) == first_epoch  # the second epoch compiles nothing new
        return first_epoch - before

    by_length = batch_by_length(dataset.shuffle(96, seed=0), batch_size=4, pad_to_multiple_of=8)
    widths = {batch["token_ids"].shape[1] for batch, _ in by_length}
    assert len(widths) >= 3 and widths <= {8, 16, 24, 32}
    fixed = compilations_of_two_epochs(dataset.batch(4))
    assert compilations_of_two_epochs(by_length) <= fixed + len(widths) - 1


@pytest.mark.one_backend
def test_a_filled_last_batch_gives_the_same_predictions_and_one_batch_size():
    features = _packed_examples()  # 12 examples
    sizes = []

    def predict_batch(batch):
        sizes.append(len(batch["token_ids"]))
        return {"sum": batch["token_ids"].sum(axis=1), "first": batch["token_ids"][:, :2]}

    plain = predict_by_length(predict_batch, features, batch_size=5)
    assert sizes == [5, 5, 2]
    sizes.clear()
    filled = predict_by_length(predict_batch, features, batch_size=5, full_batches=True)
    assert sizes == [5, 5, 5]
    for name in plain:
        np.testing.assert_array_equal(filled[name], plain[name])
    np.testing.assert_array_equal(plain["sum"], features["token_ids"].sum(axis=1))
    sizes.clear()
    predict_by_length(predict_batch, features, batch_size=20, full_batches=True)
    assert sizes == [12]  # no batch was full: nothing to match


def _brute_force_cost(lengths, max_widths, multiple, sequence_length, compile_tokens, compiled=()):
    """The least tokens plus `compile_tokens` per width not `compiled` of any choice of widths."""
    widest = min(-(-max(lengths) // multiple) * multiple, sequence_length)
    multiples = {min(w, sequence_length) for w in range(multiple, widest + 1, multiple)}
    candidates = sorted(multiples | {w for w in compiled if w <= sequence_length})
    best = None
    for size in range(1, (max_widths or len(candidates)) + 1):
        for chosen in itertools.combinations(candidates, size):
            widths = np.array(chosen)
            if widths[-1] < max(lengths):
                continue
            new = sum(width not in compiled for width in chosen)
            cost = widths[np.searchsorted(widths, lengths)].sum() + compile_tokens * new
            best = cost if best is None else min(best, cost)
    return best


@pytest.mark.parametrize("seed", range(8))
def test_fewest_padding_widths_cost_no_more_than_any_other_choice(seed):
    rng = np.random.default_rng(seed)
    sequence_length = int(rng.choice([50, 64, 128]))
    lengths = np.minimum(rng.geometric(1 / 14, 300) + 2, sequence_length)
    max_widths = [None, int(rng.integers(1, 5))][seed % 2]
    compile_tokens = [0, float(rng.uniform(0, 600))][seed // 2 % 2]
    widths = fewest_padding_widths(lengths, max_widths, 8, sequence_length, compile_tokens)
    assert 1 <= len(widths) <= (max_widths or 16)
    assert list(widths) == sorted(set(widths.tolist()))
    assert widths[-1] >= lengths.max() and widths[-1] <= sequence_length
    assert all(width % 8 == 0 or width == sequence_length for width in widths)
    cost = widths[np.searchsorted(widths, lengths)].sum() + compile_tokens * len(widths)
    assert cost == pytest.approx(
        _brute_force_cost(lengths, max_widths, 8, sequence_length, compile_tokens)
    )


@pytest.mark.parametrize("compile_tokens", [0, 10])
def test_fewest_padding_widths_choose_among_the_lengths_there_are(compile_tokens):
    # Every length up to 14 is a candidate; only five occur.
    lengths = np.repeat([2, 5, 6, 11, 14], [20, 1, 6, 3, 2])
    widths = fewest_padding_widths(lengths, None, 1, 14, compile_tokens)
    cost = widths[np.searchsorted(widths, lengths)].sum() + compile_tokens * len(widths)
    assert cost == pytest.approx(_brute_force_cost(lengths, None, 1, 14, compile_tokens))
    assert set(widths.tolist()) <= set(lengths.tolist())


@pytest.mark.parametrize("seed", range(6))
def test_fewest_padding_widths_take_compiled_widths_where_they_cost_least(seed):
    rng = np.random.default_rng(seed)
    lengths = np.minimum(rng.geometric(1 / 14, 200) + 2, 64)
    compiled = set(rng.integers(3, 72, 3).tolist())  # of any multiple, some too wide
    compile_tokens = float(rng.uniform(50, 800))
    max_widths = [None, 3][seed % 2]
    widths = fewest_padding_widths(lengths, max_widths, 8, 64, compile_tokens, compiled)
    assert widths[-1] >= lengths.max() and widths[-1] <= 64
    new = [width for width in widths.tolist() if width not in compiled]
    assert all(width % 8 == 0 for width in new)
    cost = widths[np.searchsorted(widths, lengths)].sum() + compile_tokens * len(new)
    assert cost == pytest.approx(
        _brute_force_cost(lengths, max_widths, 8, 64, compile_tokens, compiled)
    )


def test_a_compiled_width_serves_where_padding_to_it_costs_less_than_a_compile():
    lengths = [30] * 100
    assert fewest_padding_widths(lengths, None, 1, 64, 1000, {32, 48}).tolist() == [32]
    assert fewest_padding_widths(lengths, None, 1, 64, 100, {32, 48}).tolist() == [30]
    assert fewest_padding_widths(lengths, None, 1, 64, 1000, {20, 70}).tolist() == [30]


def _summing_batches(shapes):
    """A `predict_batch` that sums each row's token ids, recording each batch's shape in `shapes`."""

    def predict_batch(batch):
        shapes.append(batch["token_ids"].shape)
        return batch["token_ids"].sum(axis=1)

    return predict_batch


@pytest.mark.one_backend
def test_later_predictions_take_the_widths_compiled_before_where_they_cost_less():
    shapes = []
    predict_batch = _summing_batches(shapes)

    def predict(lengths, compiled_widths):
        features = _packed_examples(lengths)
        sums = predict_by_length(
            predict_batch,
            features,
            batch_size=4,
            pad_to_multiple_of=1,
            full_batches=True,
            compile_tokens=8,  # a compile costs 2 tokens a row
            compiled_widths=compiled_widths,
        )
        np.testing.assert_array_equal(sums, features["token_ids"].sum(axis=1))

    compiled = {}
    predict([3, 3, 4, 4, 9, 10, 10, 10], compiled)
    assert shapes == [(4, 4), (4, 10)] and compiled == {(4,): {4, 10}}
    shapes.clear()
    predict([2, 3, 3, 3, 7, 8, 9, 9], compiled)  # a row padded by 1 costs less than a compile
    assert shapes == [(4, 4), (4, 10)] and compiled == {(4,): {4, 10}}
    shapes.clear()
    predict([2, 3, 3, 3, 7, 8, 9, 9], {})  # nothing compiled: every width costs
    assert shapes == [(4, 3), (4, 9)]


@pytest.mark.one_backend
def test_small_calls_fill_their_rows_to_a_compiled_program_until_that_has_cost_a_compile():
    shapes = []
    predict_batch = _summing_batches(shapes)

    def predict(lengths, compiled_widths, filling_tokens, batch_size=8, packed_to=SEQUENCE_LENGTH):
        features = _packed_examples(lengths, packed_to)
        sums = predict_by_length(
            predict_batch,
            features,
            batch_size=batch_size,
            pad_to_multiple_of=4,
            full_batches=True,
            compile_tokens=100,
            compiled_widths=compiled_widths,
            filling_tokens=filling_tokens,
        )
        np.testing.assert_array_equal(sums, features["token_ids"].sum(axis=1))
        return shapes[-1]

    compiled, filling = {(8,): {8, 12, 24}, (16,): {12}}, {}
    assert predict([9, 3], compiled, filling) == (8, 12)  # 8 rows of 12: 72 tokens more
    assert filling == {((2,), 12): 72} and (2,) not in compiled
    assert predict([9, 3], compiled, filling) == (2, 12)  # 144 in all would pass 100: compiled
    assert compiled[(2,)] == {12}
    assert predict([3, 9], compiled, filling) == (2, 12)  # compiled at its own rows now
    assert predict([30, 2], compiled, filling) == (2, 32)  # no compiled width holds 30
    assert compiled[(2,)] == {12, 32} and filling == {((2,), 12): 72}
    for batch_size, filling in ((4, {}), (8, None)):  # no program of 4 rows; no filling asked
        assert predict([9, 3], {(8,): {12}}, filling, batch_size) == (2, 12)
    assert predict([9, 3], {(4,): {16}}, {}, packed_to=9) == (4, 16)  # widened to the program


def test_a_short_last_batch_counts_its_width_as_compiled_at_its_own_shape():
    # As evaluate batches: shortest first, the last batch short, holding the longest texts.
    def compiled_after(lengths):
        compiled = {}
        _, dataset = length_sorted_dataset(
            _packed_examples(lengths),
            batch_size=4,
            pad_to_multiple_of=1,
            compile_tokens=8,  # a compile costs 2 tokens a row
            compiled_widths=compiled,
        )
        shapes = [tuple(batch["token_ids"].shape) for batch in dataset]
        return shapes, compiled

    shapes, compiled = compiled_after([3, 3, 3, 3, 8, 8, 8, 8, 20, 30])
    assert shapes == [(4, 3), (4, 8), (2, 30)]
    assert compiled == {(4,): {3, 8}, (2,): {30}}  # no program of 4 rows at 30 ran
    shapes, compiled = compiled_after([2, 3, 3, 3])  # one batch, whole
    assert shapes == [(4, 3)] and compiled == {(4,): {3}}


@pytest.mark.one_backend
def test_later_training_takes_the_widths_compiled_before_where_they_cost_less():
    def widths(lengths, compiled_widths):
        dataset = tf.data.Dataset.from_tensor_slices(
            (_packed_examples(lengths), np.zeros(len(lengths), "int32"))
        )
        batches = batch_by_length(
            dataset,
            batch_size=4,
            pad_to_multiple_of=1,
            compile_tokens=8,  # a compile costs 2 tokens a row
            compiled_widths=compiled_widths,
        )
        return [int(batch["token_ids"].shape[1]) for batch, _ in batches]

    compiled = {}
    assert widths([3, 3, 4, 4, 9, 10, 10, 10], compiled) == [4, 10]
    assert compiled == {(4,): {4, 10}}
    assert widths([2, 3, 3, 3, 7, 8, 9, 9], compiled) == [4, 10]
    assert widths([2, 3, 3, 3, 7, 8, 9, 9], {}) == [3, 9]  # nothing compiled


def test_fewest_padding_widths_refuse_what_they_cannot_hold():
    with pytest.raises(
        ValueError, match="A sequence of 40 tokens is longer than sequence_length 32"
    ):
        fewest_padding_widths([5, 40], 2, sequence_length=32)
    with pytest.raises(ValueError, match="max_widths >= 1"):
        fewest_padding_widths([5], 0)


def test_buckets_of_one_width_say_they_change_nothing(caplog):
    dataset = tf.data.Dataset.from_tensor_slices((_packed_examples(), np.arange(len(LENGTHS))))
    batches = batch_by_length(dataset, 4, 4, bucket=True, max_widths=1)
    assert "keeps one width (32)" in caplog.text
    assert [labels.numpy().tolist() for _, labels in batches] == [
        [0, 1, 2, 3],
        [4, 5, 6, 7],
        [8, 9, 10, 11],
    ]
    caplog.clear()
    list(batch_by_length(dataset, 4, 4, bucket=True, max_widths=2))
    assert "keeps one width" not in caplog.text


# Buckets: the widths pad the examples least; plain batches (here in order): their longest.
@pytest.mark.parametrize("bucket", [False, True])
@pytest.mark.parametrize("choice", [{"max_widths": 2}, {"compile_tokens": 120}])
def test_chosen_widths_are_the_batch_widths_and_keep_every_token(bucket, choice):
    lengths = np.random.default_rng(3).integers(1, SEQUENCE_LENGTH + 1, 96)
    features = _packed_examples(lengths)
    dataset = tf.data.Dataset.from_tensor_slices((features, np.arange(96)))
    if bucket:
        dataset = dataset.shuffle(96, seed=0, reshuffle_each_iteration=True)
        padded, tokens_per_length = lengths, 1
    else:
        padded, tokens_per_length = lengths.reshape(-1, 8).max(axis=1), 8  # a batch's 8 rows
    widths = fewest_padding_widths(
        padded,
        choice.get("max_widths"),
        4,
        SEQUENCE_LENGTH,
        choice.get("compile_tokens", 0) / tokens_per_length,
    )
    assert 1 < len(widths) < SEQUENCE_LENGTH // 4
    batches = list(batch_by_length(dataset, 8, 4, bucket=bucket, **choice))
    for batch, labels in batches:
        width = batch["token_ids"].shape[1]
        assert width == widths[np.searchsorted(widths, lengths[labels.numpy()].max())]
        for row, index in zip(batch["token_ids"].numpy(), labels.numpy()):
            np.testing.assert_array_equal(row, features["token_ids"][index, :width])
    indices = np.concatenate([labels.numpy() for _, labels in batches])
    assert sorted(indices.tolist()) == list(range(96))


def test_a_short_last_batch_takes_the_widest_width_in_every_pass():
    # Where XLA compiles each shape, its batch size compiles once, not once per width it meets.
    lengths = np.random.default_rng(4).integers(1, SEQUENCE_LENGTH + 1, 90)  # 11 × 8, then 2
    features = _packed_examples(lengths)
    dataset = tf.data.Dataset.from_tensor_slices((features, np.arange(90)))
    dataset = dataset.shuffle(90, seed=0, reshuffle_each_iteration=True)
    batches = batch_by_length(dataset, 8, 4, compile_tokens=120)
    widths, last_longest = set(), []
    for _ in range(4):
        *full, (last, labels) = list(batches)
        widths.update(batch["token_ids"].shape[1] for batch, _ in full)
        assert last["token_ids"].shape == (2, max(widths))
        last_longest.append(lengths[labels.numpy()].max())
        for row, index in zip(last["token_ids"].numpy(), labels.numpy()):
            np.testing.assert_array_equal(row, features["token_ids"][index, : max(widths)])
    widths = np.array(sorted(widths))
    # A narrower width would have held some pass's last batch.
    assert widths[np.searchsorted(widths, min(last_longest))] < widths[-1]


def test_a_multiple_choice_width_costs_the_tokens_of_every_choice():
    lengths = np.random.default_rng(4).integers(1, SEQUENCE_LENGTH + 1, 64)
    one_choice = _packed_examples(lengths)
    # Three choices, the first as long as the example, the others empty.
    choices = {
        name: np.stack([array, array * 0, array * 0], 1) for name, array in one_choice.items()
    }
    dataset = tf.data.Dataset.from_tensor_slices((choices, np.arange(64)))
    longest = lengths.reshape(-1, 2).max(axis=1)
    expected = fewest_padding_widths(longest, None, 4, SEQUENCE_LENGTH, 60 / (2 * 3))
    one_sequence_each = fewest_padding_widths(longest, None, 4, SEQUENCE_LENGTH, 60 / 2)
    assert len(expected) > len(one_sequence_each)  # a width saves three times the tokens
    batches = list(batch_by_length(dataset, 2, 4, compile_tokens=60))
    assert {batch["token_ids"].shape[-1] for batch, _ in batches} == set(expected.tolist())
    assert {tuple(batch["token_ids"].shape[:2]) for batch, _ in batches} == {(2, 3)}


@pytest.mark.parametrize("choice", [{"max_widths": 2}, {"compile_tokens": 80}])
def test_predictions_at_chosen_widths_are_the_same_at_fewer_widths(choice):
    features = _packed_examples()
    widths = set()

    def predict_batch(batch):
        widths.add(batch["token_ids"].shape[1])
        return batch["token_ids"].sum(axis=1)

    plain = predict_by_length(predict_batch, features, batch_size=2, pad_to_multiple_of=4)
    assert len(widths) > 2
    widths.clear()
    fewer = predict_by_length(predict_batch, features, batch_size=2, pad_to_multiple_of=4, **choice)
    longest_per_batch = np.sort(LENGTHS).reshape(-1, 2).max(axis=1)  # batches shortest first
    expected = fewest_padding_widths(
        longest_per_batch,
        choice.get("max_widths"),
        4,
        SEQUENCE_LENGTH,
        choice.get("compile_tokens", 0) / 2,  # a batch's width, twice: its 2 examples
    )
    assert widths == set(expected.tolist()) and len(widths) == 2
    np.testing.assert_array_equal(fewer, plain)


@pytest.mark.one_backend  # tf.data and numpy only
@pytest.mark.parametrize(
    "options", [{"pad_to_multiple_of": 1}, {"full_batches": True, "compile_tokens": 80}]
)
def test_a_length_sorted_dataset_holds_the_batches_predict_by_length_makes(options):
    features = _packed_examples()
    expected = []

    def predict_batch(batch):
        expected.append(batch)
        return batch["token_ids"].sum(axis=1)

    sums = predict_by_length(predict_batch, features, batch_size=5, **options)
    order, dataset = length_sorted_dataset(features, batch_size=5, **options)
    batches = [{name: tensor.numpy() for name, tensor in batch.items()} for batch in dataset]
    assert [batch["token_ids"].shape for batch in batches] == [
        batch["token_ids"].shape for batch in expected
    ]
    for batch, expected_batch in zip(batches, expected):
        for name in expected_batch:
            np.testing.assert_array_equal(batch[name], expected_batch[name])
    summed = np.concatenate([batch["token_ids"].sum(axis=1) for batch in batches])
    np.testing.assert_array_equal(in_input_order(summed, order), sums)
    np.testing.assert_array_equal(sums, features["token_ids"].sum(axis=1))
