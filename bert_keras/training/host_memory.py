"""Start training programs with glibc's malloc on transparent huge pages.

XLA (jax, TensorFlow) and TensorFlow's own executor allocate a training
step's temporaries as large blocks that glibc's malloc maps afresh on every
step; the kernel then faults them in one 4 KiB page at a time, and on a CPU
those faults take a visible share of the step in system time. glibc's
tunable `glibc.malloc.hugetlb=1` (glibc >= 2.35) makes malloc ask for
transparent huge pages for those blocks, so each fault maps 2 MiB instead of
4 KiB and the step gets faster (the README's Pretraining section has the
measurement).

glibc reads its tunables once, when the process starts, so a program that
wants them restarts itself with them (`restart_with_huge_page_malloc`),
before it imports anything heavy. `GLIBC_TUNABLES` that already names
`glibc.malloc.hugetlb` (e.g. `glibc.malloc.hugetlb=0` to opt out) is left
as it is.
"""

import os
import sys

HUGE_PAGE_TUNABLE = "glibc.malloc.hugetlb=1"
_TRANSPARENT_HUGE_PAGES = "/sys/kernel/mm/transparent_hugepage/enabled"


def environment_with_huge_page_malloc(environment):
    """`environment` with `glibc.malloc.hugetlb=1` added, or None when it sets that tunable already.

    None when `GLIBC_TUNABLES` already sets `glibc.malloc.hugetlb`, to any
    value. Other tunables are kept.

    Args:
        environment: a mapping like `os.environ`.

    Example:
    >>> environment = environment_with_huge_page_malloc({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"})
    >>> environment["GLIBC_TUNABLES"]
    'glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1'
    >>> environment_with_huge_page_malloc({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}) is None
    True
    """
    tunables = environment.get("GLIBC_TUNABLES", "")
    if "glibc.malloc.hugetlb" in tunables:
        return None
    return {**environment, "GLIBC_TUNABLES": ":".join(filter(None, [tunables, HUGE_PAGE_TUNABLE]))}


def restart_with_huge_page_malloc():
    """Replaces this process by itself with `glibc.malloc.hugetlb=1`, if it is not set yet.

    Nothing happens when the kernel has no transparent huge pages to give
    (not Linux, or its THP mode is `never`).

    The same interpreter, options and arguments (`sys.orig_argv`) run again
    in the same process (`os.execve`: same PID, so signals and a parent's
    `wait` still reach it). Call it first thing in a program's
    `if __name__ == "__main__":`, before Keras or a backend is imported.

    Example (as in `tasks/pretrain.py`):

        if __name__ == "__main__":
            restart_with_huge_page_malloc()
            app.run(main)
    """
    environment = environment_with_huge_page_malloc(os.environ)
    if environment is not None and _kernel_has_transparent_huge_pages():
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], environment)


def _kernel_has_transparent_huge_pages():
    """Whether the kernel's THP mode is `always` or `madvise` (Linux only)."""
    try:
        with open(_TRANSPARENT_HUGE_PAGES) as modes:
            return "[never]" not in modes.read()
    except OSError:
        return False
