import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib

from bert_keras.text.tokenizer import SPECIAL_TOKENS
from bert_keras.text.tokenizer import BertTokenizer
from bert_keras.text.vocabulary_learner import learn_vocabulary
from bert_keras.text.vocabulary_learner import left_out_characters
from tests.programs import program

build_vocab = program("tools.build_vocab")

CORPUS = [
    "The Quick brown fox jumps over the lazy dog.",
    "Über-fast Foxes don't sleep; they're Jumping!",
    "Tokenizers split words into pieces: token, ##izer, ##s.",
] * 20


def _run_tool(tmp_path, *flags, output_name="vocab.txt"):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    output = tmp_path / output_name
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "tools.build_vocab",
            f"--input_file={corpus}",
            f"--output_file={output}",
            *flags,
        ],
        capture_output=True,
        text=True,
    )
    return completed, output


@pytest.mark.large
def test_cased_vocabulary_tokenizes_its_corpus_without_unknowns(tmp_path):
    completed, output = _run_tool(tmp_path, "--vocab_size=200", "--nodo_lower_case")
    assert completed.returncode == 0, completed.stderr[-2000:]
    vocabulary = output.read_text(encoding="utf-8").splitlines()
    assert vocabulary[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert len(vocabulary) <= 200 and len(set(vocabulary)) == len(vocabulary)
    assert "Q" in vocabulary and "Ü" in vocabulary  # cased: capitals and accents kept
    tokenizer = BertTokenizer(str(output), lowercase=False)
    ids = tokenizer(tf.constant(CORPUS)).flat_values.numpy()
    assert tokenizer.unk_token_id not in ids


@pytest.mark.large
def test_uncased_vocabulary_is_lower_case_without_accents(tmp_path):
    completed, output = _run_tool(tmp_path, "--vocab_size=200")
    assert completed.returncode == 0, completed.stderr[-2000:]
    learned = output.read_text(encoding="utf-8").splitlines()[5:]
    assert not any(character.isupper() for token in learned for character in token)
    assert "u" in learned and "Ü" not in learned and "ü" not in learned


@pytest.mark.large
def test_missing_output_directories_are_created(tmp_path):
    completed, output = _run_tool(tmp_path, "--vocab_size=200", output_name="new/deeper/vocab.txt")
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert os.listdir(output.parent) == ["vocab.txt"]
    assert output.read_text(encoding="utf-8").splitlines()[:2] == ["[PAD]", "[UNK]"]


def test_standard_size_uses_the_released_layout():
    vocabulary = learn_vocabulary({"hello": 10, "world": 7}, 30522)
    assert [vocabulary.index(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [
        0,
        100,
        101,
        102,
        103,
    ]
    assert vocabulary[999:] and "hello" in vocabulary[999:]


def test_missing_input_names_the_pattern(tmp_path):
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "tools.build_vocab",
            f"--input_file={tmp_path}/none*.txt",
            f"--output_file={tmp_path}/vocab.txt",
        ],
        capture_output=True,
        text=True,
    )
    assert completed.returncode != 0
    assert "none*.txt' matches no file" in completed.stderr
    assert not (tmp_path / "vocab.txt").exists()


@pytest.mark.parametrize(
    "output_file, problem",
    [
        ("{tmp}", "--output_file: {tmp} is a directory; give a file path in it"),
        ("", "--output_file is empty"),
        ("{tmp}/corpus.txt/vocab.txt", "--output_file: {tmp}/corpus.txt is a file, so"),
    ],
    ids=["a directory", "empty", "under a file"],
)
def test_a_bad_output_file_is_a_usage_error_before_any_learning(output_file, problem, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    completed = build_vocab(
        f"--input_file={corpus}", f"--output_file={output_file.format(tmp=tmp_path)}"
    )
    assert completed.returncode == 1
    assert (
        completed.stderr.strip()
        .splitlines()[-1]
        .startswith(f"build_vocab: {problem.format(tmp=tmp_path)}")
    )
    assert "Traceback" not in completed.stderr
    assert os.listdir(tmp_path) == ["corpus.txt"]


def test_an_output_file_that_cannot_be_written_is_one_line_naming_the_flag(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    output = "/proc/no_such_process/vocab.txt"  # no directory can be made there
    completed = build_vocab(f"--input_file={corpus}", f"--output_file={output}")
    assert completed.returncode == 1
    last_line = completed.stderr.strip().splitlines()[-1]
    assert last_line.startswith(f"build_vocab: --output_file: {output} cannot be written: ")
    assert "Traceback" not in completed.stderr


def test_a_size_the_learner_overshoots_is_kept_without_its_rarest_subwords():
    rng = np.random.default_rng(2)
    words = {"".join(rng.choice(list("abcdefghijklmnop"), rng.integers(2, 7))) for _ in range(600)}
    counts = {word: int(rng.integers(1, 4)) for word in sorted(words)}  # few counts: coarse sizes
    learned = wordpiece_tokenizer_learner_lib.learn(
        counts, 120, list(SPECIAL_TOKENS), lower_thresh=1
    )
    assert len(learned) > 120  # what tensorflow-text's learner gives when asked for 120
    vocabulary = learn_vocabulary(counts, 120)
    assert len(vocabulary) == 120 and vocabulary[:5] == list(SPECIAL_TOKENS)
    assert set("abcdefghijklmnop") <= set(vocabulary)
    tokenizer = BertTokenizer(vocabulary)
    ids = tokenizer(tf.constant(sorted(words))).flat_values.numpy()
    assert tokenizer.unk_token_id not in ids
    with pytest.raises(ValueError, match="no room for the text's 32 single characters"):
        learn_vocabulary(counts, 30)


def test_empty_corpus_is_an_error():
    with pytest.raises(ValueError, match="input text is empty"):
        learn_vocabulary({}, 100)


@pytest.mark.parametrize(
    "input_file, output_file, problem",
    [
        (
            "{tmp}/corpus.txt",
            "{tmp}/corpus.txt",
            "--output_file {tmp}/corpus.txt is the --input_file file {tmp}/corpus.txt: writing",
        ),
        (
            "{tmp}/other.txt,{tmp}/link/corpus.txt",
            "{tmp}/corpus.txt",
            "--output_file {tmp}/corpus.txt is the --input_file file {tmp}/link/corpus.txt:",
        ),
        (
            "{tmp}/*.txt",
            "{tmp}/vocab.txt",
            "--output_file {tmp}/vocab.txt matches --input_file's '{tmp}/*.txt', so a later run",
        ),
        (
            "{tmp}/link/*.txt",
            "{tmp}/vocab.txt",
            "--output_file {tmp}/vocab.txt matches --input_file's '{tmp}/link/*.txt', so",
        ),
    ],
    ids=["the input", "the input by a link", "matched by the glob", "matched through a link"],
)
def test_an_output_file_among_the_inputs_is_refused(input_file, output_file, problem, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    (tmp_path / "other.txt").write_text("Other words.\n", encoding="utf-8")
    (tmp_path / "link").symlink_to(tmp_path)
    completed = build_vocab(
        f"--input_file={input_file.format(tmp=tmp_path)}",
        f"--output_file={output_file.format(tmp=tmp_path)}",
    )
    assert completed.returncode == 1
    assert (
        completed.stderr.strip()
        .splitlines()[-1]
        .startswith(f"build_vocab: {problem.format(tmp=tmp_path)}")
    )
    assert corpus.read_text(encoding="utf-8") == "\n".join(CORPUS) + "\n"
    assert sorted(os.listdir(tmp_path)) == ["corpus.txt", "link", "other.txt"]


@pytest.mark.large
def test_an_output_file_beside_the_inputs_that_no_glob_matches_is_written(tmp_path):
    (tmp_path / "corpus.txt").write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    output = tmp_path / ".vocab.txt"  # glob's "*" skips names that start with "."
    completed = build_vocab(
        f"--input_file={tmp_path}/*.txt", f"--output_file={output}", "--vocab_size=80"
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert output.read_text().startswith("[PAD]\n[UNK]\n")


def test_lines_that_are_not_utf8_are_skipped_and_reported(tmp_path):
    corpus = tmp_path / "latin1.txt"
    corpus.write_bytes(b"hello world\ncaf\xe9 na\xefve\nplain caf\xc3\xa9\n\xff\xfe\n")
    completed = build_vocab(
        f"--input_file={corpus}", f"--output_file={tmp_path / 'vocab.txt'}", "--vocab_size=40"
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert f"Skipped 2 lines that are not valid UTF-8 (the first at {corpus}:2)." in (
        completed.stdout
    )
    learned = (tmp_path / "vocab.txt").read_text(encoding="utf-8").splitlines()[5:]
    assert {"hello", "world", "plain", "cafe"} <= set(learned)  # "café" in UTF-8, uncased
    assert not {"caf", "nave", "v", "##v"} & set(learned)  # nothing of the Latin-1 line


@pytest.mark.parametrize(
    "flags, problem",
    [
        (["--input_file=,"], "--input_file names no file."),
        (["--input_file={corpus}", "--do_lower_case", "false"], "Unexpected arguments: ['false']"),
    ],
    ids=["no file named", "a stray argument"],
)
def test_a_bad_command_line_is_a_usage_error_before_any_learning(flags, problem, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    completed = build_vocab(
        *(flag.format(corpus=corpus) for flag in flags), f"--output_file={tmp_path / 'vocab.txt'}"
    )
    assert completed.returncode == 1
    assert completed.stderr.strip().splitlines()[-1] == f"build_vocab: {problem}"
    assert os.listdir(tmp_path) == ["corpus.txt"]


def test_the_size_cut_keeps_every_character_and_its_continuation_form():
    letters = "abcdefghijklmnopqrstuvwxyz"
    counts = {pair: 50 for pair in ["th", "he", "in", "er", "an", "re"]}
    for letter in letters:  # "aa".."az" and "aa".."za": each letter once as "##x"
        counts["a" + letter] = counts.get("a" + letter, 0) + 1
        counts[letter + "a"] = counts.get(letter + "a", 0) + 1
    vocabulary = learn_vocabulary(counts, 5 + 2 * len(letters))  # room for the characters only
    assert len(vocabulary) == 57
    assert set(letters) | {"##" + letter for letter in letters} <= set(vocabulary)
    tokenizer = BertTokenizer(vocabulary)
    ids = tokenizer(tf.constant(sorted(counts))).flat_values.numpy()
    assert tokenizer.unk_token_id not in ids


def test_characters_past_the_limit_are_counted_with_their_occurrences():
    counts = {"aab": 3, "bc": 2, "d": 1}
    assert left_out_characters(counts, max_unique_characters=2) == {"c": 2, "d": 1}
    assert not left_out_characters(counts, max_unique_characters=4)


@pytest.mark.large
def test_characters_past_the_default_limit_are_reported_and_kept_when_raised(tmp_path):
    ideographs = [chr(0x4E00 + index) for index in range(1010)]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(  # the last 10 are the rarest
        " ".join(ideographs[:1000] * 2 + ideographs[1000:]) + "\n", encoding="utf-8"
    )
    output = tmp_path / "vocab.txt"
    flags = (f"--input_file={corpus}", f"--output_file={output}", "--vocab_size=2100")
    completed = build_vocab(*flags)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "Warning: 10 distinct characters (10 occurrences) are past the 1000 most" in (
        completed.stdout
    )
    assert ideographs[-1] not in output.read_text(encoding="utf-8").splitlines()
    completed = build_vocab(*flags, "--max_unique_characters=1010")
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "Warning" not in completed.stdout
    assert set(ideographs) <= set(output.read_text(encoding="utf-8").splitlines())


@pytest.mark.large
def test_a_word_too_long_to_learn_from_is_spelled_by_its_characters_with_a_warning(tmp_path):
    long_word = "ภาษาไทยไม่มีช่องว่างระหว่างคำเลยทั้งประโยคยาวมากจริงๆ" * 2  # Thai: no spaces
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(f"{long_word}\nshort words\n" * 3, encoding="utf-8")
    output = tmp_path / "vocab.txt"
    completed = build_vocab(f"--input_file={corpus}", f"--output_file={output}", "--vocab_size=200")
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "Warning: 1 distinct words (3 occurrences) are over 50 characters" in completed.stdout
    tokenizer = BertTokenizer(str(output))
    ids = tokenizer(tf.constant([long_word, "short words"])).flat_values.numpy()
    assert tokenizer.unk_token_id not in ids
