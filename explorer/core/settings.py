"""What the app's operator may set: every limit a visitor's work runs within, each a ``Setting`` named by an
environment variable and read when it is used, so a change holds from the next request on. docs/safety.md says what
each one bounds (a test reads its defaults there against these).

A value that is not a number of at least 0 is ignored, with a warning in the log naming the variable, the value and
the default that holds instead: a typo never lifts a limit, and never takes the app down.
"""

import logging
import math
import os
from dataclasses import dataclass

logger = logging.getLogger("app")
_warned: set[tuple[str, str]] = set()  # (variable, value) pairs already warned about: once each, not per request


@dataclass(frozen=True)
class Setting:
    """An operator's number: ``env`` names it, ``default`` holds where it is unset or malformed; ``unit`` says how it
    reads ("s", "bytes" or "parameters")."""

    env: str
    default: int
    unit: str

    def value(self) -> int | float:
        """The number in force now: the environment's where it is a finite number of at least 0, else the default
        (a whole number of bytes or parameters, rounded down; seconds as given)."""
        given = os.environ.get(self.env)
        if given is None or given.strip() == "":
            return self.default
        try:
            number = float(given)
        except ValueError:
            number = math.nan
        if not (math.isfinite(number) and number >= 0):
            if (self.env, given) not in _warned:
                _warned.add((self.env, given))
                logger.warning("%s=%r is not a number of at least 0 (%s); the default %s holds", self.env, given,
                               self.unit, self.shown(self.default))
            return self.default
        return number if self.unit == "s" else int(number)

    def shown(self, number: float | None = None) -> str:
        """'60 s', '200M', '1 GB': the value in force (or ``number``) as the app and docs/safety.md write it."""
        number = self.value() if number is None else number
        if self.unit == "s":
            return f"{number:g} s"
        if self.unit == "parameters":
            return f"{number / 1e6:,.0f}M"
        return megabytes(number)


def megabytes(n: float) -> str:
    """'178 MB', '2.2 GB': a size in bytes as the app writes it."""
    return f"{n / 1e6:,.3g} MB" if n < 1e9 else f"{n / 1e9:,.3g} GB"


# time: one request's exact runs (a GPT-2-small-size model: patching ~70 tokens); a local app, used by one person,
# may wait longer
EXACT_SECONDS = Setting("SCRATCH_EXACT_SECONDS", 60, "s")
# what a model from the Hub or an upload may be, checked from its config and file listing before anything downloads
HUB_MAX_PARAMETERS = Setting("SCRATCH_HUB_MAX_PARAMETERS", 200_000_000, "parameters")
HUB_MAX_BYTES = Setting("SCRATCH_HUB_MAX_BYTES", 1_000_000_000, "bytes")  # of weights
HUB_MEMORY = Setting("SCRATCH_HUB_MEMORY", 2_000_000_000, "bytes")  # every model held, its tokenizer and caches
HUB_DISK = Setting("SCRATCH_HUB_DISK", 5_000_000_000, "bytes")  # the Hub cache's revisions this app downloaded
HUB_STALL_SECONDS = Setting("SCRATCH_HUB_STALL_SECONDS", 20, "s")  # a download sending too little this long is abandoned
UPLOAD_DISK = Setting("SCRATCH_UPLOAD_DISK", 6_000_000_000, "bytes")  # every visitor's unpacked uploads
UPLOAD_DISK_SESSION = Setting("SCRATCH_UPLOAD_DISK_SESSION", 2_200_000_000, "bytes")  # one visitor's: two at the limit
# a page that named no model this long gives up its uploads when another visitor's would not fit (a closed page gives
# them up at once; a scripted client never closes one)
UPLOAD_IDLE_SECONDS = Setting("SCRATCH_UPLOAD_IDLE_SECONDS", 1800, "s")

EVERY = (EXACT_SECONDS, HUB_MAX_PARAMETERS, HUB_MAX_BYTES, HUB_MEMORY, HUB_DISK, HUB_STALL_SECONDS, UPLOAD_DISK,
         UPLOAD_DISK_SESSION, UPLOAD_IDLE_SECONDS)
