"""Whole-number picks sent by a client (a layer, a head, a token position), checked with a message that says
what was wrong and what is allowed. -1 means the last, as in Python."""

import math


def pick_index(value, size: int, what: str, *, last_allowed: bool = True) -> int:
    """``value`` as an index into ``size`` items (0 to size - 1; -1 for the last when ``last_allowed``)."""
    allowed = f"a whole number from 0 to {size - 1}" + (" (or -1 for the last)" if last_allowed else "")
    if isinstance(value, bool):
        raise ValueError(f"{what} must be {allowed}; got {value!r}")
    try:
        number = float(str(value).strip()) if isinstance(value, str) else float(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{what} must be {allowed}; got {str(value)[:40]!r}") from None
    if not math.isfinite(number) or number != int(number):
        raise ValueError(f"{what} must be {allowed}; got {value!r}")
    index = int(number)
    if last_allowed and index == -1:
        return size - 1
    if not 0 <= index < size:
        raise ValueError(f"{what} must be {allowed}; got {index}")
    return index
