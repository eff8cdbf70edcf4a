import re

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


def test_one_number_written_two_ways_is_one_class(tmp_path):
    train = _write(tmp_path, "train.csv", "text,label\ngood,1\nbad,0\nfine,1.0\nawful,0.0\n")
    examples = read_generic(str(train))
    assert examples.label_names == ("0", "1") and examples.labels == [1, 0, 1, 0]
    dev = _write(tmp_path, "dev.csv", "text,label\ngood,1.0\nbad,0\n")
    assert read_generic(str(dev), label_names=examples.label_names).labels == [1, 0]


def test_a_label_in_other_case_than_the_heads_names_is_that_class(tmp_path):
    dev = _write(tmp_path, "dev.csv", "text,label\ngreat,POS\nboring,Neg\n")
    assert read_generic(str(dev), label_names=("neg", "pos")).labels == [1, 0]
    with pytest.raises(ValueError, match=r"dev.csv:2: label 'POS' is not one of \['Pos', 'pos'\]"):
        read_generic(str(dev), label_names=("Pos", "pos"))  # which one is not said


def test_generic_test_file_may_have_no_labels(tmp_path):
    test = _write(tmp_path, "test.csv", "text\nunseen\nunheard\n")
    assert read_generic(str(test), label_names=("neg", "pos")).labels == [None, None]
    with pytest.raises(ValueError, match="test.csv:1: the header must name 'text' and 'label'"):
        read_generic(str(test))  # labels would come from this file


def test_a_file_to_predict_may_mark_rows_unlabelled_as_hugging_face_does(tmp_path):
    test = _write(tmp_path, "test.csv", "text,label\nunseen,-1\nunheard,\nseen,pos\n")
    assert read_generic(str(test), ("neg", "pos"), labelled=False).labels == [None, None, 1]
    regression = _write(tmp_path, "scores.csv", "text,label\nunseen,-1\nunheard,\nseen,0.5\n")
    assert read_generic(str(regression), (), labelled=False).labels == [None, None, 0.5]
    with pytest.raises(
        ValueError,
        match=r"test.csv:2: label '-1' is not one of \['neg', 'pos'\] "
        r"\(-1 or empty marks an unlabelled row, read only when predicting\)",
    ):
        read_generic(str(test), ("neg", "pos"))
    classes = _write(tmp_path, "classes.csv", "text,label\nbad,-1\ngood,1\n")  # -1 a class
    assert read_generic(str(classes), ("-1", "1"), labelled=False).labels == [0, 1]


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


@pytest.mark.parametrize(
    "task_name, name, header, row, texts",
    [
        (
            "MRPC",
            "test.tsv",
            "index\t#1 ID\t#2 ID\t#1 String\t#2 String",
            "0\t11\t12\tHi.\tHello.",
            3,
        ),
        (
            "STS-B",
            "test.tsv",
            "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\ts1\ts2",
            "0\tg\tf\t2012\t0\tx\ty\tA man.\tA guy.",
            7,
        ),
        (
            "MNLI",
            "test_matched.tsv",
            "\t".join(f"c{i}" for i in range(10)),
            "\t".join(["0"] * 8 + ["Premise.", "Hypothesis."]),
            8,
        ),
        ("QQP", "test.tsv", "id\tquestion1\tquestion2", "0\tWhy?\tHow?", 1),
        ("CoLA", "test.tsv", "index\tsentence", "0\tThe sailors rode.", 1),
    ],
)
def test_test_files_are_read_from_their_own_text_columns(
    tmp_path, task_name, name, header, row, texts
):
    _write(tmp_path, name, f"{header}\n{row}\n")
    examples = read_glue(task_name, str(tmp_path), "test")
    fields = row.split("\t")
    assert examples.texts_a == [fields[texts]]
    if examples.texts_b is not None:
        assert examples.texts_b == [fields[texts + 1]]


def test_generic_files_may_start_with_a_byte_order_mark(tmp_path):
    for name in ("train.csv", "train.tsv"):
        path = tmp_path / name
        path.write_text(
            "text,label\ngood,pos\n".replace(",", "," if name.endswith("csv") else "\t"),
            encoding="utf-8-sig",
        )
        assert read_generic(str(path)).texts_a == ["good"]


def test_generic_tsv_reads_the_quoting_csv_writers_write(tmp_path):
    import csv

    path = tmp_path / "train.tsv"
    texts = ['he said "great" twice', "a\ttab", "two\nlines", '"quoted" start']
    with open(path, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file, delimiter="\t")
        writer.writerow(["text", "label"])
        writer.writerows([text, "pos"] for text in texts)
    assert read_generic(str(path)).texts_a == texts


def test_generic_errors_name_the_line_a_record_starts_on(tmp_path):
    path = _write(tmp_path, "train.csv", 'text,label\n"a\nb\nc",pos\nok,neg\nbad,neg,extra\n')
    with pytest.raises(ValueError, match=f"{path}:6: expected 2 comma-separated fields"):
        read_generic(str(path))


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf"])
def test_a_regression_label_must_be_finite(tmp_path, bad):
    path = _write(tmp_path, "train.csv", f"text,label\na,1.5\nb,{bad}\n")
    with pytest.raises(
        ValueError, match=f"{path}:3: regression label '{bad}' is not a finite number"
    ):
        read_generic(str(path))


def test_classes_named_nan_and_inf_are_classes(tmp_path):
    path = _write(tmp_path, "train.csv", "text,label\na,nan\nb,inf\nc,1\n")
    assert read_generic(str(path)).label_names == ("1", "inf", "nan")


def test_a_file_that_is_not_utf8_names_its_line(tmp_path):
    path = tmp_path / "train.csv"
    path.write_bytes(b"text,label\ngood,pos\ncaf\xe9,neg\n")
    with pytest.raises(ValueError, match=f"{path}:3: b'caf\\\\xe9,neg' is not UTF-8"):
        read_generic(str(path))


def test_an_empty_text_is_an_example_and_only_blank_lines_are_skipped(tmp_path):
    import csv

    texts = ["good movie", "", "bad movie", "good film"]
    path = tmp_path / "test.csv"
    with open(path, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)  # writes the empty text of a one-column row as ""
        writer.writerows([["text"], *([text] for text in texts)])
    assert '\n""\n' in path.read_text()
    examples = read_generic(str(path), label_names=("neg", "pos"))
    assert examples.texts_a == texts and examples.labels == [None] * 4
    # Lines of nothing but spaces are no rows (as pandas.read_csv has it); a row of empty cells is.
    path.write_text('text,text_pair\na,b\n\n   \n,\n"",x\nc,d\n')
    examples = read_generic(str(path), label_names=("neg", "pos"))
    assert examples.texts_a == ["a", "", "", "c"] and examples.texts_b == ["b", "", "x", "d"]


@pytest.mark.parametrize(
    "labels, names",
    [
        (["10", "2", "1", "0", "2"], ("0", "1", "2", "10")),  # as run_glue sorts pandas' ints
        (["-10", "3", "-2", "-3"], ("-10", "-3", "-2", "3")),
        (["2", "10", "b", "a"], ("10", "2", "a", "b")),  # not all numbers: as strings
    ],
)
def test_numeric_classes_are_ordered_by_value(tmp_path, labels, names):
    rows = "".join(f"t{index},{label}\n" for index, label in enumerate(labels))
    path = _write(tmp_path, "train.csv", "text,label\n" + rows)
    examples = read_generic(str(path))
    assert examples.label_names == names
    assert [names[label] for label in examples.labels] == labels


@pytest.mark.parametrize(
    "row, problem",
    [
        ('"Great movie\t1\nbad\t0\nfine\t1\n', "unexpected end of data"),  # swallowed the rest
        ('"Great" movie\t1\nbad\t0\n', "expected after '\"'"),  # lost its quote marks
    ],
    ids=["unclosed", "closed inside the text"],
)
def test_a_stray_quote_mark_is_named_not_read_into_other_rows(tmp_path, row, problem):
    train = _write(tmp_path, "train.tsv", "text\tlabel\n" + row)
    with pytest.raises(ValueError, match=rf"train.tsv:2: .*{re.escape(problem)}.*double them"):
        read_generic(str(train))
    quoted = _write(tmp_path, "quoted.tsv", 'text\tlabel\n"""Great"" movie"\t1\nbad\t0\n')
    assert read_generic(str(quoted)).texts_a == ['"Great" movie', "bad"]
