"""The machine the app is sized for: a Hugging Face Space's free CPU, 2 cores (the project's own machines too).

Each request runs one torch thread (``app.warm_up``): two threads of one forward pass wait on each other here, so
the work that may run side by side (generate calls outside a batch, ablation and patching chunks) runs ``CORES``
at a time, one a core.

Memory is given back as it is freed (``give_memory_back``): glibc's allocator otherwise keeps what a freed model or a
view's arrays held in as many heaps as threads ran (up to 8 per core), so a process that loads and drops models for
its visitors grows past what it holds."""

import ctypes

CORES = 2
ARENAS = CORES  # glibc heaps: one a core (more threads share them)

_M_ARENA_MAX = -8  # mallopt's parameter (malloc.h)


def give_memory_back() -> bool:
    """Set glibc's allocator to keep at most ``ARENAS`` heaps, so what one thread frees another reuses and
    ``malloc_trim`` returns. Called once at launch, before the app's threads start. False where the C library is not
    glibc.

    Measured with benchmarks/hub_memory.py (20 visitors opening 178 MB models at once, bound 2 GB): peak RSS
    2.96 GB without, about 2.6 GB with. (Mapping every buffer of 4 MB or more on its own as well gave 2.5 GB, but cost
    the head ranking 18%: each large array then comes from the system zeroed, page by page.)"""
    try:
        return bool(ctypes.CDLL("libc.so.6").mallopt(_M_ARENA_MAX, ARENAS))
    except (OSError, AttributeError):  # not glibc
        return False


def trim_heap() -> None:
    """Give the heaps' free pages back to the system now (``malloc_trim``): after a model goes, or a load's copies."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass
