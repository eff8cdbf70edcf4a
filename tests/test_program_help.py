"""Programs' --help shows their docstring's example commands as written, line breaks included."""

import ast
import glob
import os

import pytest

from tests.programs import REPOSITORY

PROGRAMS = sorted(
    path
    for folder in ("tasks", "tools", "benchmarks")
    for path in glob.glob(os.path.join(REPOSITORY, folder, "*.py"))
    if not path.endswith("__init__.py")
)


@pytest.mark.one_backend
@pytest.mark.parametrize("path", PROGRAMS, ids=lambda path: os.path.relpath(path, REPOSITORY))
def test_continued_command_lines_keep_their_backslashes(path):
    with open(path, encoding="utf-8") as file:
        text = file.read()
    tree = ast.parse(text)
    docstring = ast.get_docstring(tree, clean=False) or ""
    source = ast.get_source_segment(text, tree.body[0]) or ""
    continued = sum(line.endswith("\\") for line in source.splitlines()) if docstring else 0
    # In a plain string a lone "\" joins its line to the next, so --help shows one long line.
    assert sum(line.endswith("\\") for line in docstring.splitlines()) == continued
