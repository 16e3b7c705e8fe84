"""What a model guesses as it reads a text, as Watch it learn shows it for a training run's snapshot and a Hub
revision alike: each next token it guessed right (its most likely next token), the tokens as cells of one monospace
line, and the repeat at the end of a text whose two copies the guesses are counted over.
"""

from explorer.generation.labels import token_texts, visible

MISSED = "·"  # where the model's guess of the next token was wrong


def guesses_line(cells: list[str], guessed: list[str]) -> str:
    """Two aligned lines: the text as the model reads it, one cell per token (``shown_tokens``), and
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



def shown_tokens(tokenizer, ids) -> list[str]:
    """The tokens as cells of the guesses: each one's text as it runs on after other text (``token_texts``), spaces
    kept and every other character that draws nothing marked as a label marks it (↵ a line break, ⟨c3⟩ one byte of
    a character split across tokens)."""
    return ["".join(c if c == " " else visible(c) for c in text) for text in token_texts(tokenizer, ids)]


def guessed_tokens(logits, ids, tokenizer) -> list[str]:
    """For each token of ``ids`` after the first: its text where the model's most likely next token (argmax of the
    logits (T, vocab) one position before) is that token, else "" (``token_texts``: a token's text is never
    empty, so a right guess always counts, a SentencePiece '▁' too)."""
    guesses, texts = logits[:-1].argmax(-1), token_texts(tokenizer, ids[1:])
    return [text if int(guess) == int(actual) else "" for guess, actual, text in zip(guesses, ids[1:], texts)]
