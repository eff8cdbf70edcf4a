"""Regenerates BUILD from the tree: `python3 .ci/build_file_body.py . > /tmp/body && cat .ci/build_file_header.txt /tmp/body > BUILD`."""

import ast
import pathlib
import sys

root = pathlib.Path(sys.argv[1])
LIB_ROOT = "bert_keras"


def py_files(folder):
    return sorted(p for p in (root / folder).rglob("*.py") if "__pycache__" not in p.parts)


def rel(p):
    return p.relative_to(root).as_posix()


lib_packages = sorted({rel(p.parent) for p in py_files(LIB_ROOT)})


def module_level_nodes(tree):
    """Nodes that run at import time: everything but function bodies."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                stack.append(child)


def imported_program_targets(paths):
    """Targets of project modules outside bert_keras/ imported at module level (e.g. tools.x)."""
    targets = set()
    for path in paths:
        for node in module_level_nodes(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [node.module + "." + a.name for a in node.names]
            for name in names:
                if name.split(".")[0] not in ("tasks", "tools", "benchmarks", "tests"):
                    continue
                file = root / (name.replace(".", "/") + ".py")
                if file.is_file() and file != path:
                    targets.add(file)
    return targets


def imported_lib_targets(paths):
    targets = set()
    for path in paths:
        tree = ast.parse(path.read_text())
        for node in module_level_nodes(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [node.module + "." + a.name for a in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] != LIB_ROOT:
                    continue
                # longest package prefix
                for n in range(len(parts), 0, -1):
                    cand = "/".join(parts[:n])
                    if cand in lib_packages:
                        targets.add(cand)
                        break
    return targets


out = []


def emit(kind, name, srcs, deps=(), extra=None):
    lines = [f"{kind}(", f'    name = "{name}",']
    if extra:
        lines += [f"    {k} = {v}," for k, v in extra]
    if len(srcs) == 1:
        lines.append(f'    srcs = ["{srcs[0]}"],')
    else:
        lines.append("    srcs = [")
        lines += [f'        "{s}",' for s in srcs]
        lines.append("    ],")
    if kind == "py_library" and not name.startswith(("tests", "tasks", "tools", "benchmarks")):
        lines.append('    imports = ["."],')
    deps = sorted(set(deps))
    if len(deps) == 1:
        lines.append(f'    deps = ["{deps[0]}"],')
    elif deps:
        lines.append("    deps = [")
        lines += [f'        "{d}",' for d in deps]
        lines.append("    ],")
    lines.append(")")
    out.append("\n".join(lines))


out.append("# Library " + "-" * 90)
for pkg in lib_packages:
    files = sorted(p for p in (root / pkg).glob("*.py"))
    deps = [":" + t for t in imported_lib_targets(files) if t != pkg and t != LIB_ROOT]
    if pkg == LIB_ROOT:
        deps = [":" + t for t in lib_packages if t != LIB_ROOT]
        out.append(
            "# The whole library. Subpackages do not depend on it (Bazel allows no cycles), and list only\n# what they import at module level: bert_keras/models imports bert_keras/checkpoints inside\n# functions, since checkpoints imports models. Code outside bert_keras/ depends on this target\n# beside the subpackages it imports."
        )
    emit("py_library", pkg, [rel(p) for p in files], deps)


def target_of_file(file):
    r = rel(file)
    if r.startswith("tests/"):
        if file.name.startswith("test_") and file.name != "test_case.py":
            return ":" + r[:-3]
        return ":tests"
    if file.name == "__init__.py":
        return ":" + r.split("/")[0]
    return ":" + r[:-3]


def consumer_deps(paths):
    t = imported_lib_targets(paths)
    deps = [":" + x for x in t] + ([":" + LIB_ROOT] if t else [])
    deps += [target_of_file(f) for f in imported_program_targets(paths)]
    return deps


for folder, kind in (("tasks", "py_binary"), ("tools", "py_binary"), ("benchmarks", "py_binary")):
    files = py_files(folder)
    if not files:
        continue
    out.append(f"# {folder}/ " + "-" * 90)
    helpers = [p for p in files if p.name == "__init__.py"]
    programs = [p for p in files if p.name != "__init__.py"]
    if helpers:
        emit("py_library", folder, [rel(p) for p in helpers])
    for p in programs:
        emit(kind, rel(p)[:-3], [rel(p)], consumer_deps([p]) + ([":" + folder] if helpers else []))

files = py_files("tests")
out.append("# Tests " + "-" * 90)
helpers = [p for p in files if not p.name.startswith("test_") or p.name == "test_case.py"]
tests = [p for p in files if p not in helpers]
out.append(
    "# Package markers, fixtures, the shared test-case helper and reference implementations."
)
emit(
    "py_library",
    "tests",
    [rel(p) for p in helpers],
    [d for d in consumer_deps(helpers) if d != ":tests"],
    extra=[("testonly", "True")],
)
for p in tests:
    emit("py_test", rel(p)[:-3], [rel(p)], consumer_deps([p]) + [":tests"])
text = "\n\n".join(out)
import re

text = re.sub(r"(\n# [^\n-][^\n]*)\n\n(py_)", r"\1\n\2", text)
# section headers to width 100
text = re.sub(
    r"^# (\S+( \S+)?) -+$", lambda m: ("# " + m.group(1) + " ").ljust(100, "-"), text, flags=re.M
)
print(text)
