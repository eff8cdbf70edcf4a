"""Reader for SWAG-format multiple-choice CSV files.

The files SWAG distributes (train.csv, val.csv, test.csv) have a header row
naming `video-id, fold-ind, startphrase, sent1, sent2, gold-source, ending0,
ending1, ending2, ending3, label` (test.csv has no `label`, or, as Hugging
Face's swag test split exports it, a `label` of -1). As in the
original run_swag.py, `sent1` is the context and each choice is `sent2`
followed by one ending. A malformed row is an error naming the file and the
line.
"""

import csv
import dataclasses
import re

from bert_keras.data import split_files
from bert_keras.data.delimited_text import numbered_records
from bert_keras.data.delimited_text import utf8_records
from bert_keras.data.input_file_error import InputFileError

# Names the splits go by: SWAG's own, then the generic ones.
SPLIT_FILES = {
    "train": ("train.csv",),
    "dev": ("val.csv", "dev.csv"),
    "test": ("test.csv",),
}
REQUIRED_COLUMNS = ("sent1", "sent2", "ending0", "ending1")
_ENDING = re.compile(r"ending(\d+)")


@dataclasses.dataclass
class MultipleChoiceExamples:
    """Parallel lists: `contexts`, `choices` (a list of texts each), `labels` (None when unlabelled)."""

    contexts: list
    choices: list
    labels: list

    def __len__(self):
        return len(self.contexts)

    @property
    def num_choices(self):
        return len(self.choices[0]) if self.choices else 0


def read_swag(path, limit=None, labelled=True):
    """Reads a SWAG CSV file (UTF-8, with or without a byte-order mark).

    Args:
        path: the file.
        limit: read at most this many examples.
        labelled: whether the labels are needed. When not (a test file to
            predict), a label of -1 or an empty one reads as None, as Hugging
            Face's swag test split marks its unlabelled rows.

    Returns:
        `MultipleChoiceExamples`, with one choice per `ending*` column, in
        order; labels are None in a file without a `label` column.

    Raises:
        InputFileError: a header without the columns, a row of the wrong width,
            a label that is not a choice's index; naming the file and line.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "val.csv")
    >>> _ = open(path, "w").write("sent1,sent2,ending0,ending1,label\\n"
    ...                           "He is hungry.,He,eats.,sleeps.,0\\n")
    >>> examples = read_swag(path)
    >>> examples.contexts, examples.choices, examples.labels
    (['He is hungry.'], [['He eats.', 'He sleeps.']], [0])
    >>> _ = open(path, "w").write("sent1,sent2,ending0,ending1,label\\n"
    ...                           "He is hungry.,He,eats.,sleeps.,-1\\n")
    >>> read_swag(path, labelled=False).labels
    [None]
    """
    # utf-8-sig: a spreadsheet's byte-order mark is not part of the first column's name.
    with open(path, encoding="utf-8-sig", newline="") as file:
        records = utf8_records(numbered_records(csv.reader(file)), path)
        header = next(records, (1, []))[1]
        missing = [name for name in REQUIRED_COLUMNS if name not in header]
        if missing:
            raise InputFileError(
                f"{path}:1: the header lacks the columns {missing}; found {header}."
            )
        columns = {name: index for index, name in enumerate(header)}
        endings = _ending_columns(header, path)
        label_column = columns.get("label")
        examples = MultipleChoiceExamples([], [], [])
        for first_line, row in records:
            if not any(cell.strip() for cell in row):
                continue
            if limit is not None and len(examples) >= limit:
                break
            if len(row) != len(header):
                raise InputFileError(
                    f"{path}:{first_line}: expected {len(header)} comma-separated fields "
                    f"as in the header, found {len(row)}.{_quoted_lines(row, first_line)}"
                )
            start = row[columns["sent2"]]
            examples.contexts.append(row[columns["sent1"]])
            examples.choices.append([_join(start, row[index]) for _, index in endings])
            examples.labels.append(
                None
                if label_column is None
                else _label(row[label_column], len(endings), labelled, f"{path}:{first_line}")
            )
    return examples


def split_path(data_dir, split):
    """The file of `split` ("train", "dev" or "test") in `data_dir` (see `SPLIT_FILES`).

    Raises:
        FileNotFoundError: naming the directory and the names looked for.

    Example:
    >>> import os, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> _ = open(os.path.join(directory, "val.csv"), "w").write("sent1\\n")
    >>> os.path.basename(split_path(directory, "dev"))
    'val.csv'
    """
    return split_files.split_path(data_dir, split, SPLIT_FILES)


def _ending_columns(header, path):
    """`(number, column index)` of each `endingN` column, by number: ending0 to ending{n-1}.

    A label is the number of its ending, so a gap or a repeat would point
    labels at the wrong choice.
    """
    endings = sorted(
        (int(match.group(1)), index)
        for index, name in enumerate(header)
        if (match := _ENDING.fullmatch(name))
    )
    numbers = [number for number, _ in endings]
    if numbers != list(range(len(numbers))):
        found = ", ".join(f"ending{number}" for number in numbers)
        raise InputFileError(
            f"{path}:1: the ending columns must be ending0 to ending{len(numbers) - 1}, each "
            f"once (a label is its ending's number); found {found}."
        )
    return endings


def _quoted_lines(row, first_line):
    """Where a record of several lines ends: a quote mark left open swallows the lines after it."""
    # An open quote at the end of the file holds the last line's own line break too.
    last_line = first_line + "".join(row).rstrip("\n").count("\n")
    if last_line == first_line:
        return ""
    return (
        f" Its record runs on to line {last_line}: a quote mark opened on line {first_line} "
        "closes only there, or never."
    )


def _join(start, ending):
    return f"{start} {ending}" if start else ending


def _label(value, num_choices, labelled, where):
    if not labelled and value.strip() in ("", "-1"):
        return None
    if not value.strip().isdecimal() or int(value) >= num_choices:
        unlabelled = (
            " (-1 or empty marks an unlabelled row, read only when predicting)"
            if value.strip() in ("", "-1")
            else ""
        )
        raise InputFileError(
            f"{where}: label {value!r} is not a choice index in [0, {num_choices}){unlabelled}."
        )
    return int(value)
