"""Checks of benchmark flags' values, made by absl as it parses them.

This module defines no flag, so every benchmark can use it, including those
that define flags of the same names as `benchmarks.common`'s.
"""

import os

from absl import flags

from bert_keras.atomic_files import file_in_the_way


def require_known_names(flag, known):
    """Makes absl refuse a list flag holding a name outside `known`, listing the known ones.

    Example:
    >>> flag_values = flags.FlagValues()
    >>> parts = flags.DEFINE_list("parts", [], "Parts to run.", flag_values=flag_values)
    >>> require_known_names(parts, ("squad", "sst2"))
    >>> try:
    ...     flag_values(["program", "--parts=squad,bogus"])
    ... except flags.IllegalFlagValueError as error:
    ...     print(error)
    flag --parts=['squad', 'bogus']: unknown bogus; known: squad, sst2
    """

    def check(names):
        unknown = [name for name in names if name not in known]
        if unknown:
            raise flags.ValidationError(f"unknown {', '.join(unknown)}; known: {', '.join(known)}")
        return True

    flags.register_validator(flag, check)


def require_positive(flag):
    """Makes absl refuse a float flag that is set but not above 0.

    Example:
    >>> flag_values = flags.FlagValues()
    >>> rate = flags.DEFINE_float("rate", None, "A rate.", flag_values=flag_values)
    >>> require_positive(rate)
    >>> try:
    ...     flag_values(["program", "--rate=0"])
    ... except flags.IllegalFlagValueError as error:
    ...     print(error)
    flag --rate=0.0: must be above 0
    """
    flags.register_validator(flag, lambda value: value is None or value > 0, "must be above 0")


def require_directory(flag):
    """Makes absl refuse a string flag that is set but names no directory.

    Example:
    >>> flag_values = flags.FlagValues()
    >>> checkpoint = flags.DEFINE_string("checkpoint", None, "A path.", flag_values=flag_values)
    >>> require_directory(checkpoint)
    >>> try:
    ...     flag_values(["program", "--checkpoint=/nonexistent"])
    ... except flags.IllegalFlagValueError as error:
    ...     print(error)
    flag --checkpoint=/nonexistent: no such directory
    """
    flags.register_validator(
        flag, lambda path: path is None or os.path.isdir(path), "no such directory"
    )


def require_some(flag):
    """Makes absl refuse a list flag set to no names.

    Example:
    >>> flag_values = flags.FlagValues()
    >>> sizes = flags.DEFINE_list("sizes", ["tiny"], "Sizes.", flag_values=flag_values)
    >>> require_some(sizes)
    >>> try:
    ...     flag_values(["program", "--sizes="])
    ... except flags.IllegalFlagValueError as error:
    ...     print(error)
    flag --sizes=[]: names nothing to measure
    """
    flags.register_validator(flag, bool, "names nothing to measure")


def require_writable_path(flag, directory=False):
    """Makes absl refuse an output path that a file stands in the way of, before anything runs.

    Args:
        flag: a string flag naming a file (or, with `directory`, a directory)
            that the program writes at its end.
        directory: whether the flag names a directory.

    Example:
    >>> import tempfile
    >>> a_file = tempfile.mkstemp()[1]
    >>> flag_values = flags.FlagValues()
    >>> output = flags.DEFINE_string("output", None, "A file.", flag_values=flag_values)
    >>> require_writable_path(output)
    >>> try:
    ...     flag_values(["program", f"--output={a_file}/rows.json"])
    ... except flags.IllegalFlagValueError as error:
    ...     print(str(error).endswith("is a file, so this cannot be written"))
    True
    """

    def check(path):
        if not path:
            return True
        if not directory and os.path.isdir(path):
            raise flags.ValidationError("is a directory; name a file")
        blocking = file_in_the_way(path if directory else os.path.dirname(os.path.abspath(path)))
        if blocking is not None:
            raise flags.ValidationError(f"{blocking} is a file, so this cannot be written")
        return True

    flags.register_validator(flag, check)
