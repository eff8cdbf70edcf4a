"""`InputFileError`: a data file that a run cannot use, named with its line or record."""


class InputFileError(ValueError):
    """A data file, or a line or record of it, that cannot be read as the task needs.

    The message names the file (and the line or record) to fix. It is a
    `ValueError`, so code that catches those still does; the programs under
    `tasks/` print it as a usage error, whichever step reads the file.

    Example:
    >>> raise InputFileError("train.tsv:3: expected 2 tab-separated fields, found 1.")
    Traceback (most recent call last):
    ...
    bert_keras.data.input_file_error.InputFileError: train.tsv:3: expected 2 tab-separated fields, found 1.
    """
