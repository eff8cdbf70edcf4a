"""Vocabularies: a transformers 5 save (tokenizer.json, no vocab.txt) reads as its vocab.txt would."""

import json
import os
import shutil

import pytest
import transformers

from bert_keras.checkpoints import read_checkpoint
from bert_keras.checkpoints import write_checkpoint
from bert_keras.checkpoints.vocabulary import read_vocabulary
from bert_keras.text.tokenizer import BertTokenizer
from tests.checkpoints import MINILM_DIRECTORY
from tests.checkpoints import PAIRS
from tests.checkpoints import SENTENCES

TEXTS = SENTENCES + PAIRS + ["Ünïcödé façade — naïve 東京 tokens!", "unaffable ##ing"]


@pytest.fixture(scope="module")
def saved_by_transformers(tmp_path_factory):
    """MiniLM as transformers 5 saves it: config, weights, tokenizer.json, no vocab.txt."""
    directory = tmp_path_factory.mktemp("transformers5")
    tokenizer = transformers.AutoTokenizer.from_pretrained(MINILM_DIRECTORY)
    tokenizer.save_pretrained(directory)
    for name in ("config.json", "model.safetensors"):
        shutil.copyfile(os.path.join(MINILM_DIRECTORY, name), directory / name)
    assert not (directory / "vocab.txt").exists()  # what makes this case
    return directory, tokenizer


def test_a_checkpoint_without_vocab_txt_tokenizes_as_transformers_does(saved_by_transformers):
    directory, reference = saved_by_transformers
    checkpoint = read_checkpoint(directory)
    assert os.path.basename(checkpoint.vocabulary_file) == "tokenizer.json"
    assert read_vocabulary(checkpoint.vocabulary_file) == read_vocabulary(
        os.path.join(MINILM_DIRECTORY, "vocab.txt")
    )
    ours = BertTokenizer.from_preset(directory)
    for text in TEXTS:
        expected = reference(text, add_special_tokens=False)["input_ids"]
        assert ours(text).numpy().tolist() == expected, text


@pytest.mark.parametrize("format", ["bert_keras", "original", "keras_hub"])
def test_a_conversion_writes_the_vocabulary_the_tokenizer_json_holds(
    saved_by_transformers, tmp_path, format
):
    directory = shutil.copytree(saved_by_transformers[0], tmp_path / "source")
    config = json.loads((directory / "config.json").read_text())
    # The original and keras-hub compute only the tanh GELU; the vocabulary is what is checked.
    (directory / "config.json").write_text(json.dumps({**config, "hidden_act": "gelu_new"}))
    write_checkpoint(read_checkpoint(directory), tmp_path / "out", format=format)
    written = read_checkpoint(tmp_path / "out").vocabulary_file
    assert os.path.basename(written) in ("vocab.txt", "vocabulary.txt")
    with (
        open(written, "rb") as file,
        open(os.path.join(MINILM_DIRECTORY, "vocab.txt"), "rb") as source,
    ):
        assert file.read() == source.read()


def test_tokens_keep_their_ids_whatever_unicode_line_breaks_they_hold(tmp_path):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a\u2028b", "c\x85d", "d\x1ce", "e"]
    path = tmp_path / "vocab.txt"
    path.write_text("".join(token + "\n" for token in tokens), encoding="utf-8")
    assert read_vocabulary(path) == tokens
    assert BertTokenizer(str(path))("e").numpy().tolist() == [8]


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_byte_order_mark_is_no_part_of_the_first_token(tmp_path, newline):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello"]
    path = tmp_path / "vocab.txt"
    path.write_bytes("".join(token + newline for token in tokens).encode("utf-8-sig"))
    assert read_vocabulary(path) == tokens
    assert BertTokenizer(str(path))("hello").numpy().tolist() == [5]


@pytest.mark.parametrize(
    "tokenizer_json, message",
    [
        ({"model": {"type": "BPE", "vocab": {"a": 0}}}, "holds no WordPiece vocabulary"),
        (
            {"model": {"type": "WordPiece", "vocab": {"[PAD]": 0, "a": 2}}},
            "ids must run from 0 to 1, one token each; no token has the ids [1]",
        ),
        (
            {
                "model": {"type": "WordPiece", "vocab": {"[PAD]": 0}},
                "added_tokens": [{"id": 1, "content": "<new>"}],
            },
            "adds tokens beyond its WordPiece vocabulary (['<new>'])",
        ),
    ],
)
def test_a_tokenizer_json_it_cannot_read_is_named(tmp_path, tokenizer_json, message):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(tokenizer_json))
    with pytest.raises(ValueError) as error:
        read_vocabulary(path)
    assert str(path) in str(error.value) and message in str(error.value)


def test_a_vocabulary_that_is_not_utf8_is_named_with_its_line(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_bytes(b"[PAD]\n[UNK]\n\xffbad\n")
    with pytest.raises(ValueError) as error:
        BertTokenizer(str(path))
    assert str(error.value) == (
        f"Vocabulary file {str(path)!r} is not UTF-8 text: line 3 holds the byte 0xff."
    )
