"""Checks that the Bazel BUILD file lists every Python file of the project, and that Bazel builds it.

BUILD is Starlark, and the subset it uses is valid Python, so the tests run it with stand-ins for the
Bazel rules that record each target instead of parsing it with patterns. Nothing here depends on the
Keras backend; only the last test needs `bazel` (Debian's bazel-bootstrap, `make bazel-install`).
"""

import collections
import pathlib
import shutil
import subprocess

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILD_PATH = REPO_ROOT / "BUILD"
# Folders whose Python files must all belong to a target.
SOURCE_FOLDERS = ("bert_keras", "tasks", "tools", "tests", "benchmarks")

Target = collections.namedtuple("Target", ["kind", "name", "srcs", "main", "deps", "data"])


def _glob(*args, **kwargs):
    raise ValueError(
        "BUILD calls glob(); list srcs file by file so that tests/test_build_file.py sees "
        "files that are added or removed"
    )


def read_build_targets(path=BUILD_PATH):
    """Runs a BUILD file with recording stand-ins for the rules it calls.

    Args:
        path: the BUILD file.

    Returns:
        The targets, in the order BUILD declares them, as `Target` tuples.
    """
    targets = []

    def recorder(kind):
        def rule(name, srcs=(), main=None, deps=(), data=(), **unused_attrs):
            targets.append(Target(kind, name, list(srcs), main, list(deps), list(data)))

        return rule

    def ignored(*args, **kwargs):
        return None

    namespace = {
        "__builtins__": {"len": len, "sorted": sorted, "list": list, "dict": dict},
        "load": ignored,
        "package": ignored,
        "exports_files": ignored,
        "glob": _glob,
    }
    for kind in ("py_library", "py_binary", "py_test", "filegroup", "sh_binary", "sh_test"):
        namespace[kind] = recorder(kind)
    source = path.read_text(encoding="utf-8")
    exec(compile(source, str(path), "exec"), namespace)  # noqa: S102 (our own BUILD file)
    return targets


def project_python_files():
    """Returns the repository-relative paths of the Python files that BUILD must list."""
    paths = set()
    for folder in SOURCE_FOLDERS:
        for path in (REPO_ROOT / folder).rglob("*.py"):
            relative = path.relative_to(REPO_ROOT)
            if not any(part.startswith(".") or part == "__pycache__" for part in relative.parts):
                paths.add(relative.as_posix())
    return paths


def _listed_sources(targets):
    return [src for target in targets for src in target.srcs]


@pytest.fixture(scope="module")
def targets():
    return read_build_targets()


def test_build_lists_every_python_file(targets):
    missing = sorted(project_python_files() - set(_listed_sources(targets)))
    if missing:
        pytest.fail(
            "BUILD lists no target for these Python files; add each to the srcs of the target of "
            "its folder (a py_binary for a program, a py_test for a test file):\n  "
            + "\n  ".join(missing)
        )


def test_build_lists_only_existing_files(targets):
    listed = _listed_sources(targets) + [target.main for target in targets if target.main]
    listed += [
        item for target in targets for item in target.data if not item.startswith(("@", ":", "//"))
    ]
    absent = sorted({path for path in listed if not (REPO_ROOT / path).is_file()})
    if absent:
        pytest.fail("BUILD lists files that do not exist:\n  " + "\n  ".join(absent))


def test_build_lists_each_file_once(targets):
    owners = collections.defaultdict(list)
    for target in targets:
        for src in target.srcs:
            owners[src].append(target.name)
    repeated = {src: names for src, names in owners.items() if len(names) > 1}
    assert not repeated, f"files listed in more than one target (src: targets): {repeated}"


def test_build_dependencies_name_declared_targets(targets):
    names = collections.Counter(target.name for target in targets)
    duplicated = sorted(name for name, count in names.items() if count > 1)
    assert not duplicated, f"target names declared more than once: {duplicated}"
    unknown = sorted(
        f"{target.name} -> {dep}"
        for target in targets
        for dep in target.deps
        if dep.startswith(":") and dep[1:] not in names
    )
    if unknown:
        pytest.fail("deps naming no target in BUILD:\n  " + "\n  ".join(unknown))


def test_build_file_check_names_a_missing_file(tmp_path):
    build_path = tmp_path / "BUILD"
    build_path.write_text(
        'py_library(name = "lib", srcs = ["bert_keras/__init__.py"])\n', encoding="utf-8"
    )
    listed = set(_listed_sources(read_build_targets(build_path)))
    assert "bert_keras/models/bert_backbone.py" in project_python_files() - listed


def test_build_file_check_refuses_glob(tmp_path):
    build_path = tmp_path / "BUILD"
    build_path.write_text('py_library(name = "lib", srcs = glob(["**/*.py"]))\n', encoding="utf-8")
    with pytest.raises(ValueError, match="glob"):
        read_build_targets(build_path)


@pytest.mark.large
@pytest.mark.skipif(
    shutil.which("bazel") is None,
    reason="bazel is not installed; `make bazel-install` installs Debian's bazel-bootstrap",
)
def test_bazel_builds_every_target():
    # --batch leaves no Bazel server running; --symlink_prefix=/ leaves no bazel-* links in the tree.
    command = ["bazel", "--batch", "build", "--symlink_prefix=/", "//..."]
    result = subprocess.run(
        command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    if result.returncode != 0:
        pytest.fail(f"{' '.join(command)} failed:\n{result.stderr[-4000:]}")
