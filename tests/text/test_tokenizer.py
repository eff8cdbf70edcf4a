"""Tests of BertTokenizer: token for token equal to the reference tokenizers.

The reference is the Rust `tokenizers.BertWordPieceTokenizer` (what
transformers' fast BertTokenizer runs), with its word-length limit of 100
characters; the original google-research tokenizer's limit of 200 is tested
separately. Where the Rust reference departs from the original BERT code (its
CJK range, context-free lower-casing of "Σ", dropping private-use characters),
the test says so and checks the original's result.
"""

import json
import os
import re
import unicodedata

import pytest
import tensorflow as tf
import tokenizers
from transformers import AutoTokenizer
from transformers.models.bert.tokenization_bert_legacy import BasicTokenizer
from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

from bert_keras.checkpoints.vocabulary import read_vocabulary
from bert_keras.text.tokenizer import SPECIAL_TOKENS
from bert_keras.text.tokenizer import BertTokenizer
from tests.text import CHECKPOINT_DIR
from tests.text import TF_TEXT_2_12_OPS
from tests.text import UNCASED_VOCABULARY
from tests.text import graph_ops
from tests.text import unicode_corpus

REFERENCE_WORD_LIMIT = 100


# Fixtures ---------------------------------------------------------------------


@pytest.fixture(scope="session")
def uncased_tokens():
    return read_vocabulary(UNCASED_VOCABULARY)


@pytest.fixture(scope="session")
def corpus(uncased_tokens):
    words = [token for token in uncased_tokens if token.isalpha()]
    return unicode_corpus.generate_corpus(words, num_bytes=1_000_000)


@pytest.fixture(scope="session")
def reference_corpus(corpus):
    """The corpus without private-use (Co) characters: the Rust reference
    drops them, the original keeps them (tested on their own below)."""
    return ["".join(c for c in line if unicodedata.category(c) != "Co") for line in corpus]


@pytest.fixture(scope="session")
def plain_corpus(uncased_tokens):
    words = [token for token in uncased_tokens if token.isalpha()]
    return unicode_corpus.generate_plain_corpus(words, num_bytes=300_000)


@pytest.fixture(scope="session")
def cased_vocabulary(tmp_path_factory, uncased_tokens, corpus):
    """A cased vocabulary: the uncased one, its words capitalised and upper-
    cased, and every other character of the corpus as a word and a piece."""
    tokens = list(uncased_tokens)
    seen = set(tokens)

    def add(token):
        if token not in seen:
            seen.add(token)
            tokens.append(token)

    for token in uncased_tokens:
        if token.isalpha():
            add(token.capitalize())
            add(token.upper())
    for character in sorted(set("".join(corpus)))[::2]:
        # Tokenization drops control characters and splits on whitespace.
        if not character.isspace() and unicodedata.category(character)[0] != "C":
            add(character)
            add("##" + character)
    path = tmp_path_factory.mktemp("cased") / "vocab.txt"
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return str(path)


def _vocabulary_path(casing, cased_vocabulary):
    return UNCASED_VOCABULARY if casing == "uncased" else cased_vocabulary


def _reference(vocabulary_path, lowercase, strip_accents=None):
    return tokenizers.BertWordPieceTokenizer(
        vocabulary_path,
        lowercase=lowercase,
        strip_accents=strip_accents,
        clean_text=True,
        handle_chinese_chars=True,
    )


def _tokens(tokenizer, text):
    return [tokenizer.id_to_token(i) for i in tokenizer(text).numpy()]


def _mismatched_ids(ours, reference_encodings, lines):
    """Indices of lines whose ids differ (token ids path)."""
    token_ids = ours(lines).to_list()
    return [
        index
        for index, encoding in enumerate(reference_encodings)
        if token_ids[index] != encoding.ids
    ]


def _mismatched_lines(ours, reference_encodings, lines):
    """Indices of lines whose ids or character offsets differ (offsets
    path)."""
    token_ids, starts, ends = ours.tokenize_with_offsets(lines, unit="character")
    token_ids, starts, ends = token_ids.to_list(), starts.to_list(), ends.to_list()
    mismatched = []
    for index, expected in enumerate(reference_encodings):
        offsets = [tuple(pair) for pair in zip(starts[index], ends[index])]
        if token_ids[index] != expected.ids or offsets != expected.offsets:
            mismatched.append(index)
    return mismatched


def _describe(lines, mismatched, ours, reference):
    if not mismatched:
        return ""
    line = lines[mismatched[0]]
    return (
        f"{len(mismatched)} of {len(lines)} lines differ; first {line!r}:\n"
        f"ours:      {_tokens(ours, line)}\n"
        f"reference: {reference.encode(line, add_special_tokens=False).tokens}"
    )


# Corpus against the reference -----------------------------------------------


def test_corpus_is_large_and_covers_every_category(corpus):
    assert sum(len(line.encode("utf-8")) for line in corpus) >= 1_000_000
    text = "".join(corpus)
    categories = {unicodedata.category(character) for character in set(text)}
    # Every general category but Cs: surrogates cannot be written in UTF-8.
    assert len(categories) == 29 and "Cs" not in categories
    words = text.split()
    assert any(100 < len(word) <= 200 for word in words)
    assert any(len(word) > 200 for word in words)
    assert all(token in text for token in SPECIAL_TOKENS)


@pytest.mark.parametrize("casing", ["uncased", "cased"])
def test_corpus_matches_reference(casing, reference_corpus, cased_vocabulary):
    vocabulary = _vocabulary_path(casing, cased_vocabulary)
    lowercase = casing == "uncased"
    ours = BertTokenizer(
        vocabulary,
        lowercase=lowercase,
        special_tokens_in_strings=True,
        max_input_chars_per_word=REFERENCE_WORD_LIMIT,
    )
    reference = _reference(vocabulary, lowercase)
    expected = reference.encode_batch(reference_corpus, add_special_tokens=False)
    mismatched = _mismatched_lines(ours, expected, reference_corpus)
    assert not mismatched, _describe(reference_corpus, mismatched, ours, reference)
    # Token ids alone take a shorter path (whole texts normalized at once).
    mismatched = _mismatched_ids(ours, expected, reference_corpus)
    assert not mismatched, _describe(reference_corpus, mismatched, ours, reference)


def test_plain_corpus_is_mostly_plain_and_hard(plain_corpus):
    plain = [re.fullmatch(r"[\t\n\r -~]*", line) is not None for line in plain_corpus]
    assert 0.7 < sum(plain) / len(plain) < 0.95
    words = " ".join(plain_corpus).split()
    assert any(len(word) == 101 for word in words)
    assert all(token in " ".join(plain_corpus) for token in SPECIAL_TOKENS)


@pytest.mark.parametrize("casing", ["uncased", "cased"])
def test_plain_text_matches_reference(casing, plain_corpus, reference_corpus, cased_vocabulary):
    """Plain ASCII text takes one tensorflow-text op; lines of both paths,
    interleaved, keep their places in the batch."""
    vocabulary = _vocabulary_path(casing, cased_vocabulary)
    lowercase = casing == "uncased"
    ours = BertTokenizer(
        vocabulary,
        lowercase=lowercase,
        special_tokens_in_strings=True,
        max_input_chars_per_word=REFERENCE_WORD_LIMIT,
    )
    reference = _reference(vocabulary, lowercase)
    lines = [line for pair in zip(plain_corpus, reference_corpus) for line in pair]
    lines += plain_corpus[len(reference_corpus) :]
    expected = reference.encode_batch(lines, add_special_tokens=False)
    mismatched = _mismatched_ids(ours, expected, lines)
    assert not mismatched, _describe(lines, mismatched, ours, reference)
    mismatched = _mismatched_lines(ours, expected, lines)
    assert not mismatched, _describe(lines, mismatched, ours, reference)


@pytest.mark.parametrize("casing", ["uncased", "cased"])
@pytest.mark.parametrize("special_tokens_in_strings", [True, False])
def test_every_ascii_character_matches_reference(
    casing, special_tokens_in_strings, cased_vocabulary
):
    vocabulary = _vocabulary_path(casing, cased_vocabulary)
    lowercase = casing == "uncased"
    lines = []
    for character in map(chr, range(128)):
        lines += [
            character,
            f"x{character}y",
            f"{character}{character}Ab{character} z",
            f"A{character}[MASK]{character}[SEP]",
            f"[SEP{character}] [{character}CLS]",
        ]
    ours = BertTokenizer(
        vocabulary,
        lowercase=lowercase,
        special_tokens_in_strings=special_tokens_in_strings,
        max_input_chars_per_word=REFERENCE_WORD_LIMIT,
    )
    if special_tokens_in_strings:
        reference = _reference(vocabulary, lowercase)
    else:
        reference = _reference_without_special_tokens(vocabulary, lowercase)
    expected = reference.encode_batch(lines, add_special_tokens=False)
    mismatched = _mismatched_ids(ours, expected, lines)
    assert not mismatched, _describe(lines, mismatched, ours, reference)
    mismatched = _mismatched_lines(ours, expected, lines)
    assert not mismatched, _describe(lines, mismatched, ours, reference)


@pytest.mark.parametrize("lowercase, strip_accents", [(True, False), (False, True)])
def test_strip_accents_override_matches_reference(
    lowercase, strip_accents, reference_corpus, cased_vocabulary
):
    lines = reference_corpus[:1000]
    ours = BertTokenizer(
        cased_vocabulary,
        lowercase=lowercase,
        strip_accents=strip_accents,
        special_tokens_in_strings=True,
        max_input_chars_per_word=REFERENCE_WORD_LIMIT,
    )
    reference = _reference(cased_vocabulary, lowercase, strip_accents)
    expected = reference.encode_batch(lines, add_special_tokens=False)
    mismatched = _mismatched_lines(ours, expected, lines)
    assert not mismatched, _describe(lines, mismatched, ours, reference)


def _reference_without_special_tokens(vocabulary_path, lowercase):
    """The reference's pipeline with no added tokens: "[MASK]" is text."""
    reference = tokenizers.Tokenizer(
        tokenizers.models.WordPiece.from_file(
            vocabulary_path,
            unk_token="[UNK]",
            max_input_chars_per_word=REFERENCE_WORD_LIMIT,
        )
    )
    reference.normalizer = tokenizers.normalizers.BertNormalizer(lowercase=lowercase)
    reference.pre_tokenizer = tokenizers.pre_tokenizers.BertPreTokenizer()
    return reference


def test_special_tokens_split_like_text_by_default(reference_corpus, plain_corpus):
    """Without the flag, "[MASK]" is text."""
    lines = [line for pair in zip(reference_corpus, plain_corpus[:1000]) for line in pair]
    reference = _reference_without_special_tokens(UNCASED_VOCABULARY, True)
    ours = BertTokenizer(UNCASED_VOCABULARY, max_input_chars_per_word=REFERENCE_WORD_LIMIT)
    expected = reference.encode_batch(lines, add_special_tokens=False)
    mismatched = _mismatched_ids(ours, expected, lines)
    assert not mismatched, _describe(lines, mismatched, ours, reference)
    mismatched = _mismatched_lines(ours, expected, lines)
    assert not mismatched, _describe(lines, mismatched, ours, reference)


def test_every_stable_code_point_matches_reference():
    """Each code point the corpus may draw from, between two letters.

    Uncased only, which runs every rule (the cased run takes as long again and
    agrees as well).
    """
    characters = [
        character
        for category, characters in unicode_corpus.characters_by_category().items()
        if category != "Co"  # the reference drops private-use characters
        for character in characters
    ]
    # 64 code points a line, each as "x<c>y " so that splits show.
    lines = [
        "".join(f"x{character}y " for character in characters[i : i + 64])
        for i in range(0, len(characters), 64)
    ]
    ours = BertTokenizer(UNCASED_VOCABULARY, lowercase=True)
    reference = _reference(UNCASED_VOCABULARY, lowercase=True)
    expected = reference.encode_batch(lines, add_special_tokens=False)
    mismatched = _mismatched_lines(ours, expected, lines)
    assert not mismatched, _describe(lines, mismatched, ours, reference)


def test_from_preset_matches_auto_tokenizer(reference_corpus):
    ours = BertTokenizer.from_preset(
        CHECKPOINT_DIR,
        max_input_chars_per_word=REFERENCE_WORD_LIMIT,
        special_tokens_in_strings=True,
    )
    reference = AutoTokenizer.from_pretrained(CHECKPOINT_DIR)
    lines = reference_corpus[:300]
    expected = reference(lines, add_special_tokens=False)["input_ids"]
    assert ours(lines).to_list() == expected


# One rule at a time -----------------------------------------------------------


@pytest.fixture(scope="module")
def uncased():
    return BertTokenizer(UNCASED_VOCABULARY)


def test_spacing_accent_is_a_word_character(uncased):
    # U+00B4 is category Sk: neither punctuation nor an accent to strip.
    assert _tokens(uncased, "´timeout´") == ["´", "##time", "##out", "##´"]


def test_special_tokens_in_strings():
    text = "a [MASK] b[SEP]"
    kept = BertTokenizer(UNCASED_VOCABULARY, special_tokens_in_strings=True)
    split = BertTokenizer(UNCASED_VOCABULARY)
    assert _tokens(kept, text) == ["a", "[MASK]", "b", "[SEP]"]
    assert _tokens(split, text) == ["a", "[", "mask", "]", "b", "[", "sep", "]"]
    # Only the exact spelling is special.
    assert _tokens(kept, "[mask]") == ["[", "mask", "]"]


def test_no_compatibility_folding(uncased):
    # NFKC case folding would give "strasse", "fine" and "full".
    assert _tokens(uncased, "straße ﬁne ｆｕｌｌ") == ["st", "##raße", "ﬁ", "##ne", "[UNK]"]


@pytest.mark.parametrize(
    "text",
    [
        "ΟΔΟΣ",
        "ΟΔΟΣ. ΣΑΣ",
        "Σ ΣΣ ΑΣ",
        "ΑΣ\u200dΑ ΑΣ\u200d ΑΣ\x00Α",  # a zero-width joiner is case-ignorable; NUL is dropped
        "ΑΣ'Α ΑΣ' ΑΣ-Α",  # as the apostrophe; the hyphen is neither
        "ὈΔΥΣΣΕΎΣ 中Σ ΧΣ中",
        "ΟΔΟΣ é ΟΔΟΣ",  # both paths of a batch
    ],
)
def test_a_final_sigma_lower_cases_as_in_the_original(uncased, text):
    # The original's str.lower() gives "ς" for a "Σ" that ends a word; the
    # Rust reference, one character at a time, gives "σ".
    original = BertTokenizerLegacy(UNCASED_VOCABULARY, do_lower_case=True)
    expected = original.convert_tokens_to_ids(original.tokenize(text))
    assert uncased(text).numpy().tolist() == expected
    with_offsets, _, _ = uncased.tokenize_with_offsets([text, "ΟΔΟΣ"])
    assert with_offsets.to_list()[0] == expected
    assert uncased.split_words([text]).to_list()[0] == [
        word.encode() for word in BasicTokenizer(do_lower_case=True).tokenize(text)
    ]


def test_accents_stripped_only_when_uncased(cased_vocabulary):
    cased = BertTokenizer(cased_vocabulary, lowercase=False)
    uncased = BertTokenizer(cased_vocabulary, lowercase=True)
    assert _tokens(uncased, "Café") == ["cafe"]
    assert _tokens(cased, "Café")[0] == "Caf"


def test_cjk_ideographs_are_words_and_hangul_is_not(uncased):
    assert _tokens(uncased, "日本語") == ["日", "本", "語"]
    # Hangul is not in the CJK ranges; NFD splits the syllable into jamo.
    assert _tokens(uncased, "한") == ["ᄒ", "##ᅡ", "##ᆫ"]


def test_cjk_extension_e_is_spaced_like_the_original(uncased):
    text = "x\U0002b820y"
    assert BasicTokenizer(do_lower_case=True).tokenize(text) == ["x", "\U0002b820", "y"]
    starts = uncased.tokenize_with_offsets(text, unit="character")[1]
    assert starts.numpy().tolist() == [0, 1, 2]


def test_control_characters_are_dropped(uncased):
    assert _tokens(uncased, "hel\x00lo\u200b wor\x7fld\ufffd") == _tokens(uncased, "hello world")


def test_private_use_characters_make_unknown_words_like_the_original(uncased):
    # The original drops categories Cc and Cf only (the Rust reference all C*).
    text = "private\ue000use \U000f0000 plane15"
    expected = ["[UNK]", "[UNK]", "plane", "##15"]
    assert _tokens(uncased, text) == expected
    token_ids = uncased.tokenize_with_offsets(text)[0].numpy()
    assert [uncased.id_to_token(i) for i in token_ids] == expected


@pytest.mark.parametrize(
    "text, expected",
    [  # The original's tokens: it decodes bytes with errors="ignore".
        (b"caf\xe9 ok", ["caf", "ok"]),
        (b"caf\xe9ok", ["caf", "##ok"]),
        (b"na\xc3\xafve \x80x", ["naive", "x"]),
        (b"\xff\xfe", []),
        (b"[MASK] a\xe2\x82ok", ["[MASK]", "ao", "##k"]),
    ],
)
@pytest.mark.parametrize("special_tokens_in_strings", [False, True])
def test_invalid_utf8_bytes_are_dropped_on_both_paths(text, expected, special_tokens_in_strings):
    tokenizer = BertTokenizer(
        UNCASED_VOCABULARY, special_tokens_in_strings=special_tokens_in_strings
    )
    if not special_tokens_in_strings and expected[:1] == ["[MASK]"]:
        expected = ["[", "mask", "]"] + expected[1:]
    assert _tokens(tokenizer, text) == expected
    token_ids = tokenizer.tokenize_with_offsets(text)[0].numpy()
    assert [tokenizer.id_to_token(i) for i in token_ids] == expected


def test_unusual_whitespace_separates_words(uncased):
    assert _tokens(uncased, "a\u3000b\u2028c\xa0d\te") == list("abcde")


def test_word_length_limit():
    word = "a" * 150
    original = BertTokenizer(UNCASED_VOCABULARY)
    transformers_like = BertTokenizer(UNCASED_VOCABULARY, max_input_chars_per_word=100)
    assert "[UNK]" not in _tokens(original, word)
    assert _tokens(transformers_like, word) == ["[UNK]"]
    assert _tokens(original, "a" * 201) == ["[UNK]"]
    assert _tokens(original, "a" * 200) != ["[UNK]"]
    # The limit counts characters, not bytes.
    assert _tokens(original, "é" * 150) != ["[UNK]"]
    # Special tokens are no words: no limit keeps them from being found.
    for limit in [1, 2]:
        tokenizer = BertTokenizer(
            UNCASED_VOCABULARY,
            max_input_chars_per_word=limit,
            special_tokens_in_strings=True,
        )
        assert _tokens(tokenizer, "a [MASK]b,[SEP] ab abc") == [
            "a",
            "[MASK]",
            "b",
            ",",
            "[SEP]",
            "[UNK]" if limit == 1 else "ab",
            "[UNK]",
        ]
    tokenizer = BertTokenizer(
        UNCASED_VOCABULARY, max_input_chars_per_word=0, special_tokens_in_strings=True
    )
    assert _tokens(tokenizer, "a [MASK]b") == ["[UNK]", "[MASK]", "[UNK]"]


def test_control_characters_in_the_vocabulary():
    """Plain text marks special tokens with a control character (which the
    tokenizer drops from text) that no token holds."""
    tokens = list(SPECIAL_TOKENS) + ["\x01", "\x01m", "\x02m", "a"]
    tokenizer = BertTokenizer(tokens, special_tokens_in_strings=True)
    assert tokenizer(["a [MASK] a", "a \x01m"]).to_list() == [[8, 4, 8], [8, 1]]
    every_control = [chr(code) for code in [*range(1, 9), *range(14, 32)]]
    with pytest.raises(ValueError, match="control character"):
        BertTokenizer(list(SPECIAL_TOKENS) + every_control)


def test_byte_offsets_point_into_the_original(uncased):
    text = "Ça va? 日本  ＮＨＫ [MASK] naïve´x"
    token_ids, starts, ends = uncased.tokenize_with_offsets(text)
    raw = text.encode("utf-8")
    pieces = [
        (uncased.id_to_token(token_id), raw[start:end].decode())
        for token_id, start, end in zip(token_ids.numpy(), starts.numpy(), ends.numpy())
    ]
    assert pieces == [
        ("ca", "Ça"),
        ("va", "va"),
        ("?", "?"),
        ("日", "日"),
        ("本", "本"),
        ("[UNK]", "ＮＨＫ"),
        ("[", "["),
        ("mask", "MASK"),
        ("]", "]"),
        ("naive", "naïve"),
        ("##´", "´"),
        ("##x", "x"),
    ]


def test_character_offsets_index_python_strings(uncased):
    text = "𝔘nïcode 日本 ok"
    _, starts, ends = uncased.tokenize_with_offsets(text, unit="character")
    pieces = [text[s:e] for s, e in zip(starts.numpy(), ends.numpy())]
    assert pieces == ["𝔘nïcode", "日", "本", "ok"]


def test_unknown_word_spans_the_whole_word():
    tokenizer = BertTokenizer(list(SPECIAL_TOKENS) + ["ab"])
    _, starts, ends = tokenizer.tokenize_with_offsets(["ab xyzzy", "a" * 201])
    assert starts.to_list() == [[0, 3], [0]]
    assert ends.to_list() == [[2, 8], [201]]


def test_detokenize_round_trip(uncased):
    text = "the quick brown fox jumps over the unaffable dog"
    token_ids = uncased(text)
    assert len(token_ids) > len(text.split())  # some "##" pieces
    assert uncased.detokenize(token_ids).numpy().decode() == text
    batch = uncased.detokenize(uncased([text, "hello world"]))
    assert [line.decode() for line in batch.numpy()] == [text, "hello world"]


def test_shapes_and_dtypes(uncased):
    single = uncased("hello world")
    assert isinstance(single, tf.Tensor) and single.dtype == tf.int32
    batch = uncased(["hello world", "", "a"])
    assert isinstance(batch, tf.RaggedTensor) and batch.dtype == tf.int32
    assert batch.row_lengths().numpy().tolist() == [2, 0, 1]
    assert uncased([]).shape[0] == 0


def test_special_token_ids(uncased):
    assert (
        uncased.pad_token_id,
        uncased.unk_token_id,
        uncased.cls_token_id,
        uncased.sep_token_id,
        uncased.mask_token_id,
    ) == (0, 100, 101, 102, 103)
    assert uncased.vocabulary_size() == 30522
    assert uncased.token_to_id("hello") == 7592
    assert uncased.id_to_token(7592) == "hello"


def test_config_round_trip(uncased):
    for tokenizer in [
        uncased,
        BertTokenizer(
            list(SPECIAL_TOKENS) + ["Hi", "##!"],
            lowercase=False,
            special_tokens_in_strings=True,
            max_input_chars_per_word=7,
        ),
    ]:
        restored = BertTokenizer.from_config(tokenizer.get_config())
        assert restored.get_config() == tokenizer.get_config()
        text = ["Hi! [MASK] Hello!", "HiHiHiHi"]
        assert restored(text).to_list() == tokenizer(text).to_list()


def test_from_preset_reads_tokenizer_config(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(SPECIAL_TOKENS + ("Hi",)))
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"do_lower_case": False, "tokenize_chinese_chars": False})
    )
    tokenizer = BertTokenizer.from_preset(str(tmp_path))
    assert not tokenizer.lowercase and not tokenizer.tokenize_chinese_chars
    os.remove(tmp_path / "tokenizer_config.json")
    # Without settings, as an original release: cased when the vocabulary is, else uncased.
    assert not BertTokenizer.from_preset(str(tmp_path)).lowercase
    (tmp_path / "vocab.txt").write_text("\n".join(SPECIAL_TOKENS + ("hi",)))
    assert BertTokenizer.from_preset(str(tmp_path)).lowercase


def test_errors(tmp_path):
    missing = str(tmp_path / "nowhere" / "vocab.txt")
    with pytest.raises(FileNotFoundError, match="nowhere"):
        BertTokenizer(missing)
    with pytest.raises(FileNotFoundError, match="vocab.txt"):
        BertTokenizer.from_preset(str(tmp_path))
    with pytest.raises(ValueError, match=r"\[UNK\]"):
        BertTokenizer(["[PAD]", "[CLS]", "[SEP]", "[MASK]", "a"])
    with pytest.raises(ValueError, match="'a' appears twice"):
        BertTokenizer(list(SPECIAL_TOKENS) + ["a", "a"])
    empty = tmp_path / "empty_vocab.txt"
    empty.write_text("")
    with pytest.raises(ValueError, match=f"vocabulary {empty} must contain .*\\(it is empty\\)"):
        BertTokenizer(str(empty))
    tokenizer = BertTokenizer(list(SPECIAL_TOKENS))
    with pytest.raises(ValueError, match="shape"):
        tokenizer([["a"]])
    with pytest.raises(ValueError, match="'xyz' is not in the vocabulary"):
        tokenizer.token_to_id("xyz")
    with pytest.raises(ValueError, match="99"):
        tokenizer.id_to_token(99)


# TensorFlow graphs ------------------------------------------------------------


def test_in_tf_data_under_every_backend(uncased, corpus):
    lines = corpus[:64]
    expected = uncased(lines).to_list()
    batched = tf.data.Dataset.from_tensor_slices(lines).batch(16).map(uncased)
    assert [ids for batch in batched for ids in batch.to_list()] == expected
    single = tf.data.Dataset.from_tensor_slices(lines).map(
        lambda line: uncased.tokenize_with_offsets(line)[0]
    )
    assert [ids.numpy().tolist() for ids in single] == expected


def test_graph_uses_only_core_and_tf_text_2_12_ops():
    # With special tokens in strings every op of the other path runs too.
    tokenizer = BertTokenizer(UNCASED_VOCABULARY, special_tokens_in_strings=True)
    ops = set()
    for function in [tokenizer.tokenize, tokenizer.tokenize_with_offsets]:
        concrete = tf.function(function).get_concrete_function(tf.TensorSpec([None], tf.string))
        ops |= graph_ops(concrete)
    detokenize = tf.function(tokenizer.detokenize).get_concrete_function(
        tf.RaggedTensorSpec([None, None], tf.int32)
    )
    ops |= graph_ops(detokenize)
    tf_text_ops = {op for op in ops if not hasattr(tf.raw_ops, op)}
    assert tf_text_ops <= TF_TEXT_2_12_OPS, tf_text_ops - TF_TEXT_2_12_OPS
    assert "FastWordpieceTokenizeWithOffsets" in tf_text_ops


def test_saved_model_under_every_backend(tmp_path):
    """The layer holds only constants, so a bare tf.Module can export it."""
    tokenizer = BertTokenizer(UNCASED_VOCABULARY, special_tokens_in_strings=True)
    module = tf.Module()
    module.tokenize = tf.function(
        tokenizer.tokenize, input_signature=[tf.TensorSpec([None], tf.string)]
    )
    tf.saved_model.save(module, str(tmp_path))
    restored = tf.saved_model.load(str(tmp_path))
    texts = ["Héllo [MASK] wörld!", "日本 ´timeout´"]
    assert restored.tokenize(tf.constant(texts)).to_list() == tokenizer(texts).to_list()
