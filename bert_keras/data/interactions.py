"""User-item interaction logs: reading them, item ids by frequency, leave-one-out splits.

Three formats are read, each line one interaction:

- `movielens`: MovieLens-1M/10M `ratings.dat`, `UserID::MovieID::Rating::Timestamp`;
- `recbole`: RecBole atomic `.inter` files, tab-separated, a header naming the
  columns with their types (`user_id:token item_id:token ... timestamp:float`);
- `csv`: comma-separated with a header that names `user` (or `user_id`,
  `userId`), `item` (or `item_id`, `movieId`) and `timestamp` columns, as
  MovieLens-20M's ratings.csv does.

`UserSequences.from_interactions` puts each user's items in time order (ties
kept in file order), drops users with fewer than `min_interactions` and
numbers the items by descending frequency: id 0 is padding, items are
1..`num_items`, as BERT4Rec's vocabulary does.
"""

import csv
import dataclasses
import hashlib
import importlib.util
import json
import os

import numpy as np

from bert_keras.atomic_files import write_text
from bert_keras.data.delimited_text import fields_of_any_size
from bert_keras.data.delimited_text import numbered_records
from bert_keras.data.delimited_text import utf8_records

INPUT_FORMATS = ("movielens", "recbole", "csv")
PAD_ID = 0


@dataclasses.dataclass(frozen=True)
class Interactions:
    """Parallel columns of an interaction log, in file order.

    Attributes:
        users: raw user ids (strings).
        items: raw item ids (strings).
        timestamps: int64 when every timestamp is an integer (epoch
            nanoseconds stay exact), else float64, or Python numbers where
            float64 would round some (their order stays exact).
    """

    users: list
    items: list
    timestamps: np.ndarray


def read_interactions(path, input_format):
    """Reads an interaction log in one of `INPUT_FORMATS`.

    Raises:
        ValueError: an unknown format, a missing column, or a malformed line;
            the message names the file and the line number.

    Example:
    >>> import tempfile
    >>> path = tempfile.mkdtemp() + "/ratings.dat"
    >>> _ = open(path, "w").write("1::1193::5::978300760\\n1::661::3::978302109\\n")
    >>> read_interactions(path, "movielens").items
    ['1193', '661']
    """
    readers = {"movielens": _movielens_rows, "recbole": _recbole_rows, "csv": _csv_rows}
    if input_format not in readers:
        raise ValueError(f"Unknown input_format {input_format!r}; expected one of {INPUT_FORMATS}.")
    fields_of_any_size()
    users, items, timestamps = [], [], []
    # utf-8-sig: a byte-order mark (spreadsheets write one) is not part of the header.
    with open(path, encoding="utf-8-sig", newline="") as file:
        rows = readers[input_format](file, path)
        for line_number, (user, item, timestamp) in utf8_records(rows, path):
            timestamps.append(_timestamp(timestamp, f"{path}:{line_number}"))
            if not user or not item:
                raise ValueError(f"{path}:{line_number}: empty user or item id.")
            users.append(user)
            items.append(item)
    if not users:
        raise ValueError(f"{path} holds no interactions.")
    return Interactions(users, items, _timestamp_array(timestamps))


def _timestamp(text, where):
    """An int for an integer timestamp (exact at any size), else a finite float."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{where}: the timestamp {text!r} is not a number.") from None
    if not np.isfinite(value):
        raise ValueError(f"{where}: the timestamp {text!r} is not a finite number.")
    return value


def _timestamp_array(timestamps):
    """int64 where every timestamp is an integer, float64 where that is exact, else Python numbers.

    Python compares an int with a float exactly, so an object array keeps
    the order of epoch nanoseconds beside one fractional timestamp, which
    float64 would round into ties.

    Example:
    >>> _timestamp_array([3, 1]).dtype, _timestamp_array([3, 1.5]).dtype
    (dtype('int64'), dtype('float64'))
    >>> _timestamp_array([1700000000000000001, 1700000000000000000, 0.5]).dtype
    dtype('O')
    """
    if all(isinstance(value, int) for value in timestamps):
        try:
            return np.asarray(timestamps, dtype="int64")
        except OverflowError:
            pass
    if all(float(value) == value for value in timestamps):
        return np.asarray(timestamps, dtype="float64")
    return np.asarray(timestamps, dtype=object)


def _movielens_rows(file, path):
    for line_number, line in enumerate(file, start=1):
        if not line.strip():
            continue
        fields = line.rstrip("\r\n").split("::")
        if len(fields) != 4:
            raise ValueError(
                f"{path}:{line_number}: expected UserID::MovieID::Rating::Timestamp, "
                f"got {line.strip()!r}."
            )
        yield line_number, (fields[0], fields[1], fields[3])


def _recbole_rows(file, path):
    line = file.readline().rstrip("\r\n")
    header = line.split("\t")
    if len(header) == 1 and " " in line:
        raise ValueError(
            f"{path}:1: the header {line!r} has no tabs; RecBole's .inter files are tab-separated."
        )
    names = [field.split(":")[0] for field in header]
    columns = _column_indexes(names, path, {"user": ["user_id"], "item": ["item_id"]})
    yield from _delimited_rows(csv.reader(file, delimiter="\t"), columns, path, header_lines=1)


def _csv_rows(file, path):
    reader = csv.reader(file)
    names = [name.strip() for name in next(reader, [])]
    # userId and movieId: MovieLens' own CSV files (ML-20M, ML-25M, ml-latest).
    aliases = {"user": ["user", "user_id", "userId"], "item": ["item", "item_id", "movieId"]}
    yield from _delimited_rows(reader, _column_indexes(names, path, aliases), path, header_lines=0)


def _column_indexes(names, path, aliases):
    aliases = dict(aliases, timestamp=["timestamp"])
    columns = []
    for column, accepted in aliases.items():
        found = [index for index, name in enumerate(names) if name in accepted]
        if not found:
            raise ValueError(
                f"{path}:1: the header {names} names no {column} column (one of {accepted})."
            )
        columns.append(found[0])
    return columns


def _delimited_rows(reader, columns, path, header_lines):
    """`header_lines`: lines read before `reader` started counting."""
    for first_line, row in numbered_records(reader):
        line_number = first_line + header_lines
        if not any(field.strip() for field in row):
            continue
        if len(row) <= max(columns):
            raise ValueError(
                f"{path}:{line_number}: expected at least {max(columns) + 1} fields, "
                f"got {len(row)}: {row}."
            )
        yield line_number, tuple(row[index].strip() for index in columns)


@dataclasses.dataclass(frozen=True)
class UserSequences:
    """Each user's items in time order, as ids numbered by frequency.

    Attributes:
        sequences: one int32 array per user, ids in 1..`num_items`.
        user_ids: the raw user id of each sequence.
        item_ids: the raw item id of each id: `item_ids[i - 1]` is item `i`.
        dropped_users: users left out for having too few interactions.

    Example:
    >>> log = Interactions(["u", "u", "v", "v", "v"], ["a", "b", "b", "c", "a"],
    ...                    np.array([2.0, 1.0, 5.0, 6.0, 7.0]))
    >>> sequences = UserSequences.from_interactions(log, min_interactions=2)
    >>> sequences.item_ids, [s.tolist() for s in sequences.sequences]
    (['b', 'a', 'c'], [[1, 2], [1, 3, 2]])
    """

    sequences: list
    user_ids: list
    item_ids: list
    dropped_users: int = 0

    @property
    def num_items(self):
        return len(self.item_ids)

    @classmethod
    def from_interactions(cls, interactions, min_interactions=5):
        """Groups by user in time order; drops short users; ids by frequency."""
        order = np.argsort(interactions.timestamps, kind="stable")
        by_user = {}
        for index in order:
            by_user.setdefault(interactions.users[index], []).append(interactions.items[index])
        kept = {user: items for user, items in by_user.items() if len(items) >= min_interactions}
        counts = {}
        for items in kept.values():
            for item in items:
                counts[item] = counts.get(item, 0) + 1
        # Most frequent first; ties in the order the grouped sequences first name them.
        item_ids = sorted(counts, key=lambda item: -counts[item])
        item_index = {item: index + 1 for index, item in enumerate(item_ids)}
        sequences = [
            np.array([item_index[item] for item in items], dtype="int32") for items in kept.values()
        ]
        return cls(sequences, list(kept), item_ids, len(by_user) - len(kept))

    def renumbered(self, item_ids, source="the given item ids"):
        """These sequences with the ids of `item_ids` (a trained model's) instead.

        Args:
            item_ids: raw item ids; `item_ids[i - 1]` becomes item `i`.
            source: what `item_ids` came from, for the error message.

        Raises:
            ValueError: an item of the sequences is not in `item_ids` (the
                model cannot score it); the message counts and names some.

        Example:
        >>> sequences = UserSequences([np.array([1, 2])], ["u"], ["a", "b"])
        >>> sequences.renumbered(["b", "a", "c"]).sequences[0].tolist()
        [2, 1]
        """
        index = {item: position + 1 for position, item in enumerate(item_ids)}
        unknown = [item for item in self.item_ids if item not in index]
        if unknown:
            raise ValueError(
                f"The log holds {len(unknown)} items that {source} lacks ({unknown[:5]}): the "
                "model was trained without them and cannot rank them. Train again on this log."
            )
        new_ids = np.array([0] + [index[item] for item in self.item_ids], dtype="int32")
        return dataclasses.replace(
            self,
            sequences=[new_ids[sequence] for sequence in self.sequences],
            item_ids=list(item_ids),
        )

    def save_item_ids(self, path, model_file=None):
        """Writes the id → raw item id mapping as JSON (atomically).

        With `model_file`, the file records that model's SHA-256 too, so
        that `load_item_ids` can tell whether a model file is the one whose
        ids these are.
        """
        saved = {"item_ids": self.item_ids}
        if model_file is not None:
            saved["model_sha256"] = _sha256(model_file)
        write_text(path, json.dumps(saved, ensure_ascii=False) + "\n")


def load_item_ids(path, model_file=None):
    """The raw item ids saved by `UserSequences.save_item_ids`.

    Args:
        path: the item ids' JSON file.
        model_file: the model file they are read for; checked against the
            SHA-256 recorded with them, when there is one.

    Raises:
        ValueError: `model_file` is not the model the ids were saved with.

    Example:
    >>> import tempfile
    >>> path = tempfile.mkdtemp() + "/items.json"
    >>> UserSequences([], [], ["a", "b"]).save_item_ids(path)
    >>> load_item_ids(path)
    ['a', 'b']
    """
    with open(path, encoding="utf-8") as file:
        saved = json.load(file)
    recorded = saved.get("model_sha256")
    if model_file is not None and recorded is not None and recorded != _sha256(model_file):
        raise ValueError(
            f"{path} holds the item ids of another model than {model_file} (a run was "
            "interrupted while saving them): train again."
        )
    return saved["item_ids"]


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclasses.dataclass(frozen=True)
class LeaveOneOutSplit:
    """Leave-one-out: the last item of each user is the test target, the one
    before it the validation target; training sees neither.

    Attributes:
        train: per user, the items before the validation target.
        validation_histories / validation_targets: the training items, then
            the item to predict after them.
        test_histories / test_targets: every item but the last, then the last.

    Example:
    >>> split = LeaveOneOutSplit.from_sequences([np.array([4, 5, 6, 7])])
    >>> split.train[0].tolist(), split.validation_targets.tolist(), split.test_targets.tolist()
    ([4, 5], [6], [7])
    >>> split.test_histories[0].tolist()
    [4, 5, 6]
    """

    train: list
    validation_histories: list
    validation_targets: np.ndarray
    test_histories: list
    test_targets: np.ndarray

    @classmethod
    def from_sequences(cls, sequences):
        """Splits sequences of at least 3 items each."""
        short = [index for index, sequence in enumerate(sequences) if len(sequence) < 3]
        if short:
            raise ValueError(
                f"Leave-one-out needs at least 3 items per user; {len(short)} sequences have "
                f"fewer (the first at index {short[0]}). Raise min_interactions."
            )
        train = [sequence[:-2] for sequence in sequences]
        return cls(
            train=train,
            validation_histories=train,
            validation_targets=np.array([s[-2] for s in sequences], dtype="int32"),
            test_histories=[sequence[:-1] for sequence in sequences],
            test_targets=np.array([s[-1] for s in sequences], dtype="int32"),
        )


def movielens_100k_path():
    """The MovieLens-100K log that RecBole's wheel ships, in RecBole's `.inter` format.

    943 users, 1,682 items, 100,000 ratings with timestamps; read as a file
    (`read_interactions(path, "recbole")`), RecBole is not imported. The
    project installs `recbole==1.2.1` without its dependencies for this file.

    Raises:
        FileNotFoundError: RecBole's wheel is not installed.

    Example:
    >>> os.path.basename(movielens_100k_path())
    'ml-100k.inter'
    """
    spec = importlib.util.find_spec("recbole")
    path = None
    if spec is not None:
        directory = spec.submodule_search_locations[0]
        path = os.path.join(directory, "dataset_example", "ml-100k", "ml-100k.inter")
    if path is None or not os.path.isfile(path):
        raise FileNotFoundError(
            "MovieLens-100K comes with RecBole's wheel: pip install --no-deps recbole==1.2.1 "
            "(make venv does)."
        )
    return path
