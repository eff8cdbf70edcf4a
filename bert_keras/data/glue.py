"""Readers for the GLUE tasks' TSV files and for generic CSV/TSV classification data.

Each reader returns `ClassificationExamples`: parallel lists of first texts,
optional second texts and labels (label indices, or floats for STS-B). Column
positions follow the files GLUE distributes (the same the original
run_classifier.py reads). A malformed line is an error naming the file and the
line; a label outside the task's label set too.
"""

import csv
import dataclasses
import itertools
import math
import os

from bert_keras.data.delimited_text import numbered_records
from bert_keras.data.delimited_text import utf8_records
from bert_keras.data.input_file_error import InputFileError


@dataclasses.dataclass(frozen=True)
class TaskFormat:
    """Where a GLUE task's columns are and which labels it has.

    Test files have other columns: an index, then metadata for some tasks;
    `test_text_a` is their first text's column, and a second text follows it.
    """

    text_a: int
    text_b: int = None
    label: int = -1
    labels: tuple = ("0", "1")  # empty: regression
    header: bool = True
    files: tuple = ("train.tsv", "dev.tsv", "test.tsv")
    test_text_a: int = 1


_NLI = ("contradiction", "entailment", "neutral")
_TWO_WAY_NLI = ("entailment", "not_entailment")

GLUE_TASKS = {
    "cola": TaskFormat(text_a=3, label=1, header=False),
    "sst-2": TaskFormat(text_a=0, label=1),
    "mrpc": TaskFormat(text_a=3, text_b=4, label=0, test_text_a=3),
    "sts-b": TaskFormat(text_a=7, text_b=8, label=9, labels=(), test_text_a=7),
    "qqp": TaskFormat(text_a=3, text_b=4, label=5),
    "mnli": TaskFormat(
        text_a=8,
        text_b=9,
        labels=_NLI,
        files=("train.tsv", "dev_matched.tsv", "test_matched.tsv"),
        test_text_a=8,
    ),
    "mnli-mm": TaskFormat(
        text_a=8,
        text_b=9,
        labels=_NLI,
        files=("train.tsv", "dev_mismatched.tsv", "test_mismatched.tsv"),
        test_text_a=8,
    ),
    "qnli": TaskFormat(text_a=1, text_b=2, labels=_TWO_WAY_NLI),
    "rte": TaskFormat(text_a=1, text_b=2, labels=_TWO_WAY_NLI),
    "wnli": TaskFormat(text_a=1, text_b=2),
}
SPLITS = ("train", "dev", "test")


@dataclasses.dataclass
class ClassificationExamples:
    """Parallel lists: `texts_a`, `texts_b` (None for single texts), `labels`."""

    texts_a: list
    texts_b: list
    labels: list
    label_names: tuple

    def __len__(self):
        return len(self.texts_a)


def read_glue(task_name, data_dir, split, label_names=None, limit=None):
    """Reads `split` ("train", "dev" or "test") of a GLUE task from `data_dir`.

    Test files carry no labels; their `labels` are all None. Labels are
    ids of the task's label names (`GLUE_TASKS`), or of `label_names`:
    the same names in the order of a checkpoint's head.

    Example:
    >>> import os, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> with open(os.path.join(directory, "dev.tsv"), "w") as f:
    ...     _ = f.write("sentence\\tlabel\\ngood film\\t1\\ndull\\t0\\n")
    >>> examples = read_glue("SST-2", directory, "dev")
    >>> examples.texts_a, examples.labels
    (['good film', 'dull'], [1, 0])
    """
    task = _task_format(task_name)
    path = glue_path(task_name, data_dir, split)
    if split == "test":
        first = task.test_text_a
        unlabelled = dataclasses.replace(
            task,
            text_a=first,
            text_b=first + 1 if task.text_b is not None else None,
            label=None,
            header=True,
        )
        return _read_rows(path, unlabelled, task.labels, limit)
    return _read_rows(path, task, task.labels if label_names is None else label_names, limit)


def glue_path(task_name, data_dir, split):
    """The file of a GLUE task's `split` ("train", "dev" or "test") in `data_dir`.

    Example:
    >>> glue_path("MNLI", "/glue/MNLI", "dev")
    '/glue/MNLI/dev_matched.tsv'
    """
    return os.path.join(data_dir, _task_format(task_name).files[SPLITS.index(split)])


def read_generic(path, label_names=None, limit=None, labelled=True):
    """Reads a CSV or TSV with a header naming `text`, optional `text_pair`, `label`.

    Each row is an example, in the file's order, one with an empty text
    too (`""`, as `csv.writer` writes it): only blank lines are skipped, as
    pandas.read_csv skips them, so that example i is the row pandas numbers
    i. Labels are strings. Without `label_names`, their sorted set becomes
    the label names, numbers ordered by value ("2" before "10", as
    transformers' run_glue.py sorts the integer labels pandas reads),
    unless every label is a number and one has a fractional part, which
    makes the task a regression. Dev and test files are read
    with the train file's `label_names`, so that a label means the same
    class in each, and one the train file does not have is an error; such
    a file may have no `label` column, and its `labels` are then all None.
    A file read only to predict (`labelled=False`) may also mark rows
    unlabelled with -1 or an empty label, as Hugging Face's GLUE test splits
    do; those labels are None.
    Both kinds of file are read with CSV's quoting, as `csv.writer` and
    pandas write them, and a leading byte-order mark is skipped.

    Args:
        path: the .csv or .tsv file.
        label_names: the classes' names in order, `()` for a regression, or
            None to take them from this file.
        limit: read at most this many examples.
        labelled: whether the labels are needed (not for a file to predict).

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "dev.csv")
    >>> with open(path, "w") as f:
    ...     _ = f.write("text,label\\nyes please,pos\\n")
    >>> read_generic(path).labels, read_generic(path, label_names=("neg", "pos")).labels
    ([0], [1])
    >>> _ = open(path, "w").write('text,label\\na,10\\n"",2\\n\\nc,1\\n')
    >>> read_generic(path).label_names, read_generic(path).texts_a
    (('1', '2', '10'), ['a', '', 'c'])
    """
    delimiter = "\t" if path.endswith(".tsv") else ","
    # utf-8-sig: a byte-order mark (spreadsheets write one) is not part of the header.
    with open(path, encoding="utf-8-sig", newline="") as file:
        records = utf8_records(
            numbered_records(csv.reader(file, delimiter=delimiter, strict=True), path), path
        )
        _, header = next(records, (1, None))
        if not header or "text" not in header or ("label" not in header and label_names is None):
            raise InputFileError(
                f"{path}:1: the header must name 'text' and 'label' columns, got {header}."
            )
        rows = [(number, row) for number, row in records if not _is_blank_line(row)]
    for number, row in rows:
        if len(row) != len(header):
            raise InputFileError(
                f"{path}:{number}: expected {len(header)} {_SEPARATED[delimiter]} fields as in "
                f"the header, found {len(row)}."
            )
    if not rows:
        raise InputFileError(f"{path} holds no examples, only its header.")
    columns = {name: header.index(name) for name in header}
    if label_names is None:
        label_names = _label_names(rows, columns["label"], path)
    task = TaskFormat(
        text_a=columns["text"],
        text_b=columns.get("text_pair"),
        label=columns.get("label"),
        labels=tuple(label_names),
        header=False,
    )
    return _parse_rows(rows, path, task, task.labels, limit, labelled)


def _label_names(rows, label_column, path):
    """The sorted set of a file's labels; `()` (a regression) if all are numbers, one fractional.

    Finite numbers are ordered by value: run_glue.py sorts a csv file's
    integer labels as pandas reads them, numbers, and a head it trained
    takes its outputs in that order. Two spellings of one number ("1" and
    "1.0") are one class, named by the first.
    """
    values = [row[label_column] for _, row in rows]
    for (number, _), value in zip(rows, values):
        if not value.strip():
            raise InputFileError(f"{path}:{number}: the label is empty; each example needs one.")
    if all(map(_is_number, values)) and any(map(_is_fraction, values)):
        return ()
    if all(_is_number(value) and math.isfinite(float(value)) for value in values):
        first_spelling = {}  # "1" and "1.0" are one class, as pandas reads them
        for value in values:
            first_spelling.setdefault(float(value), value)
        return tuple(first_spelling[number] for number in sorted(first_spelling))
    return tuple(sorted(set(values)))


_SEPARATED = {",": "comma-separated", "\t": "tab-separated"}


def _task_format(task_name):
    task = GLUE_TASKS.get(task_name.lower())
    if task is None:
        raise ValueError(f"Unknown task_name {task_name!r}; known: {sorted(GLUE_TASKS)}.")
    return task


def _read_rows(path, task, label_names, limit):
    if not os.path.exists(path):
        raise FileNotFoundError(f"No such file: {path}")
    with open(path, encoding="utf-8-sig", newline="") as file:
        # Unquoted, as the original reads GLUE's files: their texts hold bare quotes.
        records = numbered_records(csv.reader(file, delimiter="\t", quotechar=None))
        records = utf8_records(records, path)
        if task.header:
            next(records, None)
        # A limit reads no further.
        rows = [
            (number, row) for number, row in itertools.islice(records, limit) if _holds_text(row)
        ]
    if not rows:
        raise InputFileError(f"{path} holds no examples.")
    return _parse_rows(rows, path, task, label_names, limit)


def _holds_text(row):
    """Whether a row has a cell that is not blank (blank lines are skipped)."""
    return any(cell.strip() for cell in row)


def _is_blank_line(row):
    """Whether a csv record is a line of nothing but spaces, which pandas.read_csv skips too.

    A quoted empty field (`""`, as `csv.writer` writes an empty text in a
    one-column file) or a row of empty fields (`,`) is a row: an example
    with an empty text, kept so that each row keeps its index.
    """
    return not row or (len(row) == 1 and row[0] != "" and not row[0].strip())


def _parse_rows(rows, path, task, label_names, limit, labelled=True):
    """Examples of `(line number, row)` pairs, the first `limit` if given."""
    examples = ClassificationExamples([], [] if task.text_b is not None else None, [], label_names)
    for number, row in rows[:limit] if limit else rows:
        examples.texts_a.append(_cell(row, task.text_a, path, number))
        if task.text_b is not None:
            examples.texts_b.append(_cell(row, task.text_b, path, number))
        label = None if task.label is None else _cell(row, task.label, path, number)
        if label is not None:
            label = _label(label, label_names, path, number, labelled)
        examples.labels.append(label)
    return examples


def _cell(row, column, path, line_number):
    if column >= len(row) or -column > len(row):
        raise InputFileError(
            f"{path}:{line_number}: expected at least {column + 1 if column >= 0 else -column} "
            f"tab-separated columns, found {len(row)}."
        )
    return row[column]


def _label(value, label_names, path, line_number, labelled=True):
    unlabelled = value.strip() in ("", "-1")
    if not labelled and unlabelled and _class_id(value, label_names) is None:
        return None
    if not label_names:
        if not (_is_number(value) and math.isfinite(float(value))):
            raise InputFileError(
                f"{path}:{line_number}: regression label {value!r} is not a finite number."
            )
        return float(value)
    class_id = _class_id(value, label_names)
    if class_id is None:
        raise InputFileError(
            f"{path}:{line_number}: label {value!r} is not one of {list(label_names)}"
            + (
                " (-1 or empty marks an unlabelled row, read only when predicting)."
                if unlabelled
                else "."
            )
        )
    return class_id


def _class_id(value, label_names):
    """The index of `value`'s name; else of the one name equal to it as a number or in any case.

    A head fine-tuned elsewhere may spell the data's classes in other case
    (`POSITIVE`), and a file may write one number two ways (`1`, `1.0`).
    """
    if value in label_names:
        return label_names.index(value)
    same = [index for index, name in enumerate(label_names) if _same_label(name, value)]
    return same[0] if len(same) == 1 else None


def _same_label(name, value):
    if _is_number(name) and _is_number(value):
        return float(name) == float(value)
    return name.casefold() == value.casefold()


def _is_number(value):
    try:
        float(value)
    except ValueError:
        return False
    return True


def _is_fraction(value):
    return _is_number(value) and math.isfinite(float(value)) and not float(value).is_integer()
