"""The README's Python examples run as written."""

import contextlib
import io
import pathlib
import re
import subprocess
import sys

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def _python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_readme_starts_with_the_two_commands():
    first_block = re.search(r"```sh\n(.*?)```", README.read_text(), flags=re.DOTALL).group(1)
    commands = [line.split("#")[0].strip() for line in first_block.splitlines()]
    assert commands[:2] == ["make demo", "make test"]


@pytest.mark.large
@pytest.mark.one_backend("jax")  # evens out the suites' ends (tests/conftest.py)
def test_readme_python_examples_run():
    blocks = _python_blocks()
    assert blocks
    for block in blocks:
        shown = re.findall(r"print\(.*\)\s*# (.*)", block)
        actual = [_as_tuple(line) for line in _printed(block).splitlines()]
        assert actual == shown


def _printed(block):
    """What `block` prints: run here, or as a script of its own when it picks a Keras backend."""
    if 'os.environ["KERAS_BACKEND"]' in block:
        completed = subprocess.run(
            [sys.executable, "-c", block], cwd=README.parent, capture_output=True, text=True
        )
        assert completed.returncode == 0, completed.stderr[-3000:]
        return completed.stdout
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block, str(README), "exec"), {})
    return printed.getvalue()


def _as_tuple(printed_shape):
    """'torch.Size([1, 5])' and 'TensorShape([1, 5])' print as '(1, 5)'."""
    return re.sub(r"^(?:torch\.Size|TensorShape)\(\[(.*)\]\)$", r"(\1)", printed_shape)
