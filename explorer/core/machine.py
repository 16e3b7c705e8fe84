"""The machine the app is sized for: a Hugging Face Space's free CPU, 2 cores (the project's own machines too).

Each request runs one torch thread (``app.warm_up``): two threads of one forward pass wait on each other here, so
the work that may run side by side (generate calls outside a batch, ablation and patching chunks) runs ``CORES``
at a time, one a core.

Memory is given back as it is freed (``give_memory_back``): glibc's allocator otherwise keeps what a freed model or a
view's large arrays held, in as many heaps as threads ran (up to 8 per core), and serves buffers of up to 32 MB from
them once it has freed one that size, so a process that loads and drops models grows past what it holds."""

import ctypes

CORES = 2
ARENAS = CORES  # glibc heaps: one a core (threads beyond share them)
MMAP_BYTES = 4 * 2**20  # buffers this large or larger come from the system and go back to it when freed

_M_MMAP_THRESHOLD, _M_ARENA_MAX = -3, -8  # mallopt's parameters (malloc.h)


def give_memory_back() -> bool:
    """Set glibc's allocator so freed memory returns to the system: at most ``ARENAS`` heaps, and every buffer of
    ``MMAP_BYTES`` or more mapped on its own (a fixed threshold: glibc no longer raises it as buffers are freed).
    Called once at launch, before the app's threads start. False where the C library is not glibc.

    Measured with benchmarks/hub_memory.py (20 visitors opening 178 MB models at once, bound 2 GB): peak RSS
    2.96 GB without, 2.50-2.54 GB with."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_ARENA_MAX, ARENAS)) and bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_BYTES))
    except (OSError, AttributeError):  # not glibc
        return False
