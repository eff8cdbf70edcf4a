"""One run per output directory: a lock held for the run's lifetime.

A program takes `output_lock(OUTPUT_DIR)` before it writes anything there. A
second run started on the same directory meanwhile is refused with an error
naming the running one (its process, host, start time and command line). The
lock is an advisory `flock` on OUTPUT_DIR/.bert_keras.lock, which the
operating system releases when its holder exits in any way, so a run killed
with SIGKILL leaves nothing that blocks its resume. A run that ends having
written nothing (refused by a check of its flags or data, say) removes the
lock file, and OUTPUT_DIR if it made it. The processes of one
distributed run share the lock: only process 0 (rank 0 under torchrun,
`KERAS_DISTRIBUTION_PROCESS_ID` 0 under JAX) takes it, and only it writes.

Example:
>>> import tempfile
>>> directory = tempfile.mkdtemp()
>>> with output_lock(directory):
...     with output_lock(directory):
...         pass
Traceback (most recent call last):
...
bert_keras.training.output_lock.OutputLockedError: ...
"""

import contextlib
import fcntl
import json
import os
import socket
import sys
import time

from bert_keras.atomic_files import file_in_the_way

LOCK_FILE = ".bert_keras.lock"
PROCESS_INDEX_VARIABLES = ("RANK", "KERAS_DISTRIBUTION_PROCESS_ID")


class OutputLockedError(RuntimeError):
    """Another run holds the output directory's lock."""


class OutputDirectoryError(ValueError):
    """The output directory cannot be made or written in; the message says why."""


def is_process_zero():
    """Whether this process is the first (or only) one of its run.

    Example:
    >>> import os
    >>> is_process_zero() == all(os.environ.get(v, "0") == "0" for v in PROCESS_INDEX_VARIABLES)
    True
    """
    return all(int(os.environ.get(name, "0")) == 0 for name in PROCESS_INDEX_VARIABLES)


@contextlib.contextmanager
def output_lock(directory):
    """Holds `directory`'s run lock (creating the directory) while the block runs.

    If the block leaves nothing in `directory` but the lock file, the lock
    file goes, and `directory` too if this call made it.

    Processes other than process 0 of a distributed run take no lock.

    Args:
        directory: the run's output directory.

    Raises:
        OutputLockedError: another live process holds the lock; the message
            names it.
        OutputDirectoryError: a file stands where the directory goes, or the
            directory cannot be made or written in.

    Example:
    >>> import os, tempfile
    >>> directory = os.path.join(tempfile.mkdtemp(), "run")
    >>> with output_lock(directory):
    ...     holder = json.load(open(os.path.join(directory, LOCK_FILE)))
    >>> holder["pid"] == os.getpid()
    True
    """
    if not is_process_zero():
        yield
        return
    made_directory = _made_directory(directory)
    path = os.path.join(directory, LOCK_FILE)
    with _locked_file(path, directory) as file:
        try:
            file.truncate(0)
            json.dump(_this_process(), file)
            file.flush()
            yield
        finally:
            file.truncate(0)
            if os.listdir(directory) == [LOCK_FILE]:
                # Unlinked while still locked: a run that opened it meanwhile is refused.
                os.remove(path)
                if made_directory:
                    os.rmdir(directory)


@contextlib.contextmanager
def output_file_lock(output_file):
    """Holds the run lock of `output_file` (`.NAME.lock` beside it) while the block runs.

    For outputs that share a directory with others (the pretraining-data
    tool's records, one name per corpus part), where `output_lock` would
    refuse a run writing another name there. The lock file goes when the
    block ends; the directory is made if missing, and goes again if the
    block left it empty.

    Raises:
        OutputLockedError: another live process writes `output_file`; the
            message names it.
        OutputDirectoryError: the directory cannot be made or written in.

    Example:
    >>> import os, tempfile
    >>> output = os.path.join(tempfile.mkdtemp(), "records.tfrecord")
    >>> with output_file_lock(output):
    ...     print(os.listdir(os.path.dirname(output)))
    ['.records.tfrecord.lock']
    >>> os.listdir(os.path.dirname(output))
    []
    """
    if not is_process_zero():
        yield
        return
    path = file_lock_path(output_file)
    directory = os.path.dirname(path)
    made_directory = _made_directory(directory)
    with _locked_file(path, directory) as file:
        try:
            json.dump(_this_process(), file)
            file.flush()
            yield
        finally:
            # Unlinked while still locked: a run that opened it meanwhile is refused.
            os.remove(path)
            if made_directory and not os.listdir(directory):
                os.rmdir(directory)


def file_lock_path(output_file):
    """Where `output_file_lock` puts the lock of `output_file`: a hidden file beside it.

    Example:
    >>> file_lock_path("/data/records.tfrecord")
    '/data/.records.tfrecord.lock'
    """
    directory, name = os.path.split(os.path.abspath(output_file))
    return os.path.join(directory, f".{name}.lock")


@contextlib.contextmanager
def _locked_file(path, directory):
    """Yields `path` open and `flock`ed, the file that the path names once it is locked."""
    while True:
        # "a+" keeps the holder's description readable while the lock is tried.
        with _opened(path, directory) as file:
            try:
                fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                file.seek(0)
                raise OutputLockedError(
                    f"{directory} is in use by another run ({_described(file.read())}); wait "
                    "for it to finish or stop it, or give this run another output directory."
                ) from None
            if _names_file(path, file):
                try:
                    yield file
                finally:
                    fcntl.flock(file, fcntl.LOCK_UN)
                return
        # The run that held it removed it between our open and our lock: take the new one.


def _made_directory(directory):
    """Makes `directory` unless it exists; whether it did."""
    blocking = file_in_the_way(directory)
    if blocking is not None:
        raise OutputDirectoryError(
            f"The output directory {directory} cannot be made: {blocking} is a file."
        )
    made = not os.path.isdir(directory)
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as error:
        raise OutputDirectoryError(
            f"The output directory {directory} cannot be made: {error.strerror}."
        ) from None
    return made


def _opened(path, directory):
    try:
        return open(path, "a+", encoding="utf-8")
    except OSError as error:
        raise OutputDirectoryError(
            f"The output directory {directory} cannot be written in: {error.strerror}."
        ) from None


def _names_file(path, file):
    try:
        return os.stat(path).st_ino == os.fstat(file.fileno()).st_ino
    except FileNotFoundError:
        return False


def _this_process():
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "command": " ".join(sys.argv),
    }


def _described(text):
    try:
        holder = json.loads(text)
    except ValueError:
        return "a process that has not written its name yet"
    return (
        f"process {holder['pid']} on {holder['host']}, started {holder['started']}: "
        f"{holder['command']}"
    )
