"""What users type or send, checked before any work is done, and echoed back safely.

Every problem a user can fix raises ``InputProblem`` with a message that says what was wrong and what is
allowed. Messages are Markdown (the app shows them in status lines): anything that came from the user goes
through ``echo``, a code span, so a model name such as ``<img src=x onerror=...>`` is shown as text, never
as HTML.
"""

import math
import re
import unicodedata

MAX_TEXT_CHARS = 20_000
KEPT_CONTROLS = {"\n", "\t"}
# Unicode categories dropped from typed text: control characters, and surrogates (half of a UTF-16 pair:
# not a character at all; a lone one cannot even be encoded as UTF-8)
DROPPED = {"Cc": "control character", "Cs": "lone surrogate"}
SEED_RANGE = (0, 2**32 - 1)  # what the Seed box allows (torch.Generator takes any 64-bit value; this is plenty)


class InputProblem(ValueError):
    """Something the user can fix. The message (Markdown) says what was wrong and what is allowed."""


def kind_of(value) -> str:
    """'a list', 'a number', 'nothing': how a message names what arrived."""
    if value is None:
        return "nothing"
    names = {bool: "true/false", str: "a text", list: "a list", dict: "a dictionary", tuple: "a list"}
    return names.get(type(value), "a number" if isinstance(value, (int, float)) else f"a {type(value).__name__}")


def _drop_unprintable(text: str) -> tuple[str, dict[str, int]]:
    dropped: dict[str, int] = {}
    kept = []
    for c in text:
        category = unicodedata.category(c)
        if category in DROPPED and c not in KEPT_CONTROLS:
            dropped[category] = dropped.get(category, 0) + 1
        else:
            kept.append(c)
    return "".join(kept), dropped


def echo(value, limit: int = 80) -> str:
    """A user's value, safe to put in a Markdown message: as a code span (shown literally: no HTML, no
    Markdown), with unprintable characters dropped, newlines shown as ↵, cut to ``limit`` characters."""
    text = value if isinstance(value, str) else repr(value)
    text, _ = _drop_unprintable(text.replace("\r\n", "\n"))
    text = text.replace("\n", "↵").replace("\t", " ")
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    if not text:
        return "nothing (an empty text)"
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text[0] == "`" or text[-1] == "`" else ""  # CommonMark strips one space each side
    return f"{fence}{pad}{text}{pad}{fence}"


def error_text(error: Exception) -> str:
    """'TypeError: ...' for a message, as a code span; an OSError by its reason only (its text names server paths)."""
    detail = error.strerror or type(error).__name__ if isinstance(error, OSError) else str(error)
    return echo(f"{type(error).__name__}: {detail}", limit=300)


def clean_text(text, max_chars: int = MAX_TEXT_CHARS) -> tuple[str, list[str]]:
    """Text as a model can read it: control characters (but newlines and tabs) and lone surrogates dropped,
    cut to ``max_chars``; notices say what was done. Anything but text (or nothing) is an InputProblem."""
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise InputProblem(f"Expected text in this box, got {kind_of(text)}.")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    kept, dropped = _drop_unprintable(text)
    notices = []
    if dropped:
        counts = " and ".join(f"{n} {DROPPED[category]}(s)" for category, n in sorted(dropped.items()))
        notices.append(f"Removed {counts} from the input.")
    if len(kept) > max_chars:
        notices.append(f"The input was cut to its first {max_chars:,} characters.")
        kept = kept[:max_chars]
    return kept, notices


def require_text(text, what: str = "a prompt") -> tuple[str, list[str]]:
    """``clean_text``, and an InputProblem when nothing is left."""
    cleaned, notices = clean_text(text)
    if not cleaned.strip():
        after = " (after removing characters that are not text)" if isinstance(text, str) and text.strip() else ""
        raise InputProblem(f"Type {what} first: the box is empty{after}.")
    return cleaned, notices


def _as_float(value) -> float | None:
    """A finite float from a number or numeric text; None for anything else (NaN and infinity included)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except (ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _as_integer(value) -> int | None:
    """An int from an int (any size), an integral finite float or numeric text; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    as_float = _as_float(value)
    return int(as_float) if as_float is not None and as_float.is_integer() else None


def number(value, what: str, allowed: str) -> float:
    """A finite number, or an InputProblem naming the field and what it allows."""
    result = _as_float(value)
    if result is None:
        raise InputProblem(f"{what} must be a number ({allowed}); got {echo(value)} ({kind_of(value)}).")
    return result


def whole_number(value, what: str, low: int, high: int) -> int:
    """An integer in [low, high], from an int, an integral float or numeric text; else an InputProblem."""
    result = _as_integer(value)
    if result is None or not low <= result <= high:
        raise InputProblem(f"{what} must be a whole number from {low:,} to {high:,}; got {echo(value)}.")
    return result


def count(value, what: str, low: int, high: int, default: int | None = None) -> tuple[int, list[str]]:
    """A whole number kept in [low, high], with a notice when it was moved there; text that is not a
    number is an InputProblem (``default`` stands in for nothing at all, where given)."""
    if value is None and default is not None:
        return default, []
    result = _as_integer(value)
    if result is None:
        raise InputProblem(f"{what} must be a whole number from {low:,} to {high:,}; got {echo(value)}.")
    if result < low:
        return low, [f"{what} was {result:,}; using {low:,}, the least allowed."]
    if result > high:
        return high, [f"{what} {result:,} is above the limit {high:,}; using {high:,}."]
    return result, []


def model_name(value) -> str:
    """A model name as typed or picked: text, or an InputProblem (a list or a dictionary is not a name)."""
    if not isinstance(value, str) or not value.strip():
        example = "such as 'shakespeare-main'"
        raise InputProblem(f"Pick a model: its name is a text {example}; got {kind_of(value)}"
                           + (f" ({echo(value)})." if value not in (None, "") else "."))
    return value.strip()


def index(value, size: int, what: str) -> tuple[int, list[str]]:
    """An index into ``size`` things (a layer, a head), kept in range with a notice saying what exists."""
    allowed = f"{what}s 0 to {size - 1}" if size > 1 else f"only {what} 0"
    result = _as_integer(value)
    if result is None:
        return 0, [f"{what.capitalize()} {echo(value)} is not a whole number (this model has {allowed}); showing {what} 0."]
    if not 0 <= result < size:
        kept = min(max(result, 0), size - 1)
        return kept, [f"{what.capitalize()} {result:,} does not exist (this model has {allowed}); showing {what} {kept}."]
    return result, []


def pick(value, size: int, what: str) -> int:
    """An index into ``size`` things (a layer, a head, a token) from a client, -1 meaning the last; anything
    else out of range is an InputProblem saying what exists (the step-by-step views follow exactly one)."""
    result = whole_number(value, f"{what.capitalize()} (−1 for the last)", -1, size - 1)
    return size - 1 if result == -1 else result
