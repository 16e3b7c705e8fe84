"""The machine the app is sized for: a Hugging Face Space's free CPU, 2 cores (the project's own machines too).

Each request runs one torch thread (``app.warm_up``): two threads of one forward pass wait on each other here, so
the work that may run side by side (generate calls outside a batch, ablation and patching chunks) runs ``CORES``
at a time, one a core.

An exact answer that runs one pass per cell (activation patching, the head ranking) holds the cores for at most
``settings.EXACT_SECONDS`` (``Deadline``; the operator sets it): a visitor's long text on a large model
never keeps the next visitor's exact answer waiting for minutes; its first-order estimate stands alone, with what to
shorten.

Memory is given back as it is freed (``give_memory_back``): glibc's allocator otherwise keeps what a freed model or a
view's arrays held in as many heaps as threads ran (up to 8 per core), so a process that loads and drops models for
its visitors grows past what it holds."""

import ctypes
import math
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from explorer.core.inputs import InputProblem
from explorer.core.settings import EXACT_SECONDS

CORES = 2
SETTLED_SECONDS = 2  # a pace measured over less is not trusted (the first batches pay the warm-up)
# how far past the time a pace must say the work would run to stop it before the time is up: early in the runs a
# pace read up to 2.3x slow at GPT-2 small's size (the warm-up; a batch running beside the first, not yet counted)
PACE_MARGIN = 4
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


@contextmanager
def side_by_side(fn: Callable, items: list, workers: int = CORES) -> Iterator[Iterable]:
    """``fn`` over ``items``, ``workers`` threads at a time (torch releases the GIL in its kernels): the results in
    order, as they come. Leaving the block early (an error, a ``Deadline``) drops the items not started, so the
    cores come free after the ones running, not after all of them."""
    pool = ThreadPoolExecutor(max(1, min(workers, len(items) or 1)))
    try:
        yield pool.map(fn, items)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def seconds(value: float) -> str:
    """'0.4 s', '9.2 s', '266 s': a tenth of a second where it shows."""
    return f"{value:.1f} s" if value < 10 else f"{value:.0f} s"


class OverBudget(InputProblem):
    """Work stopped by its ``Deadline``; the message says how far it got and what to shorten."""


class Deadline:
    """Work that reports its progress (the fraction of its work done), stopped once it has run ``seconds``, or as
    soon as its pace says it would run past ``PACE_MARGIN`` times that (measured over ``SETTLED_SECONDS`` at least):
    work far too long for the time stops in seconds, and work that might fit is never stopped on a pace's word.
    ``watching(progress)`` is the progress callback the work calls with (fraction done, description): it checks, then
    passes the call on."""

    def __init__(self, what: str, shorten: str, seconds: float | None = None):
        self.what, self.shorten = what, shorten
        self.seconds = EXACT_SECONDS.value() if seconds is None else seconds
        self.started = time.perf_counter()

    def check(self, fraction: float) -> None:
        elapsed = time.perf_counter() - self.started
        pace = elapsed / fraction if fraction > 0 else math.inf
        if elapsed > self.seconds or (elapsed >= SETTLED_SECONDS and pace > PACE_MARGIN * self.seconds):
            raise OverBudget(
                f"{self.what} stopped after {seconds(elapsed)}, {fraction:.0%} done: at this pace all of them would "
                f"take about {seconds(pace)}, and one request may hold the cores for {seconds(self.seconds)}. The "
                f"first-order estimate stands alone; for the exact answer, {self.shorten}.")

    def watching(self, progress: Callable | None = None) -> Callable:
        def check_then(fraction: float, description: str = "") -> None:
            self.check(fraction)
            if progress is not None:
                progress(fraction, description)
        return check_then
