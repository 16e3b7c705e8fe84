"""Who is asking: the visitor of the request being served (``current``). The UI opens ``visiting`` around each event
it serves; whatever must answer for one visitor alone reads ``current()``: the registry (which models a name resolves
to, whose quota), Hub access (whose token).

A context variable, as ``modeling.recording`` keeps its recording: requests served at once in threads each see their
own visitor. Outside any request (Python, a benchmark) the visitor is ``LOCAL``: no browser session, no token of its
own.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class Visitor:
    """``session``: the browser session (gradio's ``session_hash``), None outside one; ``oauth_token``: the visitor's
    own Hugging Face token (Sign in with Hugging Face on a Space), never the machine's."""

    session: str | None
    oauth_token: str | None = None

    def __repr__(self) -> str:  # a token never reaches a log
        return f"Visitor(session={self.session!r}, signed_in={self.oauth_token is not None})"


LOCAL = Visitor(session=None)
_current: ContextVar[Visitor] = ContextVar("visitor", default=LOCAL)


def current() -> Visitor:
    """The visitor of the request being served (``LOCAL`` outside one)."""
    return _current.get()


@contextmanager
def visiting(visitor: Visitor) -> Iterator[Visitor]:
    """Serve ``visitor`` inside the block (in this thread or task only)."""
    token = _current.set(visitor)
    try:
        yield visitor
    finally:
        _current.reset(token)
