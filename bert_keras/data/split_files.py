"""A data set's train/dev/test file, among the names it goes by."""

import os

from absl import logging

_WARNED = set()  # the files of a split found twice, warned of once


def split_path(data_dir, split, split_files):
    """The first of `split_files[split]` that is a file in `data_dir`; a warning names any other.

    Raises:
        FileNotFoundError: naming the directory and the names looked for.

    Example:
    >>> import os, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> _ = open(os.path.join(directory, "dev.txt"), "w").write("x\\n")
    >>> os.path.basename(split_path(directory, "dev", {"dev": ("valid.txt", "dev.txt")}))
    'dev.txt'
    """
    paths = [os.path.join(data_dir, name) for name in split_files[split]]
    found = [path for path in paths if os.path.isfile(path)]
    if len(found) > 1 and tuple(found) not in _WARNED:
        _WARNED.add(tuple(found))
        logging.warning(
            "%s holds %s: the %s split reads the first, %s.",
            data_dir,
            " and ".join(os.path.basename(path) for path in found),
            split,
            os.path.basename(found[0]),
        )
    if found:
        return found[0]
    raise FileNotFoundError(
        f"No {split} file in {data_dir}: looked for {list(split_files[split])}."
    )
