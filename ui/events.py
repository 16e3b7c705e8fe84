"""The event plumbing every tab shares: ``guarded`` (a failure ends as a message in the status line), ``status`` (that
line), the concurrency groups, ``UNCHECKED``, and what an output shows after a failed request (``NO_FIGURE``,
``NO_TEXT``, ``KEPT``).

Every event is named (its ``api_name`` is the Space's public API), takes its inputs unprocessed (``UNCHECKED``: the
explorer checks them and says what is wrong instead of a bare error), and ends any failure as a message in its status
line, clearing the results of the request before (``guarded``). ``guarded`` also serves each call as its visitor
(``explorer.core.visitor``): the explorer answers that browser session alone.
"""

import functools
import inspect
import logging
import re

import gradio as gr
from gradio.context import LocalContext

from explorer.core import inputs
from explorer.core.visitor import Visitor, current, visiting
from explorer.core.inputs import InputProblem
from explorer.generation import batching
from explorer.generation.labels import LINE_BREAK, SPACE, visible

logger = logging.getLogger("app")

# concurrency (``explorer.core.machine.CORES`` cores, one torch thread per request): generations have slots of their
# own, so a view never waits behind a streaming generation; their handlers only stream what the model's ONE decode
# thread makes for all of them in one batch (explorer.generation.batching); the interactive views share one slot, the
# other core. The long jobs get a slot each of their own, so that however many are queued, a click on
# Generate starts at once, and a view never waits behind an exact answer
INTERACTIVE = dict(concurrency_id="model", concurrency_limit=1)
# the answers that run one pass per cell or per revision (exact patching grids, the exact head ranking, a Hub repo's
# revisions measured): a slot of their own, so that however long one runs (``machine.Deadline`` bounds it), the
# views never wait behind it
EXACT = dict(concurrency_id="exact", concurrency_limit=1)
GENERATION = dict(concurrency_id="generation", concurrency_limit=batching.MAX_BATCH)
EXTRAPOLATION = dict(concurrency_id="extrapolation", concurrency_limit=1)
COMPARISON = dict(concurrency_id="comparison", concurrency_limit=1)
TRAINING = dict(concurrency_id="training", concurrency_limit=1)  # one live training job at a time; the rest queue
# opening models: downloads wait on the network, not the cores (explorer.models.jobs runs at most MAX_JOBS at once
# and abandons a stalled one); their loads queue on catalog.LOAD_LOCK. Slots enough that requesters following slow
# jobs never keep another visitor's open waiting
OPENING = dict(concurrency_id="opening", concurrency_limit=16)
UNCHECKED = dict(preprocess=False)  # the explorer validates raw inputs and explains what is wrong

NO_FIGURE, NO_TEXT = None, ""  # what a plot or table, and a text box, show after a failed request: nothing
KEPT = gr.skip()  # a menu keeps its value


def guarded(**on_failure):
    """Run an event handler whose LAST output is a status line so that any failure ends as a message there
    (what was wrong, what is allowed), never a traceback. The outputs before the status line are named, in the
    event's order, with what each shows after a failure (``@guarded(plot=NO_FIGURE, table=NO_TEXT)`` for outputs
    ``[plot, table, status_line]``): results of an earlier request are cleared rather than left looking like the
    answer to this one. The wrapped handler keeps the names as ``failure_values`` (a test checks every event's
    outputs against them). Works for plain and generator (streaming) handlers."""

    def failure(error: Exception):
        if isinstance(error, InputProblem):
            message = str(error)
        else:
            logger.exception("event failed")
            message = f"Something went wrong ({inputs.error_text(error)}). The app is still running: try other input."
        return (*(dict(value) if isinstance(value, dict) else value for value in on_failure.values()), f"⚠️ {message}")

    def wrap(fn):
        fn = as_visitor(fn)
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def run(*args, **kwargs):
                try:
                    yield from fn(*args, **kwargs)
                except BaseException as error:  # noqa: BLE001 - every failure becomes a message
                    yield failure(unless_exit(error))
        else:
            @functools.wraps(fn)
            def run(*args, **kwargs):
                try:
                    return fn(*args, **kwargs)
                except BaseException as error:  # noqa: BLE001
                    return failure(unless_exit(error))
        run.failure_values = dict(on_failure)
        return run

    return wrap


def unless_exit(error: BaseException) -> BaseException:
    """``error``, if it is one request's failure: an ``Exception``, or a panic in a library written in Rust (tokenizers,
    safetensors), which pyo3 raises as ``PanicException``, a BaseException; anything else (KeyboardInterrupt,
    SystemExit: the app is stopping) is raised again."""
    if isinstance(error, Exception) or type(error).__name__ == "PanicException":
        return error
    raise error


def visitor_of(request) -> Visitor:
    """The visitor of a gradio request: its browser session and, where they signed in with Hugging Face (a Space
    with OAuth) and the sign-in has not expired (gradio's own check), their own token. Never ``LOCAL`` (the operator
    in Python): an event with no request found is served as a visitor with no session and no token."""
    if request is None:
        return Visitor(session=None)
    underlying = getattr(request, "request", None) or request
    scope = getattr(underlying, "scope", None)
    session = scope.get("session", {}) if isinstance(scope, dict) else (getattr(underlying, "session", None) or {})
    try:
        oauth = gr.oauth._get_valid_oauth_info_from_session(session) if isinstance(session, dict) else None
    except Exception:  # noqa: BLE001 - a session that is not gradio's: no sign-in
        oauth = None
    return Visitor(session=getattr(request, "session_hash", None),
                   oauth_token=(oauth or {}).get("access_token") or None)


def visitor_now() -> Visitor:
    """The visitor of the event gradio is serving in this thread (gradio sets its request around every call). Called
    outside any gradio event (a handler called from Python, as the tests do), whoever is being served already."""
    if LocalContext.blocks.get(None) is None:
        return current()
    return visitor_of(LocalContext.request.get(None))


def as_visitor(fn):
    """Run an event handler as the visitor whose request it serves (``explorer.core.visitor``), so that a model name
    resolves to that browser session's models alone, whichever endpoint is called. ``guarded`` handlers get it
    themselves; a handler that is not guarded and reads a model takes it directly. Generators: gradio may run each
    step in another thread, so the visitor is set around each step. The wrapped handler has ``runs_as_visitor``."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            with visiting(visitor_now()):
                steps = fn(*args, **kwargs)
            while True:
                with visiting(visitor_now()):
                    try:
                        update = next(steps)
                    except StopIteration:
                        return
                yield update
    else:
        @functools.wraps(fn)
        def run(*args, **kwargs):
            with visiting(visitor_now()):
                return fn(*args, **kwargs)
    run.runs_as_visitor = True
    return run


def serve_as_visitors(demo: gr.Blocks) -> None:
    """Every event handler of the page runs as its visitor (``as_visitor``), guarded or not, private or public: a
    session's models answer to that session alone through whichever endpoint is called by name."""
    for block in demo.fns.values():
        if block.fn is not None and not getattr(block.fn, "runs_as_visitor", False):
            block.fn = as_visitor(block.fn)


def say_doing(description: str, fraction: float = 0.0) -> None:
    """Tell the page what a request that may take seconds is doing now: gradio's progress line over its outputs
    (nothing outside an event)."""
    gr.Progress()(fraction, desc=description)


def status(*lines: str) -> str:
    """A status line: one markdown bullet per non-empty line."""
    return "\n".join(f"- {line}" for line in lines if line)


def visible_breaks(sample: str) -> str:
    """A sample with its line breaks marked (↵, the line then broken), every space a text box would hide shown as
    ␣ (at the start or end of a line, and in a run of two or more: an early model's sample is often such spaces
    alone), and every other character that draws nothing marked as token labels mark it (⇥ a tab, ‹CR›)."""
    hidden = re.compile(r"^ +| +$| {2,}", re.MULTILINE)
    sample = "".join(c if c in " \n" else visible(c) for c in sample)
    return hidden.sub(lambda m: SPACE * len(m.group()), sample).replace("\n", LINE_BREAK + "\n")
