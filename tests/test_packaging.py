"""`pip install .` gives a package with every module of the tree, importable outside the tree."""

import os
import subprocess
import sys

import pytest

REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _modules(root):
    """The package's modules, as paths relative to `root`."""
    return sorted(
        os.path.relpath(os.path.join(directory, name), root)
        for directory, _, names in os.walk(os.path.join(root, "bert_keras"))
        for name in names
        if name.endswith(".py")
    )


@pytest.mark.one_backend
def test_pip_install_gives_every_module_and_they_import_outside_the_tree(tmp_path):
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
        + ["--target", str(site), REPOSITORY],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    assert _modules(site) == _modules(REPOSITORY)
    program = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "import bert_keras\n"
        "from bert_keras import BertBackbone\n"
        "from bert_keras.finetuning.classification import ClassificationRun\n"
        "print(bert_keras.__file__)\n"
        "print(BertBackbone.from_preset('bert_tiny').count_params())\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", program, str(site)],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # not the repository, whose bert_keras/ would shadow the installed one
        env={key: value for key, value in os.environ.items() if key != "PYTHONPATH"},
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    installed, parameters = completed.stdout.split()
    assert installed == str(site / "bert_keras" / "__init__.py")
    assert int(parameters) > 4_000_000
