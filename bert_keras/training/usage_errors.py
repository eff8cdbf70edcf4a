"""How the project's absl programs tell a usage error: one line, as they tell every other error.

absl's `app.run` answers an `app.UsageError` by printing the program's
docstring and its flags' help, with the error last, below them.
"""

import os
import sys

from absl import app


def run_program(main, retired_flags=None):
    """`absl.app.run(main)`, where an `app.UsageError` from `main` ends the run in one line.

    The line is "PROGRAM: MESSAGE" on stderr and the exit status is the
    error's (1), as for the programs' other errors; `--helpshort` and
    `--help` still print the docstring and flags.

    Args:
        main: the program's `main(argv)`.
        retired_flags: {flag name: what replaces it}, for flags of the
            original programs that this one does not take: given one, the
            program ends at once naming the flag and its replacement, where
            absl would only call it unknown.

    Example:
    >>> import subprocess, sys
    >>> program = (
    ...     "from absl import app\\n"
    ...     "from bert_keras.training.usage_errors import run_program\\n"
    ...     "def main(argv):\\n"
    ...     "    raise app.UsageError('--steps must be positive, got 0.')\\n"
    ...     "run_program(main)\\n"
    ... )
    >>> completed = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    >>> completed.returncode, completed.stderr
    (1, '-c: --steps must be positive, got 0.\\n')
    """

    def main_with_one_line_usage_errors(argv):
        try:
            return main(argv)
        except app.UsageError as error:
            program = os.path.splitext(os.path.basename(sys.argv[0]))[0]
            print(f"{program}: {error}", file=sys.stderr)
            sys.exit(error.exitcode)

    app.run(main_with_one_line_usage_errors, flags_parser=_parser(retired_flags or {}))


def _parser(retired_flags):
    """absl's flag parser, which first ends the program on any of `retired_flags`."""

    def parse(argv):
        for argument in argv[1:]:
            if argument == "--":
                break
            name = argument.lstrip("-").split("=")[0]
            if name not in retired_flags:
                name = name.removeprefix("no")  # absl's --noFLAG of a boolean
            if argument.startswith("-") and name in retired_flags:
                program = os.path.splitext(os.path.basename(argv[0]))[0]
                sys.exit(
                    f"{program}: --{name} is a flag of the original program, not of this one: "
                    f"{retired_flags[name]}"
                )
        return app.parse_flags_with_usage(argv)

    return parse
