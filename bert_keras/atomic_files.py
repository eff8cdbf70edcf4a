"""Files and directories written whole or not at all.

Every writer of the project's outputs (checkpoint directories, training
checkpoints, results, vocabularies, exports) writes under a temporary name
beside the destination and renames it into place once it is complete, so an
interrupted run leaves either the old output or the new one, never half of
one. Temporary names carry `PARTIAL_MARKER`, so a later run can find and
remove what a killed one left behind. Missing parent directories are created.

Example:
>>> import os, tempfile
>>> directory = os.path.join(tempfile.mkdtemp(), "new", "model")
>>> with atomic_directory(directory) as staging:
...     write_text(os.path.join(staging, "config.json"), "{}\\n")
>>> os.listdir(directory)
['config.json']
"""

import contextlib
import errno
import glob
import os
import re
import shutil
import tempfile

PARTIAL_MARKER = ".partial"
_OLD_SUFFIX = "-old"  # the destination replaced, until its replacement is in place


def partial_path(path):
    """The temporary name of `path` while it is being written.

    The marker goes before the first dot of the file name, so endings that
    readers insist on (Keras' `.weights.h5`) are kept.

    Example:
    >>> partial_path("/runs/ckpt-00000100.weights.h5")
    '/runs/ckpt-00000100.partial.weights.h5'
    >>> partial_path("/data/vocab")
    '/data/vocab.partial'
    """
    directory, name = os.path.split(os.fspath(path))
    stem, dot, ending = name.partition(".")
    return os.path.join(directory, stem + PARTIAL_MARKER + dot + ending)


@contextlib.contextmanager
def atomic_file(path):
    """Yields a temporary path to write; it replaces `path` only when the block succeeds.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "out", "results.json")
    >>> with atomic_file(path) as temporary:
    ...     _ = open(temporary, "w").write("{}")
    >>> open(path).read()
    '{}'
    """
    path = _named_destination(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path} is a directory; expected the path of a file to write.")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    temporary = partial_path(path)
    try:
        yield temporary
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def write_text(path, text):
    """Writes `text` (UTF-8) to `path` through `atomic_file`.

    Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "results.json")
    >>> write_text(path, "{}\\n")
    >>> open(path).read(), os.listdir(os.path.dirname(path))
    ('{}\\n', ['results.json'])
    """
    with atomic_file(path) as temporary:
        with open(temporary, "w", encoding="utf-8") as file:
            file.write(text)


def check_output_directory(directory, overwrite=False):
    """Refuses an output path that is a file, or a non-empty directory unless `overwrite`.

    Raises:
        FileExistsError: naming `directory`.
        ValueError: `directory` is "" (an unset flag, say), or `overwrite`
            would replace the working directory or one that holds it.

    Example:
    >>> import tempfile
    >>> check_output_directory(tempfile.mkdtemp())  # empty: fine
    >>> check_output_directory(".", overwrite=True)
    Traceback (most recent call last):
    ...
    ValueError: Output directory ... holds the working directory; it cannot be replaced.
    """
    directory = os.path.abspath(_named_destination(directory))
    if overwrite and os.path.commonpath([directory, os.getcwd()]) == directory:
        raise ValueError(
            f"Output directory {directory} holds the working directory; it cannot be replaced."
        )
    if os.path.isfile(directory):
        raise FileExistsError(f"Output path {directory} is a file; expected a directory.")
    if os.path.isdir(directory) and os.listdir(directory) and not overwrite:
        raise FileExistsError(
            f"Output directory {directory} exists and is not empty; choose another or overwrite it."
        )


@contextlib.contextmanager
def atomic_directory(directory, overwrite=False):
    """Yields an empty staging directory that replaces `directory` when the block succeeds.

    The staging directory is a hidden sibling of `directory`, named with the
    writer's process id; on failure it is removed and `directory` is left as
    it was. Staging directories of `directory` that a killed process left (it
    could not remove them) are removed first, and a previous output it had
    moved aside is put back where `directory` is missing; those of a process
    still running (another writer of the same destination) are left to it.
    A symbolic link's target is replaced.

    Args:
        directory: the destination.
        overwrite: replace a non-empty `directory`; otherwise it is refused
            before anything is written, and again when the new directory
            would take its place (another writer may have finished first).

    Raises:
        FileExistsError: see `check_output_directory`.

    Example:
    >>> import os, tempfile
    >>> directory = os.path.join(tempfile.mkdtemp(), "export")
    >>> with atomic_directory(directory) as staging:
    ...     os.path.basename(staging).startswith(".export.partial-")
    True
    >>> os.path.isdir(directory)
    True
    """
    # A link's target is replaced, and the link kept.
    directory = os.path.realpath(_named_destination(directory))
    parent = os.path.dirname(directory)
    prefix = _staging_prefix(os.path.basename(directory))
    if os.path.isdir(parent):
        _remove_interrupted_stagings(parent, prefix, directory)
    check_output_directory(directory, overwrite)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent)
    try:
        yield staging
        os.chmod(staging, 0o755)
        _replace_directory(staging, directory, overwrite)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def file_in_the_way(directory):
    """The file that stands at `directory` or at one of its parents, so it cannot be made; or None.

    Example:
    >>> import os, tempfile
    >>> a_file = os.path.join(tempfile.mkdtemp(), "notes.txt")
    >>> _ = open(a_file, "w").write("")
    >>> file_in_the_way(os.path.join(a_file, "run", "out")) == a_file
    True
    >>> file_in_the_way(os.path.join(os.path.dirname(a_file), "new", "run")) is None
    True
    """
    existing = os.path.abspath(directory)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    return None if os.path.isdir(existing) else existing


def _named_destination(path):
    """`path` as a string; "" (an unset flag, say) would mean the working directory."""
    path = os.fspath(path)
    if not path:
        raise ValueError("The output path is empty; name the file or directory to write.")
    return path


def recover_interrupted_writes(parent):
    """Clears what killed `atomic_directory` writes left in `parent`, for every destination in it.

    A previous output moved aside goes back in place, as the next write of
    its destination would put it; staging directories of live writers are
    left to them. Where the destinations' names are chosen by what `parent`
    holds (the next export version, say), this comes first.

    Example:
    >>> import os, tempfile
    >>> parent = tempfile.mkdtemp()
    >>> os.makedirs(os.path.join(parent, ".1.partial-k2x9-old"))  # killed between renames
    >>> os.makedirs(os.path.join(parent, ".2.partial-m3y8"))  # killed while writing
    >>> recover_interrupted_writes(parent)
    >>> os.listdir(parent)
    ['1']
    """
    parent = os.fspath(parent)
    if not os.path.isdir(parent):
        return
    staged = (re.fullmatch(rf"\.(.+){re.escape(PARTIAL_MARKER)}-.*", n) for n in os.listdir(parent))
    for name in sorted({match.group(1) for match in staged if match}):
        _remove_interrupted_stagings(parent, _staging_prefix(name), os.path.join(parent, name))


def moved_aside_copy(directory):
    """Where `directory`'s previous contents lie when a replacement stopped between its renames, or None.

    They go back in place at the next write of `directory` (or of any
    destination beside it, with `recover_interrupted_writes`).

    Example:
    >>> import os, tempfile
    >>> parent = tempfile.mkdtemp()
    >>> os.makedirs(os.path.join(parent, ".export.partial-k2x9-old"))
    >>> os.path.basename(moved_aside_copy(os.path.join(parent, "export")))
    '.export.partial-k2x9-old'
    """
    directory = os.path.abspath(_named_destination(directory))
    parent, name = os.path.split(directory)
    pattern = glob.escape(os.path.join(parent, _staging_prefix(name))) + "*" + _OLD_SUFFIX
    return next(iter(sorted(glob.glob(pattern))), None)


def _staging_prefix(name):
    """How the staging directories of the destination `name` begin (a writer's id follows)."""
    return f".{name}{PARTIAL_MARKER}-"


def _remove_interrupted_stagings(parent, prefix, directory):
    """Clears what a killed write of `directory` left in `parent`: its staging directories.

    An "-old" one is the previous output that `_replace_directory` moved
    aside: with `directory` missing (the kill came between its two renames)
    it is the only copy, and goes back in place; beside `directory` it is
    the leftover of a replacement that was not finished removing it.
    """
    for path in glob.glob(os.path.join(glob.escape(parent), glob.escape(prefix) + "*")):
        if _writer_is_running(os.path.basename(path)[len(prefix) :]):
            continue
        if path.endswith(_OLD_SUFFIX) and not os.path.exists(directory):
            os.rename(path, directory)
        else:
            shutil.rmtree(path, ignore_errors=True)


def _writer_is_running(staging_suffix):
    """Whether the process named by a staging directory's "PID-random" suffix is alive.

    Example:
    >>> _writer_is_running(f"{os.getpid()}-k2x9"), _writer_is_running("k2x9")
    (True, False)
    """
    pid, separator, _ = staging_suffix.partition("-")
    if not (separator and pid.isdigit()):
        return False  # named before writers' ids were
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def _replace_directory(staging, directory, overwrite):
    try:
        os.rename(staging, directory)  # in one step where `directory` is missing or empty
        return
    except OSError as error:
        if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
    check_output_directory(directory, overwrite)  # another writer finished first
    old = staging + _OLD_SUFFIX
    os.rename(directory, old)
    os.rename(staging, directory)
    shutil.rmtree(old)
