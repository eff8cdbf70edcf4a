"""Start training programs with glibc's malloc set up for a training step's large temporaries.

XLA (jax, TensorFlow) and TensorFlow's and torch's executors allocate a
training step's temporaries as large blocks, afresh on every step. By
default glibc's malloc maps each large block on its own and unmaps it when
it is freed (as it also drops whole heaps of its per-thread arenas), so the
kernel faults the same memory in again on every step, zeroing each page;
on a CPU those faults take a visible share of the step in system time.
Four of glibc's tunables stop that:

- `glibc.malloc.mmap_max=0`: no block gets a mapping of its own; large
  ones come from the heap like the rest, where a freed block is reused;
- `glibc.malloc.trim_threshold`, beyond any heap: freed memory is kept for
  the next step, not given back to the kernel (the process stays at its
  peak);
- `glibc.malloc.arena_max=1`: every thread allocates from the one heap
  that holds the memory already faulted in;
- `glibc.malloc.hugetlb=1` (glibc >= 2.35): that heap grows in 2 MiB
  transparent huge pages, so what is faulted in the first time takes 512
  times fewer faults.

The README's Pretraining and Fine-tuning sections have the measurements.
glibc reads its tunables once, when the process starts, so a program that
wants them restarts itself with them (`restart_with_training_malloc`),
before it imports anything heavy. A tunable that `GLIBC_TUNABLES` already
names (e.g. `glibc.malloc.hugetlb=0` or `glibc.malloc.arena_max=8`) keeps
its value there.
"""

import os
import sys

TRAINING_TUNABLES = {
    "glibc.malloc.mmap_max": "0",
    "glibc.malloc.trim_threshold": str(2**62),
    "glibc.malloc.arena_max": "1",
    "glibc.malloc.hugetlb": "1",
}
_TRANSPARENT_HUGE_PAGES = "/sys/kernel/mm/transparent_hugepage/enabled"
# Set in the restarted process: a glibc that drops tunables it does not know
# from GLIBC_TUNABLES (hugetlb before glibc 2.35) restarts it no further.
_RESTARTED = "BERT_KERAS_MALLOC_RESTARTED"


def environment_with_training_malloc(environment):
    """`environment` with `TRAINING_TUNABLES` added, or None when it names them all already.

    Each of `TRAINING_TUNABLES` that `GLIBC_TUNABLES` already names keeps
    the value given there; other tunables are kept too.

    Args:
        environment: a mapping like `os.environ`.

    Example:
    >>> environment = environment_with_training_malloc({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"})
    >>> environment["GLIBC_TUNABLES"].split(":")[:2]
    ['glibc.malloc.arena_max=2', 'glibc.malloc.mmap_max=0']
    >>> environment_with_training_malloc(environment) is None
    True
    """
    tunables = environment.get("GLIBC_TUNABLES", "")
    named = {setting.split("=")[0] for setting in tunables.split(":") if setting}
    added = [f"{name}={value}" for name, value in TRAINING_TUNABLES.items() if name not in named]
    if not added:
        return None
    return {**environment, "GLIBC_TUNABLES": ":".join(filter(None, [tunables, *added]))}


def restart_with_training_malloc():
    """Replaces this process by itself with `TRAINING_TUNABLES`, if they are not all set yet.

    Nothing happens off Linux (where `/sys/kernel/mm/transparent_hugepage`
    is missing), nor in a process that this function started.

    The same interpreter, options and arguments (`sys.orig_argv`) run again
    in the same process (`os.execve`: same PID, so signals and a parent's
    `wait` still reach it). Call it first thing in a program's
    `if __name__ == "__main__":`, before Keras or a backend is imported.

    Example (as in `tasks/pretrain.py`):

        if __name__ == "__main__":
            restart_with_training_malloc()
            app.run(main)
    """
    environment = environment_with_training_malloc(os.environ)
    if (
        environment is None
        or _RESTARTED in os.environ
        or not os.path.exists(_TRANSPARENT_HUGE_PAGES)
    ):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(
        sys.executable, [sys.executable, *sys.orig_argv[1:]], {**environment, _RESTARTED: "1"}
    )
