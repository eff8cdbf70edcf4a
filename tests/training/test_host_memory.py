import json
import os
import pathlib
import subprocess
import sys

import pytest

from bert_keras.training import host_memory
from bert_keras.training.host_memory import TRAINING_TUNABLES
from bert_keras.training.host_memory import environment_with_training_malloc

# Restarts itself (unless told not to), then fills a 256 MiB block malloc'd in one thread, frees
# it and fills one malloc'd in another thread, as XLA's thread pool does a step's temporaries on
# consecutive steps (numpy would not do: it asks for huge pages itself).
PROGRAM = """
import ctypes, json, os, resource, sys, threading
from bert_keras.training.host_memory import restart_with_training_malloc
print("started", os.getpid(), flush=True)
if sys.argv[1] == "restart":
    restart_with_training_malloc()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
faults = []

def step():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = libc.malloc(256 * 2**20)
    ctypes.memset(block, 1, 256 * 2**20)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    libc.free(block)

def huge_page_control():  # 64 MiB asked for in huge pages directly: what the kernel gives now
    import mmap
    region = mmap.mmap(-1, 64 * 2**20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    region.madvise(mmap.MADV_HUGEPAGE)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    ctypes.memset(ctypes.addressof(ctypes.c_char.from_buffer(region)), 1, 64 * 2**20)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

for _ in range(2):
    thread = threading.Thread(target=step)
    thread.start()
    thread.join()
print(json.dumps({"pid": os.getpid(), "argv": sys.argv[1:], "faults": faults,
                  "control": huge_page_control(), "tunables": os.environ.get("GLIBC_TUNABLES")}))
"""
SMALL_PAGES = 256 * 2**20 // 4096
CONTROL_SMALL_PAGES = 64 * 2**20 // 4096


def _run(tunables, restart=True, **extra_environment):
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("GLIBC_TUNABLES", host_memory._RESTARTED)
    }
    environment.update(extra_environment)
    if tunables is not None:
        environment["GLIBC_TUNABLES"] = tunables
    lines = subprocess.run(
        [sys.executable, "-c", PROGRAM, "restart" if restart else "stay", "--flag=1", "word"],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return [line for line in lines if line.startswith("started")], json.loads(lines[-1])


ALL_TUNABLES = ":".join(f"{name}={value}" for name, value in TRAINING_TUNABLES.items())


def test_the_tunables_are_added_to_the_others_and_an_explicit_choice_is_kept():
    assert environment_with_training_malloc({"PATH": "/bin"}) == {
        "PATH": "/bin",
        "GLIBC_TUNABLES": ALL_TUNABLES,
    }
    chosen = environment_with_training_malloc({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"})
    assert chosen["GLIBC_TUNABLES"].split(":") == [
        "glibc.malloc.hugetlb=0",
        *[setting for setting in ALL_TUNABLES.split(":") if "hugetlb" not in setting],
    ]
    assert environment_with_training_malloc(chosen) is None
    assert environment_with_training_malloc({"GLIBC_TUNABLES": ALL_TUNABLES}) is None


THP_MODES = pathlib.Path(host_memory._TRANSPARENT_HUGE_PAGES)
THP_MODE = THP_MODES.read_text() if THP_MODES.exists() else "[never]"
linux_only = pytest.mark.skipif(not THP_MODES.exists(), reason="glibc's tunables: Linux only")


@linux_only
def test_a_program_restarts_in_place_once_with_the_tunables_added():
    starts, restarted = _run(tunables="glibc.malloc.arena_max=4")
    assert len(starts) == 2 and starts[0] == starts[1] == f"started {restarted['pid']}"
    assert restarted["argv"] == ["restart", "--flag=1", "word"]
    assert restarted["tunables"].split(":")[0] == "glibc.malloc.arena_max=4"
    assert set(restarted["tunables"].split(":")[1:]) == {
        setting for setting in ALL_TUNABLES.split(":") if "arena_max" not in setting
    }

    starts, kept = _run(tunables=ALL_TUNABLES.replace("hugetlb=1", "hugetlb=0"))
    assert len(starts) == 1 and kept["tunables"].endswith("glibc.malloc.hugetlb=0")

    # Restarted once already, as where glibc drops a tunable it does not know: no second restart.
    starts, _ = _run(tunables="glibc.malloc.arena_max=4", **{host_memory._RESTARTED: "1"})
    assert len(starts) == 1


@linux_only
def test_the_next_step_reuses_the_memory_of_the_last_without_faulting_it_in():
    _, default = _run(tunables=None, restart=False)
    _, restarted = _run(tunables=None)
    assert default["faults"][1] > SMALL_PAGES / 2  # glibc unmapped the block and maps it anew
    # Faulted in again, even in huge pages, the block would take 128 faults.
    assert restarted["faults"][1] < 16


@pytest.mark.skipif(
    "[madvise]" not in THP_MODE,
    reason="huge pages only where malloc asks for them: THP mode madvise",
)
def test_the_restarted_program_faults_its_memory_in_huge_pages():
    _, default = _run(tunables="glibc.malloc.hugetlb=0", restart=False)
    _, restarted = _run(tunables=None)
    if restarted["control"] > CONTROL_SMALL_PAGES / 8:
        pytest.skip("the kernel has no huge pages free now (memory too fragmented)")
    assert default["faults"][0] > SMALL_PAGES / 2
    assert restarted["faults"][0] < SMALL_PAGES / 8
