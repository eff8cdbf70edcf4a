"""Reading delimited text files: records numbered by their first line, errors naming the line.

Standard library only, so importing this module loads no TensorFlow.
"""

import csv
import sys

from bert_keras.data.input_file_error import InputFileError

# A line that is not UTF-8 is quoted whole up to this many bytes (a binary file's "line" is long).
EXCERPT_BYTES = 80


def fields_of_any_size():
    """Lifts the csv module's limit on a field's size (131,072 characters), for the whole process.

    A text (a SQuAD context, a long review) or an id may be longer; the
    limit would stop the read with an error naming neither file nor line.
    The readers call this before they read, so that what they accept does
    not depend on what else the process imported.

    Example:
    >>> import csv
    >>> fields_of_any_size()
    >>> csv.field_size_limit() == sys.maxsize
    True
    """
    csv.field_size_limit(sys.maxsize)


def numbered_records(reader, path=None):
    """`(line number, row)` for each record of a `csv.reader`, numbered by its first line.

    A quoted field may span lines, so a record's number is not its index.
    Fields may be of any size (`fields_of_any_size`). With `path`, a record
    the reader cannot parse (a `strict` reader's stray quote mark) is an
    `InputFileError` naming the file and the line the record starts on.

    Example:
    >>> import csv, io
    >>> list(numbered_records(csv.reader(io.StringIO('text,label\\n"two\\nlines",a\\nb,c\\n'))))
    [(1, ['text', 'label']), (2, ['two\\nlines', 'a']), (4, ['b', 'c'])]
    >>> list(numbered_records(csv.reader(io.StringIO('"Great" film,1\\n'), strict=True), "a.csv"))
    Traceback (most recent call last):
    ...
    bert_keras.data.input_file_error.InputFileError: a.csv:1: ',' expected after '"': a field ...
    """
    fields_of_any_size()
    first_line = reader.line_num + 1  # past any lines read before
    try:
        for row in reader:
            yield first_line, row
            first_line = reader.line_num + 1
    except csv.Error as error:
        if path is None:
            raise
        raise InputFileError(
            f"{path}:{first_line}: {error}: a field that starts with a quote mark is quoted up "
            "to the next lone one; quote a field that holds quote marks and double them "
            '("Great" film as \'"""Great"" film"\'), as csv.writer and pandas write them.'
        ) from None


def utf8_records(records, path):
    """`records` read from `path`, with a decoding error turned into one naming the line.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "latin1.csv")
    >>> _ = open(path, "wb").write(b"text\\ncaf\\xe9\\n")
    >>> list(utf8_records(open(path, encoding="utf-8"), path))
    Traceback (most recent call last):
    ...
    bert_keras.data.input_file_error.InputFileError: ...latin1.csv:2: b'caf\\xe9' is not UTF-8; save the file as UTF-8.
    """
    try:
        yield from records
    except UnicodeDecodeError:
        raise not_utf8_error(path) from None


def not_utf8_error(path):
    """An `InputFileError` naming the first line of `path` that is not UTF-8, for a decoding error.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "latin1.json")
    >>> _ = open(path, "wb").write(b'{"text":\\n "caf\\xe9"}')
    >>> print(not_utf8_error(path))
    /...latin1.json:2: b' "caf\\xe9"}' is not UTF-8; save the file as UTF-8.
    """
    line_number, line, position = _first_undecodable_line(path)
    return InputFileError(
        f"{path}:{line_number}: {_excerpt(line, position)} is not UTF-8; save the file as UTF-8."
    )


def _first_undecodable_line(path):
    """(line number, bytes, the first bad byte's index) of the first line that is not UTF-8.

    ("?", b"", 0) if each line is.
    """
    with open(path, "rb") as file:
        for line_number, line in enumerate(file, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as error:
                return line_number, line.rstrip(b"\r\n"), error.start
    return "?", b"", 0


def _excerpt(line, position):
    """`line` (bytes) as a repr, or where long (a binary file's), the bytes from just before `position`."""
    if len(line) <= EXCERPT_BYTES:
        return repr(line)
    start = max(0, position - EXCERPT_BYTES // 4)
    return f"{line[start : start + EXCERPT_BYTES]!r} (from byte {start + 1} of {len(line)})"
