"""A checkpoint's tokenizer follows its format: casing, and the word-length limit (100 or 200)."""

import json
import shutil

import pytest
import tokenizers

from bert_keras.checkpoints import read_checkpoint
from bert_keras.checkpoints import read_tokenizer_settings
from bert_keras.checkpoints import write_checkpoint
from bert_keras.models.bert_backbone import BertBackbone
from bert_keras.models.bert_classifier import BertClassifier
from bert_keras.models.checkpoint_conversion import convert_checkpoint
from bert_keras.text.tokenizer import BertTokenizer
from tests.checkpoints import save_tiny

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
VOCABULARY = SPECIAL_TOKENS + ["a", "##a"] + [f"t{index}" for index in range(33)]
WORD = "a" * 150  # over Hugging Face's 100 characters, under the original's 200
UNK = VOCABULARY.index("[UNK]")
PIECES = [VOCABULARY.index("a")] + [VOCABULARY.index("##a")] * (len(WORD) - 1)


@pytest.fixture(scope="module")
def directories(tmp_path_factory):
    """A Hugging Face directory and the original release written from it."""
    root = tmp_path_factory.mktemp("formats")
    huggingface = root / "huggingface"
    # The original computes tanh GELU; 200 positions hold a word of 150 pieces.
    save_tiny("BertModel", huggingface, hidden_act="gelu_new", max_position_embeddings=200)
    (huggingface / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n")
    (huggingface / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
    original = root / "uncased_L-2_H-8_A-2"
    _write_as_googles_release(read_checkpoint(huggingface), original)
    return {"huggingface": huggingface, "original": original}


def _write_as_googles_release(checkpoint, directory):
    """The original format without the tokenizer settings bert_keras adds: as Google released it."""
    write_checkpoint(checkpoint, directory, format="original")
    (directory / "bert_keras.json").unlink()


def _reference_ids(vocabulary_file, word):
    """What transformers' tokenizer (the Rust WordPiece, limit 100) makes of `word`."""
    reference = tokenizers.BertWordPieceTokenizer(str(vocabulary_file), lowercase=True)
    return reference.encode(word, add_special_tokens=False).ids


@pytest.mark.parametrize(
    "format, limit, expected", [("huggingface", 100, [UNK]), ("original", 200, PIECES)]
)
def test_every_tokenizer_from_a_directory_has_its_formats_word_limit(
    directories, format, limit, expected
):
    directory = directories[format]
    checkpoint = read_checkpoint(directory)
    assert checkpoint.tokenizer_settings["max_input_chars_per_word"] == limit
    assert BertTokenizer.from_preset(str(directory))(WORD).numpy().tolist() == expected
    classifier = BertClassifier.from_preset(directory, num_classes=2, sequence_length=200)
    token_ids = classifier.preprocessor(WORD)["token_ids"].numpy().tolist()
    assert token_ids[1 : 1 + len(expected)] == expected
    # The project's own format keeps the limit of the directory it was converted from.
    convert_checkpoint(directory, directory.parent / f"{format}_converted")
    converted = read_checkpoint(directory.parent / f"{format}_converted")
    assert converted.tokenizer_settings == checkpoint.tokenizer_settings


def test_hugging_face_limit_matches_transformers(directories):
    vocabulary_file = directories["huggingface"] / "vocab.txt"
    tokenizer = BertTokenizer.from_preset(str(directories["huggingface"]))
    for word in ("a" * 100, "a" * 101, WORD):
        assert tokenizer(word).numpy().tolist() == _reference_ids(vocabulary_file, word), word


def test_a_hugging_face_directory_with_only_vocab_txt_has_transformers_limit(directories, tmp_path):
    bare = shutil.copytree(directories["huggingface"], tmp_path / "bare")
    (bare / "tokenizer_config.json").unlink()
    assert sorted(path.name for path in bare.iterdir()) == [
        "config.json",
        "model.safetensors",
        "vocab.txt",
    ]
    tokenizer = BertTokenizer.from_preset(str(bare))
    assert tokenizer(WORD).numpy().tolist() == _reference_ids(bare / "vocab.txt", WORD) == [UNK]


def test_original_casing_comes_from_the_directory_name(directories, tmp_path):
    cased = tmp_path / "cased_L-2_H-8_A-2"
    _write_as_googles_release(read_checkpoint(directories["huggingface"]), cased)
    assert read_checkpoint(cased).tokenizer_settings["lowercase"] is False
    assert read_checkpoint(directories["original"]).tokenizer_settings["lowercase"] is True


def test_the_original_format_written_from_another_keeps_its_sources_tokenizer(
    directories, tmp_path
):
    source = read_checkpoint(directories["huggingface"])
    source.tokenizer_settings["lowercase"] = False  # a cased model, in a directory named uncased
    written = tmp_path / "uncased_L-2_H-8_A-2"
    write_checkpoint(source, written, format="original")
    assert read_checkpoint(written).format == "original"
    assert read_checkpoint(written).tokenizer_settings == source.tokenizer_settings
    tokenizer = BertTokenizer.from_preset(str(written))
    assert tokenizer("A a").numpy().tolist() == [UNK, VOCABULARY.index("a")]  # "A" kept: no piece
    assert tokenizer(WORD).numpy().tolist() == [UNK]  # the source's limit, 100


CASED_VOCABULARY = VOCABULARY[:-3] + ["London", "##On", "A"]


def _release(directories, directory, vocabulary):
    """Google's release layout (no bert_keras.json) at `directory`, with `vocabulary`."""
    _write_as_googles_release(read_checkpoint(directories["huggingface"]), directory)
    (directory / "vocab.txt").write_text("\n".join(vocabulary) + "\n")
    return directory


def test_an_original_release_with_a_cased_vocabulary_is_cased_whatever_its_name(
    directories, tmp_path, monkeypatch, caplog
):
    renamed = _release(directories, tmp_path / "tiny_release", CASED_VOCABULARY)
    assert read_checkpoint(renamed).tokenizer_settings["lowercase"] is False
    tokenizer = BertTokenizer.from_preset(str(renamed))
    assert tokenizer("London A").numpy().tolist() == [
        CASED_VOCABULARY.index("London"),
        CASED_VOCABULARY.index("A"),
    ]
    misnamed = _release(directories, tmp_path / "uncased_L-2_H-8_A-2", CASED_VOCABULARY)
    with caplog.at_level("WARNING", logger="absl"):
        assert read_tokenizer_settings(misnamed)["lowercase"] is False
    assert f"{misnamed}'s name says uncased, but 3 of its 40 tokens hold upper-case" in caplog.text
    assert "'London', '##On', 'A'" in caplog.text and "lowercase=True" in caplog.text
    monkeypatch.chdir(renamed)
    assert read_tokenizer_settings(".")["lowercase"] is False


def test_an_original_release_with_an_uncased_vocabulary_follows_its_name(
    directories, tmp_path, monkeypatch
):
    cased = _release(directories, tmp_path / "cased_L-2_H-8_A-2", VOCABULARY)
    assert read_tokenizer_settings(cased)["lowercase"] is False
    monkeypatch.chdir(cased)  # "." names the same directory
    assert read_tokenizer_settings(".")["lowercase"] is False
    assert read_tokenizer_settings(_release(directories, tmp_path / "bert", VOCABULARY)) == {
        **read_tokenizer_settings(cased),
        "lowercase": True,  # the original scripts' default
    }


def test_an_uncased_tokenizer_of_a_cased_vocabulary_is_warned_of(directories, tmp_path, caplog):
    huggingface = shutil.copytree(directories["huggingface"], tmp_path / "huggingface")
    (huggingface / "vocab.txt").write_text("\n".join(CASED_VOCABULARY) + "\n")
    with caplog.at_level("WARNING", logger="absl"):
        settings = read_tokenizer_settings(huggingface)
    assert settings["lowercase"] is True  # as its tokenizer_config.json says, as transformers
    assert "lower-cases its text, so 3 of its 40 tokens" in caplog.text
    assert "lowercase=False" in caplog.text


def test_a_saved_backbone_preset_tokenizes_as_transformers_reads_it(directories, tmp_path):
    vocabulary_file = directories["huggingface"] / "vocab.txt"
    backbone = BertBackbone.from_preset(directories["original"])  # a limit of 200 on reading
    backbone.save_to_preset(tmp_path / "saved", vocabulary_file=vocabulary_file)
    tokenizer = BertTokenizer.from_preset(str(tmp_path / "saved"))
    assert tokenizer(WORD).numpy().tolist() == _reference_ids(vocabulary_file, WORD) == [UNK]
