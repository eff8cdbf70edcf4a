import json
import os
import pathlib
import subprocess
import sys

import pytest

from bert_keras.training import host_memory
from bert_keras.training.host_memory import environment_with_huge_page_malloc

# Restarts itself, then mallocs and fills a 256 MiB block as XLA does its step temporaries (numpy
# would not do: it asks for huge pages itself).
PROGRAM = """
import ctypes, json, os, resource, sys
from bert_keras.training.host_memory import restart_with_huge_page_malloc
print("started", os.getpid(), flush=True)
restart_with_huge_page_malloc()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
ctypes.memset(libc.malloc(256 * 2**20), 1, 256 * 2**20)
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before
print(json.dumps({"pid": os.getpid(), "argv": sys.argv[1:], "faults": faults,
                  "tunables": os.environ.get("GLIBC_TUNABLES")}))
"""
SMALL_PAGES = 256 * 2**20 // 4096


def _run(tunables):
    environment = {key: value for key, value in os.environ.items() if key != "GLIBC_TUNABLES"}
    if tunables is not None:
        environment["GLIBC_TUNABLES"] = tunables
    lines = subprocess.run(
        [sys.executable, "-c", PROGRAM, "--flag=1", "word"],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return [line for line in lines if line.startswith("started")], json.loads(lines[-1])


def test_the_tunable_is_added_to_the_others_and_an_explicit_choice_is_kept():
    assert environment_with_huge_page_malloc({"PATH": "/bin"}) == {
        "PATH": "/bin",
        "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1",
    }
    assert environment_with_huge_page_malloc({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}) == {
        "GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"
    }
    assert environment_with_huge_page_malloc({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}) is None
    assert environment_with_huge_page_malloc({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}) is None


THP_MODES = pathlib.Path(host_memory._TRANSPARENT_HUGE_PAGES)
THP_MODE = THP_MODES.read_text() if THP_MODES.exists() else "[never]"


@pytest.mark.skipif("[never]" in THP_MODE, reason="the kernel gives no transparent huge pages")
def test_a_program_restarts_in_place_once_with_the_tunable_added():
    starts, restarted = _run(tunables="glibc.malloc.arena_max=4")
    assert len(starts) == 2 and starts[0] == starts[1] == f"started {restarted['pid']}"
    assert restarted["argv"] == ["--flag=1", "word"]
    assert restarted["tunables"] == "glibc.malloc.arena_max=4:glibc.malloc.hugetlb=1"

    starts, kept = _run(tunables="glibc.malloc.hugetlb=0")
    assert len(starts) == 1 and kept["tunables"] == "glibc.malloc.hugetlb=0"


@pytest.mark.skipif(
    "[madvise]" not in THP_MODE,
    reason="huge pages only where malloc asks for them: THP mode madvise",
)
def test_the_restarted_program_faults_its_memory_in_huge_pages():
    _, restarted = _run(tunables=None)
    _, default = _run(tunables="glibc.malloc.hugetlb=0")
    assert default["faults"] > SMALL_PAGES / 2
    assert restarted["faults"] < SMALL_PAGES / 8
