"""The SWAG reader: run_swag's pairing, unlabelled test files, file:line errors."""

import pytest

from bert_keras.data.swag import read_swag
from bert_keras.data.swag import split_path

HEADER = (
    "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"
)


def _write(tmp_path, text, name="train.csv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_context_is_sent1_and_each_choice_is_sent2_then_an_ending(tmp_path):
    path = _write(
        tmp_path,
        HEADER
        + 'anetv_1,5,"Students sit. They","Students sit.",They,gold,read.,"run, fast.",eat.,sing.,1\n'
        + "lsmdc_2,7,He waves. Someone,He waves.,Someone,gen,smiles.,leaves.,waves.,nods.,3\n",
    )
    examples = read_swag(path)
    assert examples.contexts == ["Students sit.", "He waves."]
    assert examples.choices[0] == ["They read.", "They run, fast.", "They eat.", "They sing."]
    assert examples.labels == [1, 3] and examples.num_choices == 4
    assert len(read_swag(path, limit=1)) == 1


def test_a_file_without_labels_reads_as_unlabelled(tmp_path):
    header = HEADER.replace(",label", "")
    path = _write(tmp_path, header + "v,0,s,A man sits.,He,gold,a.,b.,c.,d.\n", "test.csv")
    assert read_swag(path).labels == [None]


@pytest.mark.parametrize("label", ["-1", ""])
def test_a_test_file_of_unlabelled_rows_reads_as_unlabelled_when_predicting(tmp_path, label):
    # Hugging Face's swag test split exports a label column of -1.
    text = HEADER + f"v,0,s,A man sits.,He,gold,a.,b.,c.,d.,{label}\n"
    path = _write(tmp_path, text, "test.csv")
    assert read_swag(path, labelled=False).labels == [None]
    with pytest.raises(ValueError, match=r":2: label .* \(-1 or empty marks an unlabelled row"):
        read_swag(path)
    wrong = _write(tmp_path, text.replace(f",{label}\n", ",7\n"), "wrong.csv")
    with pytest.raises(ValueError, match=r"wrong\.csv:2: label '7' is not a choice index"):
        read_swag(wrong, labelled=False)


def test_a_byte_order_mark_is_not_part_of_the_header(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text(
        "sent1,sent2,ending0,ending1,label\nA man sits.,He,eats.,naps.,1\n", "utf-8-sig"
    )
    examples = read_swag(str(path))
    assert examples.contexts == ["A man sits."] and examples.labels == [1]


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "sent1,ending0,label\nx,y,0\n",
            r":1: the header lacks the columns \['sent2', 'ending1'\]",
        ),
        (
            HEADER + 'v,0,s,"two\nlines",b,g,e0,e1,e2,e3,0\nv,0,s,a,b,g,e0,e1,e2,0\n',
            ":4: expected 11 comma-separated fields as in the header, found 10",
        ),
        (
            HEADER + "v,0,s,a,b,g,e0,e1,e2,e3,4\n",
            r":2: label '4' is not a choice index in \[0, 4\)",
        ),
        (
            "sent1,sent2,ending0,ending1,ending3,label\nx,y,a,b,c,2\n",
            ":1: the ending columns must be ending0 to ending2, each once .*; found ending0, "
            "ending1, ending3",
        ),
        (
            "sent1,sent2,ending0,ending1,ending1,label\nx,y,a,b,c,2\n",
            ":1: the ending columns must be .*; found ending0, ending1, ending1",
        ),
        (
            HEADER + 'v,0,"s,a,b,g,e0,e1,e2,e3,0\n' + "v,0,s,a,b,g,e0,e1,e2,e3,0\n" * 3,
            ":2: expected 11 comma-separated fields as in the header, found 3. Its record runs "
            "on to line 5: a quote mark opened on line 2 closes only there, or never.",
        ),
        (HEADER + "v,0,s,a,b,g,e0,e1,e2,e3,\n", ":2: label ''"),
        (HEADER + "v,0,s,a,b,g,e0,e1,e2,e3,\u00b2\n", ":2: label '\u00b2' is not a choice"),
    ],
)
def test_malformed_rows_name_the_file_and_line(tmp_path, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError, match=path.replace(".", r"\.") + message):
        read_swag(path)


def test_dev_split_goes_by_swag_name_or_dev(tmp_path):
    _write(tmp_path, HEADER, "dev.csv")
    assert split_path(str(tmp_path), "dev").endswith("dev.csv")
    with pytest.raises(FileNotFoundError, match=r"No test file in .*test\.csv"):
        split_path(str(tmp_path), "test")


def test_a_file_that_is_not_utf8_names_its_line(tmp_path):
    path = tmp_path / "train.csv"
    path.write_bytes(b"sent1,sent2,ending0,ending1,label\nCaf\xe9 opens.,He,eats.,sleeps.,0\n")
    with pytest.raises(
        ValueError, match=f"{path}:2: b'Caf\\\\xe9 opens.,He,eats.,sleeps.,0' is not UTF-8"
    ):
        read_swag(str(path))


def test_quoted_lines_are_numbered_by_their_first_line(tmp_path):
    path = tmp_path / "train.csv"
    path.write_text('sent1,sent2,ending0,ending1,label\n"two\nlines",He,a,b,0\nx,He,a,b\n')
    with pytest.raises(ValueError, match=f"{path}:4: expected 5 comma-separated fields"):
        read_swag(str(path))
