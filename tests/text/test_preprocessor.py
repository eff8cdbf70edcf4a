"""Tests of BertPreprocessor against transformers and the original packing."""

import unicodedata

import numpy as np
import pytest
import tensorflow as tf
from transformers import AutoTokenizer

from bert_keras.checkpoints.vocabulary import read_vocabulary
from bert_keras.text.preprocessor import BertPreprocessor
from bert_keras.text.preprocessor import truncated_pair_lengths
from bert_keras.text.tokenizer import SPECIAL_TOKENS
from bert_keras.text.tokenizer import BertTokenizer
from tests.text import CHECKPOINT_DIR
from tests.text import TF_TEXT_2_12_OPS
from tests.text import UNCASED_VOCABULARY
from tests.text import graph_ops
from tests.text import unicode_corpus

FEATURES = ("token_ids", "segment_ids", "padding_mask")


@pytest.fixture(scope="module")
def lines():
    """Hard text, without private-use (Co) characters: transformers drops
    them, the original BERT (and BertTokenizer) makes their words [UNK]."""
    words = [t for t in read_vocabulary(UNCASED_VOCABULARY) if t.isalpha()]
    corpus = unicode_corpus.generate_corpus(words, num_bytes=60_000, seed=7)
    return ["".join(c for c in line if unicodedata.category(c) != "Co") for line in corpus]


@pytest.fixture(scope="module")
def tokenizer():
    # The settings of the transformers reference.
    return BertTokenizer(
        UNCASED_VOCABULARY,
        max_input_chars_per_word=100,
        special_tokens_in_strings=True,
    )


@pytest.fixture(scope="module")
def reference():
    return AutoTokenizer.from_pretrained(CHECKPOINT_DIR)


def _original_truncate_seq_pair(tokens_a, tokens_b, max_length):
    """google-research/bert run_classifier.py's `_truncate_seq_pair`."""
    while len(tokens_a) + len(tokens_b) > max_length:
        if len(tokens_a) > len(tokens_b):
            tokens_a.pop()
        else:
            tokens_b.pop()


def _round_robin_lengths(length_a, length_b, budget):
    kept = [0, 0]
    lengths = [length_a, length_b]
    turn = 0
    while sum(kept) < budget and kept != lengths:
        if kept[turn] < lengths[turn]:
            kept[turn] += 1
        turn = 1 - turn
    return kept


def test_truncated_pair_lengths_are_the_original_loop_and_round_robin():
    cases = [(a, b, budget) for a in range(12) for b in range(12) for budget in range(26)]
    kept_a, kept_b = truncated_pair_lengths(*zip(*cases))
    for (a, b, budget), got_a, got_b in zip(cases, kept_a.numpy(), kept_b.numpy()):
        tokens_a, tokens_b = list(range(a)), list(range(b))
        _original_truncate_seq_pair(tokens_a, tokens_b, budget)
        assert (got_a, got_b) == (len(tokens_a), len(tokens_b)), (a, b, budget)
        assert [got_a, got_b] == _round_robin_lengths(a, b, budget)


def test_single_texts_match_transformers(lines, tokenizer, reference):
    preprocessor = BertPreprocessor(tokenizer, sequence_length=32)
    features = preprocessor(lines)
    expected = reference(
        lines, max_length=32, truncation=True, padding="max_length", return_tensors="np"
    )
    assert features["token_ids"].numpy().tolist() == expected["input_ids"].tolist()
    assert features["segment_ids"].numpy().tolist() == expected["token_type_ids"].tolist()
    assert features["padding_mask"].numpy().tolist() == expected["attention_mask"].tolist()


@pytest.mark.parametrize("truncate", ["longest_first", "round_robin"])
def test_pairs_match_the_original_packing(lines, tokenizer, truncate):
    texts_a, texts_b = lines[0:120], lines[120:240]
    sequence_length = 40
    preprocessor = BertPreprocessor(tokenizer, sequence_length=sequence_length, truncate=truncate)
    features = preprocessor((texts_a, texts_b))
    ids_a, ids_b = tokenizer(texts_a).to_list(), tokenizer(texts_b).to_list()
    for row, (tokens_a, tokens_b) in enumerate(zip(ids_a, ids_b)):
        _original_truncate_seq_pair(tokens_a, tokens_b, sequence_length - 3)
        tokens = [101] + tokens_a + [102] + tokens_b + [102]
        padding = sequence_length - len(tokens)
        assert features["token_ids"][row].numpy().tolist() == tokens + [0] * padding
        assert features["segment_ids"][row].numpy().tolist() == (
            [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1) + [0] * padding
        )
        assert features["padding_mask"][row].numpy().tolist() == ([1] * len(tokens) + [0] * padding)


def test_pairs_match_transformers_when_they_fit(lines, tokenizer, reference):
    texts_a, texts_b = lines[0:20], lines[20:40]
    features = BertPreprocessor(tokenizer, sequence_length=None)((texts_a, texts_b))
    expected = reference(texts_a, texts_b, padding="longest", return_tensors="np")
    assert features["token_ids"].numpy().tolist() == expected["input_ids"].tolist()
    assert features["segment_ids"].numpy().tolist() == expected["token_type_ids"].tolist()


def test_pad_to_longest_without_sequence_length(tokenizer):
    features = BertPreprocessor(tokenizer, sequence_length=None)(["hello world", "hello"])
    assert features["token_ids"].numpy().tolist() == [[101, 7592, 2088, 102], [101, 7592, 102, 0]]
    assert features["padding_mask"].numpy().tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]


def test_padding_to_the_longest_keeps_the_truncation(lines, tokenizer):
    texts = (lines[:20], lines[20:40])
    fixed = BertPreprocessor(tokenizer, sequence_length=24)(texts)
    longest = BertPreprocessor(tokenizer, sequence_length=24, padding="longest")(texts)
    length = int(tf.reduce_max(tf.reduce_sum(fixed["padding_mask"], axis=1)))
    short = BertPreprocessor(tokenizer, sequence_length=24, padding="longest")(["a b", "a"])
    assert short["token_ids"].shape == (2, 4)
    # An empty batch keeps the width of [CLS] and [SEP], which the backbone reads.
    empty = BertPreprocessor(tokenizer, sequence_length=24, padding="longest")(
        tf.constant([], tf.string)
    )
    assert empty["token_ids"].shape == (0, 2)
    for name in FEATURES:
        assert longest[name].shape == (20, length)
        assert longest[name].numpy().tolist() == fixed[name][:, :length].numpy().tolist()


def test_features_are_what_the_backbone_takes(tokenizer):
    features = BertPreprocessor(tokenizer, sequence_length=8)(["a b"])
    assert sorted(features) == sorted(FEATURES)
    for name in FEATURES:
        assert features[name].dtype == tf.int32
        assert features[name].shape == (1, 8)
    single = BertPreprocessor(tokenizer, sequence_length=8)("a b")
    assert single["token_ids"].shape == (8,)


def test_offsets_point_into_each_segment(tokenizer):
    text_a, text_b = "Ça va? 日本", "naïve  [MASK] ok"
    preprocessor = BertPreprocessor(tokenizer, sequence_length=16)
    features, starts, ends = preprocessor.call_with_offsets(([text_a], [text_b]), unit="character")
    segment_ids = features["segment_ids"][0].numpy()
    mask = features["padding_mask"][0].numpy()
    pieces = [
        (text_a, text_b)[segment][start:end]
        for segment, start, end, used in zip(segment_ids, starts[0].numpy(), ends[0].numpy(), mask)
        if used
    ]
    assert pieces == ["", "Ça", "va", "?", "日", "本", "", "naïve", "[MASK]", "ok", ""]
    assert ends[0].numpy()[len(pieces) :].tolist() == [0] * (16 - len(pieces))


def test_truncated_offsets_stay_aligned(tokenizer):
    preprocessor = BertPreprocessor(tokenizer, sequence_length=5)
    features, starts, ends = preprocessor.call_with_offsets((["one two three"], ["four five"]))
    assert features["token_ids"][0].numpy().tolist() == [101, 2028, 102, 2176, 102]
    assert starts[0].numpy().tolist() == [0, 0, 0, 0, 0]
    assert ends[0].numpy().tolist() == [0, 3, 0, 4, 0]


def test_in_tf_data(lines, tokenizer):
    preprocessor = BertPreprocessor(tokenizer, sequence_length=24)
    texts_a, texts_b = lines[:32], lines[32:64]
    expected = preprocessor((texts_a, texts_b))
    dataset = (
        tf.data.Dataset.from_tensor_slices((texts_a, texts_b))
        .batch(8)
        .map(lambda a, b: preprocessor((a, b)))
    )
    token_ids = tf.concat([batch["token_ids"] for batch in dataset], axis=0)
    assert token_ids.numpy().tolist() == expected["token_ids"].numpy().tolist()


def test_graph_uses_only_core_and_tf_text_2_12_ops(tokenizer):
    preprocessor = BertPreprocessor(tokenizer, sequence_length=16)
    spec = tf.TensorSpec([None], tf.string)
    ops = graph_ops(
        tf.function(lambda a, b: preprocessor.call_with_offsets((a, b))).get_concrete_function(
            spec, spec
        )
    )
    tf_text_ops = {op for op in ops if not hasattr(tf.raw_ops, op)}
    assert tf_text_ops <= TF_TEXT_2_12_OPS, tf_text_ops - TF_TEXT_2_12_OPS


def test_config_round_trip(tokenizer):
    preprocessor = BertPreprocessor(
        tokenizer,
        sequence_length=12,
        truncate="round_robin",
        padding="longest",
        pad_to_multiple_of=5,
    )
    restored = BertPreprocessor.from_config(preprocessor.get_config())
    assert restored.sequence_length == 12 and restored.truncate == "round_robin"
    assert restored.padding == "longest" and restored.pad_to_multiple_of == 5
    texts = (["Hello world, how are you?"], ["[MASK] is fine"])
    assert (
        restored(texts)["token_ids"].numpy().tolist()
        == preprocessor(texts)["token_ids"].numpy().tolist()
    )


def test_errors():
    tokenizer = BertTokenizer(list(SPECIAL_TOKENS))
    with pytest.raises(ValueError, match="waterfall"):
        BertPreprocessor(tokenizer, truncate="waterfall")
    with pytest.raises(ValueError, match="padding must be one of .* got 'shortest'"):
        BertPreprocessor(tokenizer, padding="shortest")
    with pytest.raises(ValueError, match="got 2"):
        BertPreprocessor(tokenizer, sequence_length=2)
    with pytest.raises(ValueError, match="sequence_length must be an integer or None, got '8'"):
        BertPreprocessor(tokenizer, sequence_length="8")
    assert BertPreprocessor(tokenizer, sequence_length=np.int64(8)).sequence_length == 8
    with pytest.raises(ValueError, match="sequence of 3"):
        BertPreprocessor(tokenizer)((["a"], ["b"], ["c"]))


@pytest.mark.parametrize(
    "pair, message",
    [
        ((["a", "b"], ["c"]), "texts_a has 2 texts but texts_b has 1"),
        ((["a", "b"], ["c", "d", "e"]), "texts_a has 2 texts but texts_b has 3"),
        (("a", ["b", "c"]), "texts_a is a single string but texts_b has 2 texts"),
    ],
)
def test_a_pair_of_batches_of_different_sizes_is_refused(pair, message):
    preprocessor = BertPreprocessor(BertTokenizer(list(SPECIAL_TOKENS)), sequence_length=8)
    with pytest.raises(ValueError, match=message):
        preprocessor(pair)


def test_a_pair_of_batches_of_different_sizes_is_refused_in_a_graph():
    preprocessor = BertPreprocessor(BertTokenizer(list(SPECIAL_TOKENS)), sequence_length=8)
    spec = tf.TensorSpec([None], tf.string)
    preprocess = tf.function(lambda a, b: preprocessor((a, b)), input_signature=[spec, spec])
    assert preprocess(tf.constant(["a"]), tf.constant(["b"]))["token_ids"].shape == (1, 8)
    with pytest.raises(tf.errors.InvalidArgumentError, match="texts_a and texts_b hold different"):
        preprocess(tf.constant(["a", "b"]), tf.constant(["c"]))


def test_a_list_of_pairs_is_refused_with_the_pair_convention():
    preprocessor = BertPreprocessor(BertTokenizer(list(SPECIAL_TOKENS)))
    with pytest.raises(ValueError, match=r"tuple \(texts_a, texts_b\).*tuple\(zip\(\*pairs\)\)"):
        preprocessor([("a", "b"), ("c", "d")])


def test_saved_model(tmp_path, tokenizer):
    preprocessor = BertPreprocessor(tokenizer, sequence_length=16)
    spec = tf.TensorSpec([None], tf.string)
    module = tf.Module()
    module.preprocess = tf.function(lambda a, b: preprocessor((a, b)), input_signature=[spec, spec])
    tf.saved_model.save(module, str(tmp_path))
    restored = tf.saved_model.load(str(tmp_path))
    pair = (["Héllo [MASK] wörld!"], ["日本 ´timeout´"])
    got = restored.preprocess(tf.constant(pair[0]), tf.constant(pair[1]))
    expected = preprocessor(pair)
    for name in FEATURES:
        assert got[name].numpy().tolist() == expected[name].numpy().tolist()


def test_batches_padded_to_their_longest_text_are_rounded_up_and_equal_full_padding(tokenizer):
    full = BertPreprocessor(tokenizer, sequence_length=20)
    by_length = BertPreprocessor(tokenizer, 20, padding="longest", pad_to_multiple_of=8)
    for texts, width in (
        (["hi", "a b c"], 8),  # 5 tokens at most
        (["one two three four five six seven"], 16),  # 9 tokens
        (["word " * 40], 20),  # truncated to the sequence length, not rounded past it
    ):
        features = by_length(texts)
        assert {name: tuple(tensor.shape) for name, tensor in features.items()} == dict.fromkeys(
            features, (len(texts), width)
        )
        for name, tensor in full(texts).items():
            assert features[name].numpy().tolist() == tensor.numpy()[:, :width].tolist()


@pytest.mark.parametrize("value", [0, -8, 2.5, "16"])
def test_a_bad_pad_to_multiple_of_is_refused(tokenizer, value):
    with pytest.raises(ValueError, match="pad_to_multiple_of must be a positive integer"):
        BertPreprocessor(tokenizer, 16, padding="longest", pad_to_multiple_of=value)
