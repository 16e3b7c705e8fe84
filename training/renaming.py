"""Invented names for the Folio pairs: teach folio-to-modern to copy a name it has never seen.

The test plays are held out, so their people and places are names the model never read: the shipped model
turned "Decius" into "De maiden" and "Murrellus" into "murderer". A name the modern edition keeps as the
Folio spells it should be copied letter for letter. ``NameSwapper`` rewrites a training pair so that each
such name is replaced, on both sides, by the same invented one; a model that sees enough of these learns
to copy the letters in front of it rather than to recall a name it knows.

A *copied name* is a word, not the first of its line, that starts with a capital, has at least three
letters, appears unchanged in the modern line, and never appears in lower case on the modern side of the
training pairs (so "Lord", "What" and "Page" are not names here, while "Caesar" and "Rome" are). Invented
names are built from plain Latin-looking syllables without u/v or i/j, the letters Folio spelling swaps,
so copying them never contradicts a spelling rule.
"""

import re

import torch

_WORD = re.compile(r"[A-Za-z]+")
_ONSETS = ("b", "c", "d", "f", "g", "l", "m", "n", "p", "r", "s", "t", "br", "cl", "gr", "st", "tr", "th")
_VOWELS = ("a", "e", "i", "o")
_ENDINGS = ("", "s", "n", "us", "o", "a", "es", "ia", "an", "ius")


def lowercase_words(lines) -> set[str]:
    """Every word that appears in lower case in ``lines``: the words that are not names."""
    return {word for line in lines for word in _WORD.findall(line) if word.islower()}


def copied_names(folio: str, modern: str, common: set[str]) -> list[str]:
    """The names in a pair that the modern line keeps as the Folio spells them (see the module docstring)."""
    modern_words = set(_WORD.findall(modern))
    names = [word for word in _WORD.findall(folio)[1:]
             if word[0].isupper() and len(word) >= 3 and word in modern_words and word.lower() not in common]
    return list(dict.fromkeys(names))


def invented_name(generator: torch.Generator) -> str:
    """Two or three syllables and an ending, capitalised: "Gresan", "Tolimius", "Clabo"."""
    def pick(options):
        return options[int(torch.randint(len(options), (), generator=generator))]

    syllables = 2 + int(torch.randint(2, (), generator=generator))
    name = "".join(pick(_ONSETS) + pick(_VOWELS) for _ in range(syllables)) + pick(_ENDINGS)
    return name.capitalize()


class NameSwapper:
    """Replace the copied names of a share of the pairs by invented ones, the same on both sides.

    ``share`` is the probability that a pair with copied names has them replaced on a read (each read draws
    anew, so a pair is seen with its real names too). ``common`` is ``lowercase_words`` of the modern side of
    the training pairs."""

    def __init__(self, share: float, common: set[str], seed: int = 0):
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"the renamed share of pairs must be between 0 and 1, got {share}")
        self.share, self.common = share, common
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, folio: str, modern: str) -> tuple[str, str]:
        names = copied_names(folio, modern, self.common)
        if not names or float(torch.rand((), generator=self.generator)) >= self.share:
            return folio, modern
        for name in names:
            new = invented_name(self.generator)
            pattern = re.compile(rf"\b{name}\b")
            folio, modern = pattern.sub(new, folio), pattern.sub(new, modern)
        return folio, modern
