"""Jobs: one per key however many ask (a Hub repo at a revision, a reload, a repo's list of revisions), each running
in a daemon thread, at most ``MAX_JOBS`` at once and ``MAX_JOBS_PER_VISITOR`` started by one browser session (one
more is refused at once: nobody queues behind a slow Hub, nor waits for a visitor who started many). A requester
follows its job's progress; joining a running job costs nothing and is never refused.

A stalled job is abandoned, its thread freed: every byte the Hub sends reaches the job through huggingface_hub's HTTP
client (``_GuardedTransport``, installed once), so a job whose Hub sends fewer than ``FLOOR_BYTES`` in
``settings.HUB_STALL_SECONDS`` (nothing at all, or a drip) fails at its next byte or its requester's next look, with a
clear message; huggingface_hub deletes the partial file. A load queued behind ``catalog.LOAD_LOCK`` is not a stall.
"""

import contextvars
import threading
import time
from typing import Callable, Iterator

import httpx2
from huggingface_hub import set_client_factory
from huggingface_hub.utils._http import hf_request_event_hook

from explorer.core import visitor
from explorer.core.inputs import InputProblem, echo
from explorer.models.hub_files import access, endpoint, hub_error_message
from explorer.core.settings import HUB_STALL_SECONDS, megabytes

FLOOR_BYTES = 64_000  # a job moving less in HUB_STALL_SECONDS is abandoned: 3.2 KB/s over 20 s, a drip, not a slow line
MAX_JOBS = 8  # jobs running at once (threads); one more is refused, not queued
MAX_JOBS_PER_VISITOR = 2  # jobs one browser session started that run at once: one visitor cannot take every slot


class Job:
    """A load running in a daemon thread; ``phase``, ``done_bytes``/``total_bytes`` say how far it is."""

    def __init__(self, key, session: str | None = None):
        self.key, self.phase, self.done_bytes, self.total_bytes = key, "starting", 0, 0
        self.session = session  # the browser session that started it (None: Python, outside any request)
        self.waiting_on_hub = False  # only a wait on the network can stall; a load behind the lock just queues
        self.finished = threading.Event()
        self.touched = self.window_start = time.monotonic()
        self.window_bytes = 0  # bytes the Hub sent since window_start
        self.abandoned: InputProblem | None = None
        self.result = self.error = None

    def report(self, phase: str | None = None, add_bytes: int = 0, hub: bool | None = None) -> None:
        if phase is not None:
            self.phase = phase
        if hub is not None:
            self.waiting_on_hub = hub
            self.window_start, self.window_bytes = time.monotonic(), 0
        self.done_bytes += add_bytes
        self.touched = time.monotonic()

    def received(self, n: int) -> None:
        """Bytes from the Hub (any call); raises the abandonment when the job has stalled."""
        self.window_bytes += n
        self.check()

    def check(self) -> None:
        """Abandon the job once a whole window passed with fewer than FLOOR_BYTES from the Hub; raise if abandoned."""
        now = time.monotonic()
        if self.abandoned is None and self.waiting_on_hub and now - self.window_start > HUB_STALL_SECONDS.value():
            if self.window_bytes < FLOOR_BYTES:
                self.abandoned = InputProblem(
                    f"Gave up after {HUB_STALL_SECONDS.value():g} s with under {megabytes(FLOOR_BYTES)} from the Hub "
                    f"({self.phase}): the Hub at {echo(endpoint())} is not answering, or barely. Try again later.")
            else:
                self.window_start, self.window_bytes = now, 0
        if self.abandoned is not None:
            raise self.abandoned

    def progress(self) -> str:
        if self.total_bytes:
            return f"{self.phase}: {megabytes(self.done_bytes)} of {megabytes(self.total_bytes)}"
        return self.phase

    def follow(self, every: float = 0.5) -> Iterator[str]:
        """The progress line every ``every`` seconds until the job ends; InputProblem when it stalls."""
        while not self.finished.wait(every):
            self.check()
            yield self.progress()

    def outcome(self):
        for _ in self.follow():
            pass
        if self.error is not None:
            raise self.error
        return self.result


_jobs: dict = {}
_jobs_lock = threading.Lock()
_running: contextvars.ContextVar[Job | None] = contextvars.ContextVar("job", default=None)


def run_shared(key, work: Callable[[Job], object]) -> Job:
    """The running job for ``key``, or a new one running ``work(job)`` in a daemon thread (in the requester's context:
    its visitor, hence its token): whoever asks for the same key while it runs gets the same job (the operator's and
    visitors' apart). A failure reaches
    every requester as an ``InputProblem``."""
    key = (key, access().whose == "operator")  # the operator's jobs (private repos too) are joined by the operator only
    session = visitor.current().session
    with _jobs_lock:
        if key in _jobs:
            return _jobs[key]
        if session is not None and sum(j.session == session for j in _jobs.values()) >= MAX_JOBS_PER_VISITOR:
            raise InputProblem(f"You are already opening {MAX_JOBS_PER_VISITOR} models: wait for one to finish, then "
                               "try again.")
        if len(_jobs) >= MAX_JOBS:
            raise InputProblem(f"The app is busy opening {MAX_JOBS} models for its visitors: try again in a minute.")
        job = _jobs[key] = Job(key, session)

    def run():
        _running.set(job)
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

    context = contextvars.copy_context()
    threading.Thread(target=context.run, args=(run,), name=f"open {key}", daemon=True).start()
    return job


# ----------------------------------------------------------------------------------------------
# huggingface_hub's HTTP client, telling the running job of every byte
# ----------------------------------------------------------------------------------------------


class _Counted(httpx2.SyncByteStream):
    def __init__(self, stream, job: Job):
        self.stream, self.job = stream, job

    def __iter__(self):
        for chunk in self.stream:
            self.job.received(len(chunk))
            yield chunk

    def close(self):
        self.stream.close()


class _GuardedTransport(httpx2.HTTPTransport):
    """The default transport; in a job's thread each response's bytes are counted to the job as they arrive."""

    def handle_request(self, request):
        job = _running.get()
        if job is not None:
            job.check()
        response = super().handle_request(request)
        if job is not None:
            response.stream = _Counted(response.stream, job)
        return response


def _client() -> httpx2.Client:
    """huggingface_hub's default client (``default_client_factory``) on the guarded transport."""
    return httpx2.Client(event_hooks={"request": [hf_request_event_hook]}, follow_redirects=True, timeout=None,
                         transport=_GuardedTransport())


set_client_factory(_client)
