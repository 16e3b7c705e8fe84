"""What a model guesses as it reads a text, as Watch it learn shows it for a training run's snapshot and a Hub
revision alike: each next token it guessed right (its most likely next token), the tokens as cells of one monospace
line, and the repeat at the end of a text whose two copies the guesses are counted over.
"""

from transformers.convert_slow_tokenizer import bytes_to_unicode

MISSED = "·"  # where the model's guess of the next token was wrong


def guesses_line(cells: list[str], guessed: list[str]) -> str:
    """Two aligned lines: the text as the model reads it, one cell per token (a byte outside ASCII as ⟨hex⟩), and
    under each token from the second on, the token again where the model guessed it (``guessed_tokens``: its most
    likely next token), else a ·. Meant for a monospace font."""
    widths = [len(c) for c in cells]
    guesses = [" " * widths[0]] + [(c if g else MISSED).ljust(w) for c, g, w in zip(cells[1:], guessed, widths[1:])]
    return "".join(cells) + "\n" + "".join(guesses)


def guesses_right(guessed: list[str]) -> str:
    """How many of the text's next tokens the model guessed (``guessed_tokens``: "" where it missed)."""
    return f"Right on {sum(1 for token in guessed if token)} of the {len(guessed)} next tokens of your text."


def repeated_ending(ids: list[int], shortest: int = 4) -> tuple[int, int, int] | None:
    """(first, repeat, length): the longest ending ids[repeat:] of at least ``shortest`` tokens that also occurs
    earlier, at ids[first:first + length], not overlapping it; None when there is none."""
    n = len(ids)
    for repeat in range(1, n - shortest + 1):  # longest ending first
        length = n - repeat
        for first in range(0, repeat - length + 1):
            if ids[first:first + length] == ids[repeat:]:
                return first, repeat, length
    return None


BYTE_OF = {char: byte for byte, char in bytes_to_unicode().items()}  # byte-level BPE's printable stand-ins


def shown_token(tokenizer, token_id: int) -> str:
    """A token as one cell of the guesses: its text, a line break as ⏎; a part of a multi-byte character, which
    alone decodes to �, as its bytes in hex (⟨c3⟩)."""
    text = tokenizer.decode([token_id])
    if "\ufffd" in text:
        piece = tokenizer.convert_ids_to_tokens(token_id)
        if all(c in BYTE_OF for c in piece):
            return "".join(f"⟨{BYTE_OF[c]:02x}⟩" for c in piece)
    return text.replace("\n", "⏎")


def guessed_tokens(logits, ids, tokenizer) -> list[str]:
    """For each token of ``ids`` after the first: its text where the model's most likely next token (argmax of the
    logits (T, vocab) one position before) is that token, else ""."""
    guesses = logits[:-1].argmax(-1)
    return [tokenizer.decode([int(actual)]) if int(guess) == int(actual) else ""
            for guess, actual in zip(guesses, ids[1:])]
