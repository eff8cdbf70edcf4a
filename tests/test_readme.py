"""The README's Python examples run as written."""

import contextlib
import io
import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"


def _python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_readme_starts_with_the_two_commands():
    first_block = re.search(r"```sh\n(.*?)```", README.read_text(), flags=re.DOTALL).group(1)
    commands = [line.split("#")[0].strip() for line in first_block.splitlines()]
    assert commands[:2] == ["make demo", "make test"]


@pytest.mark.large
def test_readme_python_examples_run():
    blocks = _python_blocks()
    assert blocks
    for block in blocks:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(block, str(README), "exec"), {})
        shown = re.findall(r"print\(.*\)\s*# (.*)", block)
        actual = [_as_tuple(line) for line in printed.getvalue().splitlines()]
        assert actual == shown


def _as_tuple(printed_shape):
    """'torch.Size([1, 5])' and 'TensorShape([1, 5])' print as '(1, 5)'."""
    return re.sub(r"^(?:torch\.Size|TensorShape)\(\[(.*)\]\)$", r"(\1)", printed_shape)
