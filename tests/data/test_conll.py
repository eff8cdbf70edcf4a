"""The CoNLL reader: sentences, -DOCSTART-, file:line errors, split names, tag schemes."""

import pytest

from bert_keras.data.conll import has_split
from bert_keras.data.conll import is_entity_tag
from bert_keras.data.conll import read_conll
from bert_keras.data.conll import split_path
from bert_keras.data.conll import tag_scheme


def _write(tmp_path, text, name="train.txt"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_sentences_end_at_blank_lines_and_documents_are_skipped(tmp_path):
    path = _write(
        tmp_path,
        "-DOCSTART- -X- -X- O\n\n"
        "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n\n"
        "-DOCSTART- -X- -X- O\n"
        "Peter NNP B-NP B-PER\r\nBlackburn NNP I-NP I-PER\n",
    )
    sentences = read_conll(path)
    assert [s.words for s in sentences] == [("EU", "rejects"), ("Peter", "Blackburn")]
    assert [s.tags for s in sentences] == [("B-ORG", "O"), ("B-PER", "I-PER")]
    assert sentences[1].lines == ("Peter NNP B-NP B-PER", "Blackburn NNP I-NP I-PER")
    assert sentences[0].line_numbers == (3, 4) and sentences[1].line_numbers == (8, 9)


def test_limit_reads_the_first_sentences(tmp_path):
    path = _write(tmp_path, "a O\n\nb O\n\nc O\n")
    assert [s.words for s in read_conll(path, limit=2)] == [("a",), ("b",)]


@pytest.mark.parametrize(
    "text, message",
    [
        ("EU B-ORG\nrejects\n", ":2: expected a word and a tag"),
        ("-DOCSTART- -X- O O\n\n", " holds no sentences"),  # not "no train file"
    ],
)
def test_malformed_lines_name_the_file_and_line(tmp_path, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError, match=path.replace(".", r"\.") + message):
        read_conll(path)


def test_any_tag_set_is_read_and_only_entity_tags_have_a_scheme(tmp_path):
    # Part of speech, CoNLL-2003's second column: '"' and '-LRB-' are tags too.
    path = _write(tmp_path, 'CRICKET NNP\n- :\n" "\n( -LRB-\n\nTAKE VB\n')
    sentences = read_conll(path)
    assert [s.tags for s in sentences] == [("NNP", ":", '"', "-LRB-"), ("VB",)]
    assert tag_scheme([s.tags for s in sentences]) is None
    assert tag_scheme([["B-PER", "I-PER"], ["X-ORG"]]) is None
    assert tag_scheme([["B-PER", "B-"]]) is None
    assert all(map(is_entity_tag, ("O", "S-LOC", "B-NP")))
    assert not any(map(is_entity_tag, ("NNP", "X-ORG", "B-", "-LRB-")))


def test_text_to_tag_is_read_as_words_alone(tmp_path):
    path = _write(tmp_path, "-DOCSTART-\n\nEU\nrejects\n\nPeter\n", "test.txt")
    sentences = read_conll(path, tagged=False)
    assert [(s.words, s.tags) for s in sentences] == [(("EU", "rejects"), None), (("Peter",), None)]
    assert sentences[0].line_numbers == (3, 4)
    with pytest.raises(ValueError, match=r"test\.txt:3: expected a word and a tag"):
        read_conll(path)
    tagged = read_conll(_write(tmp_path, "Peter NNP B-PER \n", "tagged.txt"), tagged=False)
    assert [(s.words, s.tags, s.lines) for s in tagged] == [
        (("Peter",), None, ("Peter NNP B-PER",))
    ]


@pytest.mark.parametrize(
    "text, tagged, message",
    [
        # A tag left out: the chunk tag would be read as the tag.
        ("EU NNP B-NP B-ORG\n\nrejects VBZ B-VP\n", True, r":3: 3 columns \('rejects VBZ B-VP'\)"),
        # A word holding a space: its second half would be read as the tag.
        ("Bonn B-LOC\nNew York B-LOC\n", True, r":2: 3 columns \('New York B-LOC'\)"),
        # Words alone: "York" would be dropped.
        ("Bonn\n\nNew York\n", False, r":3: 2 columns \('New York'\) where line 1 has 1"),
    ],
)
def test_a_line_of_other_columns_than_the_first_is_named(tmp_path, text, tagged, message):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError, match=path.replace(".", r"\.") + message):
        read_conll(path, tagged=tagged)


def test_split_files_by_their_usual_names(tmp_path):
    _write(tmp_path, "a O\n", "dev.txt")
    _write(tmp_path, "a O\n", "eng.testb")
    assert split_path(str(tmp_path), "dev").endswith("dev.txt")
    assert split_path(str(tmp_path), "test").endswith("eng.testb")
    assert not has_split(str(tmp_path), "train")
    with pytest.raises(FileNotFoundError, match=r"No train file in .*train\.txt"):
        split_path(str(tmp_path), "train")


def test_a_split_under_two_names_reads_the_first_and_warns_once(tmp_path, caplog):
    _write(tmp_path, "a O\n", "valid.txt")
    _write(tmp_path, "b O\n", "dev.txt")
    for _ in range(2):
        assert split_path(str(tmp_path), "dev").endswith("valid.txt")
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [
        f"{tmp_path} holds valid.txt and dev.txt: the dev split reads the first, valid.txt."
    ]


def test_tag_schemes_are_told_apart():
    # IOB1: I- opens an entity; B- only splits two adjacent entities of a type.
    assert tag_scheme([["I-PER", "I-PER", "B-PER", "O"], ["I-LOC"]]) == "IOB1"
    assert tag_scheme([["B-PER", "I-PER", "B-PER", "O", "B-LOC"]]) == "IOB2"
    assert tag_scheme([["B-PER", "I-LOC"]]) == "IOB1"  # I- after another type opens one
    assert tag_scheme([["S-PER", "B-LOC", "E-LOC"]]) == "IOBES"
    assert tag_scheme([["U-PER", "B-LOC", "L-LOC"]]) == "BILOU"  # spaCy's
    assert tag_scheme([["O", "O"]]) == "O"


def test_a_byte_order_mark_is_not_part_of_the_first_word(tmp_path):
    path = tmp_path / "train.txt"
    path.write_bytes(
        "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n".encode("utf-8-sig")
    )
    sentences = read_conll(str(path))
    assert [(s.words, s.tags) for s in sentences] == [(("EU", "rejects"), ("B-ORG", "O"))]
    path.write_bytes("EU B-ORG\n".encode("utf-8-sig"))
    assert read_conll(str(path))[0].lines == ("EU B-ORG",)
    # Files joined with `cat`, each with its own mark.
    joined = "-DOCSTART- -X- O\n\nEU B-ORG\n\n".encode("utf-8-sig") * 2
    path.write_bytes(joined + "\ufeffPeter B-PER\n".encode())
    sentences = read_conll(str(path))
    assert [s.words for s in sentences] == [("EU",), ("EU",), ("Peter",)]
    assert sentences[2].lines == ("Peter B-PER",)
