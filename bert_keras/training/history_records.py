"""Reading a run's history files, without Keras: what the programs log per epoch or interval.

- `history.jsonl` (pretraining, fine-tuning): a JSON record per line, each
  with its `step`, appended as the run goes (`callbacks.JsonLinesHistory`);
- `history.json` (BERT4Rec): a list of values per metric, one per epoch.
"""

import json
import os

from absl import logging

HISTORY_FILES = ("history.jsonl", "history.json")


def read_history(path):
    """The records of a JSON-lines history file, in file order ([] when it is missing).

    A line cut short by a killed process is skipped with a warning.

    Raises:
        ValueError: a line holds JSON that is not an object with a numeric
            `step` (the message names the file and line), or the file is
            not UTF-8.

    Example:
    >>> read_history("/no/such/history.jsonl")
    []
    """
    if not os.path.exists(path):
        return []
    try:
        with open(path, encoding="utf-8") as file:
            return _records(file, path)
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not UTF-8 text ({error.reason}).") from None


def _records(lines, path):
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            logging.warning("%s:%d is not a JSON record (a cut-off write?); skipped.", path, number)
            continue
        records.append(_checked_record(record, f"{path}:{number}"))
    return records


def _checked_record(record, place):
    if not isinstance(record, dict):
        raise ValueError(f"{place}: a record must be a JSON object, not {json.dumps(record)[:80]}.")
    if "step" not in record:
        raise ValueError(f'{place}: the record has no "step".')
    step = record["step"]
    if isinstance(step, bool) or not isinstance(step, (int, float)):
        raise ValueError(f'{place}: "step" is {json.dumps(step)[:80]}, not a number.')
    return record


def read_history_records(output_dir):
    """The history records of a run's OUTPUT_DIR, each a dict with a `step`.

    Reads `history.jsonl`, or else `history.json` (whose epochs are the
    steps).

    Raises:
        FileNotFoundError: neither file is in `output_dir`.
        ValueError: a file that is not such a history; the message names
            the file (and line of `history.jsonl`) and what is wrong.

    Example:
    >>> import tempfile
    >>> directory = tempfile.mkdtemp()
    >>> _ = open(directory + "/history.json", "w").write('{"loss": [0.9, 0.5]}')
    >>> read_history_records(directory)
    [{'loss': 0.9, 'step': 1}, {'loss': 0.5, 'step': 2}]
    """
    lines_path, lists_path = (os.path.join(output_dir, name) for name in HISTORY_FILES)
    if os.path.exists(lines_path):
        return read_history(lines_path)
    if os.path.exists(lists_path):
        columns = _read_columns(lists_path)
        epochs = max((len(values) for values in columns.values()), default=0)
        return [
            {
                **{name: values[epoch] for name, values in columns.items() if epoch < len(values)},
                "step": epoch + 1,
            }
            for epoch in range(epochs)
        ]
    raise FileNotFoundError(f"No {' or '.join(HISTORY_FILES)} in {output_dir}.")


def _read_columns(path):
    """The `{metric: [value per epoch]}` of a history.json, checked."""
    with open(path, encoding="utf-8") as file:
        try:
            columns = json.load(file)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{error.lineno}: not JSON ({error.msg}).") from None
        except UnicodeDecodeError as error:
            raise ValueError(f"{path} is not UTF-8 text ({error.reason}).") from None
    if not isinstance(columns, dict):
        raise ValueError(
            f"{path}: must hold a JSON object of lists, one value per epoch, "
            f"not {json.dumps(columns)[:80]}."
        )
    for name, values in columns.items():
        if not isinstance(values, list):
            raise ValueError(
                f"{path}: {name!r} must be a list, one value per epoch, "
                f"not {json.dumps(values)[:80]}."
            )
    return columns
