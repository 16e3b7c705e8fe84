"""Jobs: one per key however many ask (a Hub repo at a revision, a reload, a repo's list of revisions), each running
in a daemon thread. A requester follows its job's progress and gives up with a clear message when the Hub sends
nothing for ``STALL_SECONDS`` (a load queued behind ``catalog.LOAD_LOCK`` is not a stall); nobody else waits on it,
and the job goes on.
"""

import threading
import time
from typing import Callable, Iterator

from explorer.core.inputs import InputProblem, echo
from explorer.models.hub_files import endpoint, hub_error_message
from explorer.models.plans import megabytes

STALL_SECONDS = 20  # a job that moves nothing for this long is given up by its requesters (well within 30 s)


class Job:
    """A load running in a daemon thread; ``phase``, ``done_bytes``/``total_bytes`` say how far it is."""

    def __init__(self, key):
        self.key, self.phase, self.done_bytes, self.total_bytes = key, "starting", 0, 0
        self.waiting_on_hub = False  # only a wait on the network can stall; a load behind the lock just queues
        self.finished = threading.Event()
        self.touched = time.monotonic()
        self.result = self.error = None

    def report(self, phase: str | None = None, add_bytes: int = 0, hub: bool | None = None) -> None:
        if phase is not None:
            self.phase = phase
        if hub is not None:
            self.waiting_on_hub = hub
        self.done_bytes += add_bytes
        self.touched = time.monotonic()

    def progress(self) -> str:
        if self.total_bytes:
            return f"{self.phase}: {megabytes(self.done_bytes)} of {megabytes(self.total_bytes)}"
        return self.phase

    def follow(self, every: float = 0.5) -> Iterator[str]:
        """The progress line every ``every`` seconds until the job ends; InputProblem when it stalls."""
        while not self.finished.wait(every):
            if self.waiting_on_hub and time.monotonic() - self.touched > STALL_SECONDS:
                raise InputProblem(f"Gave up after {STALL_SECONDS} s without progress ({self.phase}): the Hub at "
                                   f"{echo(endpoint())} is not answering. Try again later.")
            yield self.progress()

    def outcome(self):
        for _ in self.follow():
            pass
        if self.error is not None:
            raise self.error
        return self.result


_jobs: dict = {}
_jobs_lock = threading.Lock()


def run_shared(key, work: Callable[[Job], object]) -> Job:
    """The running job for ``key``, or a new one running ``work(job)`` in a daemon thread: whoever asks for the same
    key while it runs gets the same job. A failure reaches every requester as an ``InputProblem``."""
    with _jobs_lock:
        if key in _jobs:
            return _jobs[key]
        job = _jobs[key] = Job(key)

    def run():
        try:
            job.result = work(job)
        except InputProblem as error:
            job.error = error
        except Exception as error:  # noqa: BLE001 - every failure reaches the requesters as a message
            job.error = InputProblem(hub_error_message(error))
            job.error.__cause__ = error  # what the Hub said, for a caller that words it for its own box
        finally:
            with _jobs_lock:
                _jobs.pop(key, None)
            job.finished.set()

    threading.Thread(target=run, name=f"open {key}", daemon=True).start()
    return job

