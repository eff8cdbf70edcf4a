"""A data set's train/dev/test file, among the names it goes by."""

import os


def split_path(data_dir, split, split_files):
    """The first of `split_files[split]` that is a file in `data_dir`.

    Raises:
        FileNotFoundError: naming the directory and the names looked for.

    Example:
    >>> import os, tempfile
    >>> directory = tempfile.mkdtemp()
    >>> _ = open(os.path.join(directory, "dev.txt"), "w").write("x\\n")
    >>> os.path.basename(split_path(directory, "dev", {"dev": ("valid.txt", "dev.txt")}))
    'dev.txt'
    """
    for name in split_files[split]:
        path = os.path.join(data_dir, name)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(
        f"No {split} file in {data_dir}: looked for {list(split_files[split])}."
    )
