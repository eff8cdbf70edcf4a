"""The project's command-line programs run as users run them: `python -m MODULE` in a child process.

A child process keeps each program's absl flags out of the test process,
where programs share flag names but not defaults.
"""

import functools
import json
import os
import subprocess
import sys

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_module(module, *arguments):
    """`python -m module *arguments` from the repository root, TensorFlow's C++ log quiet.

    Returns the `subprocess.CompletedProcess`, its stdout and stderr as text.

    Example:
    >>> completed = run_module("tools.export_saved_model")
    >>> completed.returncode, "Flag --model must have a value" in completed.stderr
    (1, True)
    """
    return subprocess.run(
        [sys.executable, "-m", module, *arguments],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )


def program(module):
    """`run_module` bound to one module: `program("tasks.squad")("--flag=value")`."""
    return functools.partial(run_module, module)


def json_printed_by(arguments, timeout=600):
    """The last line `python *arguments` prints, read as JSON; the child runs on this process's backend.

    The test fails, with the child's stderr, if the child does.

    Example:
    >>> json_printed_by(["-c", "print('[1, 2]')"])
    [1, 2]
    """
    import keras

    completed = subprocess.run(
        [sys.executable, *arguments],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "KERAS_BACKEND": keras.backend.backend()},
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])
