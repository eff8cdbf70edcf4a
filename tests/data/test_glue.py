import pytest

from bert_keras.data.glue import read_generic
from bert_keras.data.glue import read_glue


def _write(directory, name, text):
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def test_mrpc_pairs_and_labels(tmp_path):
    _write(
        tmp_path,
        "dev.tsv",
        "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
        "1\t11\t12\tHe said hi.\tHe greeted.\n0\t13\t14\tA cat.\tA dog.\n",
    )
    examples = read_glue("MRPC", str(tmp_path), "dev")
    assert examples.texts_a == ["He said hi.", "A cat."]
    assert examples.texts_b == ["He greeted.", "A dog."]
    assert examples.labels == [1, 0]


def test_cola_has_no_header(tmp_path):
    _write(tmp_path, "train.tsv", "gj04\t1\t\tThe sailors rode.\ngj04\t0\t*\tRode the.\n")
    examples = read_glue("CoLA", str(tmp_path), "train")
    assert examples.texts_a == ["The sailors rode.", "Rode the."] and examples.labels == [1, 0]
    assert examples.texts_b is None


def test_mnli_label_names_and_mismatched_file(tmp_path):
    row = "\t".join(["0"] * 8 + ["Premise.", "Hypothesis.", "x", "neutral"])
    _write(tmp_path, "dev_mismatched.tsv", "header\n" + row + "\n")
    examples = read_glue("MNLI-MM", str(tmp_path), "dev")
    assert examples.labels == [examples.label_names.index("neutral")]
    assert examples.texts_b == ["Hypothesis."]


def test_sts_b_is_a_regression(tmp_path):
    row = "\t".join(["0", "g", "f", "y", "0", "s1", "s2", "A man.", "A guy.", "4.2"])
    _write(tmp_path, "dev.tsv", "header\n" + row + "\n")
    assert read_glue("STS-B", str(tmp_path), "dev").labels == [pytest.approx(4.2)]


def test_test_split_has_no_labels(tmp_path):
    _write(tmp_path, "test.tsv", "index\tsentence\n0\tgood\n")
    examples = read_glue("SST-2", str(tmp_path), "test")
    assert examples.texts_a == ["good"] and examples.labels == [None]


def test_malformed_line_names_file_and_line(tmp_path):
    path = _write(tmp_path, "dev.tsv", "sentence\tlabel\ngood\t1\nno label here\n")
    with pytest.raises(ValueError, match=f"{path}:3: expected at least 2"):
        read_glue("SST-2", str(tmp_path), "dev")


def test_a_limit_reads_the_first_rows_and_no_further(tmp_path):
    path = _write(tmp_path, "train.tsv", "sentence\tlabel\ngood\t1\nbad\t0\nno label here\n")
    assert read_glue("SST-2", str(tmp_path), "train", limit=2).texts_a == ["good", "bad"]
    with pytest.raises(ValueError, match=f"{path}:4: expected at least 2"):
        read_glue("SST-2", str(tmp_path), "train", limit=3)


def test_label_outside_the_label_set(tmp_path):
    path = _write(tmp_path, "dev.tsv", "sentence\tlabel\ngood\t7\n")
    with pytest.raises(ValueError, match=f"{path}:2: label '7' is not one of \\['0', '1'\\]"):
        read_glue("SST-2", str(tmp_path), "dev")


def test_unknown_task_and_missing_file(tmp_path):
    with pytest.raises(ValueError, match="Unknown task_name 'squad'"):
        read_glue("squad", str(tmp_path), "dev")
    with pytest.raises(FileNotFoundError, match="dev.tsv"):
        read_glue("SST-2", str(tmp_path), "dev")


def test_generic_csv_with_pairs(tmp_path):
    path = _write(tmp_path, "train.csv", 'text,text_pair,label\n"a, quoted",b,pos\nc,d,neg\n')
    examples = read_generic(str(path))
    assert examples.texts_a == ["a, quoted", "c"] and examples.texts_b == ["b", "d"]
    assert examples.label_names == ("neg", "pos") and examples.labels == [1, 0]


def test_generic_dev_file_takes_the_train_files_classes(tmp_path):
    dev = _write(tmp_path, "dev.csv", "text,label\na,2\nb,2\nc,1.5\n")
    assert read_generic(str(dev)).label_names == ()  # on its own, a regression
    assert read_generic(str(dev), label_names=("1.5", "2", "3")).labels == [1, 1, 0]
    assert read_generic(str(dev), label_names=()).labels == [2.0, 2.0, 1.5]
    with pytest.raises(ValueError, match=r"dev.csv:4: label '1.5' is not one of \['2', '3'\]"):
        read_generic(str(dev), label_names=("2", "3"))


def test_generic_test_file_may_have_no_labels(tmp_path):
    test = _write(tmp_path, "test.csv", "text\nunseen\nunheard\n")
    assert read_generic(str(test), label_names=("neg", "pos")).labels == [None, None]
    with pytest.raises(ValueError, match="test.csv:1: the header must name 'text' and 'label'"):
        read_generic(str(test))  # labels would come from this file


def test_generic_header_must_name_text_and_label(tmp_path):
    path = _write(tmp_path, "train.tsv", "sentence\ty\nx\t1\n")
    with pytest.raises(ValueError, match="train.tsv:1: the header must name 'text' and 'label'"):
        read_generic(str(path))


@pytest.mark.parametrize(
    "rows, error",
    [
        ("a,pos\nb,neg,extra\n", ":3: expected 2 comma-separated fields as in the header, found 3"),
        ("a,pos\nb\n", ":3: expected 2 comma-separated fields as in the header, found 1"),
        ("a,pos\nb,\nc,neg\n", ":3: the label is empty"),  # not a class named ''
        ("", " holds no examples, only its header"),
    ],
)
def test_generic_rows_must_fill_the_headers_columns(tmp_path, rows, error):
    path = _write(tmp_path, "train.csv", "text,label\n" + rows)
    with pytest.raises(ValueError, match=f"{path}{error}"):
        read_generic(str(path))


def test_blank_lines_are_skipped_and_an_empty_file_is_an_error(tmp_path):
    path = _write(tmp_path, "train.csv", "text,label\na,pos\n\nc,neg\n")
    assert read_generic(str(path)).labels == [1, 0]
    path = _write(tmp_path, "train.tsv", "sentence\tlabel\ngood\t1\n\nbad\t0\n")
    assert read_glue("SST-2", str(tmp_path), "train").labels == [1, 0]
    _write(tmp_path, "dev.tsv", "sentence\tlabel\n\n")
    with pytest.raises(ValueError, match="dev.tsv holds no examples"):
        read_glue("SST-2", str(tmp_path), "dev")
