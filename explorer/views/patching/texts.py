"""The texts of activation patching: the default example and texts of its kind, and corrupted copies made from a
clean text (one word changed, or the first half's words swapped), each keeping the number of tokens.
"""

import re

from explorer.core.inputs import InputProblem, echo, require_text
from explorer.generation.symbols import SYMBOLS, reads_symbols, repeated_example


# The default example: on shakespeare-main the answer can only come from copying the earlier passage (the name,
# then " send"); the corrupted copy changes the name where it first appears (``change_one_word``). SPREAD_TEXTS are
# texts of the same kind beside it, so a learner sees whether the default is typical.
EXAMPLE_MODEL = "shakespeare-main"  # the model the default example's note (present.patching.DEFAULT_NOTE) describes
DEFAULT_CLEAN = "My lord, the duke of Norfolk sends word, and the earl of Warwick waits. Tell the duke of Norfolk"
DEFAULT_CORRUPTED = "My lord, the duke of Portia sends word, and the earl of Warwick waits. Tell the duke of Norfolk"
SPREAD_TEXTS = (
    "Enter Mistress Overdone and Pompey. Then enter Mistress Overdone",
    "The porter Quibble kept the gate; the cook kept the fire. At dawn the porter Quibble",
    "Old Capulet struck the table twice, and Tybalt drew his sword. Then old Capulet",
    "Here lies Dogberry, constable of the watch; there lies Verges, his friend. Here lies Dogberry",
    "Lord Polonius hid behind the arras while the prince spoke. Later Lord Polonius",
    "Malvolio wore yellow stockings for his lady; Feste laughed at him. Malvolio wore",
    "Sir John Falstaff drank sack at the tavern; Hal paid the bill. Sir John Falstaff",
)

# words a changed word may become: the first one not in the text that keeps the token count is taken
REPLACEMENTS = ("Lancaster", "Gloucester", "Norfolk", "Warwick", "Somerset", "Antonio", "Lorenzo", "Horatio", "Banquo",
                "Portia", "Viola", "Oberon", "sword", "crown", "horse", "letter", "rose", "gold", "ring", "glove", "dagger",
                "candle", "mirror", "apple", "tower", "river", "garden", "silver", "feather", "lantern", "window")
WORD = re.compile(r"[A-Za-z][A-Za-z']*")


def is_default_example(model_name, clean_text, corrupted_text) -> bool:
    """Whether the texts are the default example's and the model the one its note describes: the note shows then
    only (it would tell of the duke of Norfolk beside other texts, or of another model)."""
    return (model_name == EXAMPLE_MODEL and clean_text == DEFAULT_CLEAN and corrupted_text == DEFAULT_CORRUPTED)


def symbol_example(tokenizer) -> tuple[str, str, str] | None:
    """(clean, corrupted, what they are) for a model that reads symbols, one a token (a model Train one yourself
    trained on random tokens: ``generation.symbols``): the default example is words it cannot read. None for any
    other model."""
    return repeated_example(tokenizer) if reads_symbols(tokenizer) else None


def example_texts(tokenizer) -> tuple[str, str]:
    """The example a model can read: ``symbol_example`` for a model of symbols, else the default example; where this
    tokenizer reads "Portia" in more or fewer tokens than "Norfolk", the first Norfolk becomes a name it reads in as
    many (``change_one_word``), so that the two texts pair position by position."""
    found = symbol_example(tokenizer)
    if found:
        return found[:2]
    if _length(tokenizer, DEFAULT_CLEAN) == _length(tokenizer, DEFAULT_CORRUPTED):
        return DEFAULT_CLEAN, DEFAULT_CORRUPTED
    try:
        return DEFAULT_CLEAN, change_one_word(tokenizer, DEFAULT_CLEAN, "Norfolk")[0]
    except InputProblem:
        return DEFAULT_CLEAN, DEFAULT_CORRUPTED


def may_be_symbols(text) -> bool:
    """Whether ``text`` is written in symbols only (spaces aside): a cheap test before loading a model to compare."""
    return isinstance(text, str) and bool(text.strip()) and set(text) - {" "} <= set(SYMBOLS)


def _length(tokenizer, text: str) -> int:
    return len(tokenizer(text).input_ids)


def change_one_word(tokenizer, text, word=None) -> tuple[str, str]:
    """(the text with one word changed, what was done). The word: ``word`` (its first occurrence), or else the
    earlier copy of the text's last word (what an induction head would copy from), or else the first word. It
    becomes the first of ``REPLACEMENTS`` not in the text, else the first other word of the text, that keeps the
    token count (capitalised like it)."""
    text, _ = require_text(text, "a clean text")
    found = list(WORD.finditer(text))
    if not found:
        raise InputProblem("The text has no word to change (letters a to z); type a text with words.")
    if word:
        chosen = next((m for m in found if m.group() == str(word).strip()), None)
        if chosen is None:
            raise InputProblem(f"The word {echo(word, 30)} is not in the text.")
    else:
        earlier = [m for m in found[:-1] if m.group() == found[-1].group()]
        chosen = earlier[0] if earlier else found[0]
    original, length = chosen.group(), _length(tokenizer, text)
    others = [m.group() for m in found if m.group().lower() != original.lower()]
    fresh = [w for w in REPLACEMENTS if w.lower() not in text.lower()]
    for candidate in dict.fromkeys([*fresh, *others]):  # new words first, then the text's own
        candidate = candidate.capitalize() if original[0].isupper() else candidate.lower()
        if candidate == original:
            continue
        changed = text[:chosen.start()] + candidate + text[chosen.end():]
        if _length(tokenizer, changed) == length:
            return changed, f"changed {echo(original, 30)} to {echo(candidate, 30)} (same number of tokens)"
    raise InputProblem(f"No replacement for {echo(original, 30)} keeps the number of tokens; edit the corrupted text by hand.")


def swap_repeated_half(tokenizer, text) -> tuple[str, str]:
    """(the text with the words of its first half swapped in pairs, what was done): a text whose second half
    repeats its first keeps every word, but no longer says which word followed which, the information that
    copying the first half needs. The token count must stay the same."""
    text, _ = require_text(text, "a clean text")
    found = list(WORD.finditer(text))
    half = found[:len(found) // 2]
    if len(half) < 2:
        raise InputProblem("Swapping needs at least four words (two in the first half); type a longer text.")
    words = [m.group() for m in half]
    for i in range(0, len(words) - 1, 2):
        words[i], words[i + 1] = words[i + 1], words[i]
    pieces, last = [], 0
    for m, new in zip(half, words):
        pieces += [text[last:m.start()], new]
        last = m.end()
    changed = "".join(pieces) + text[last:]
    if _length(tokenizer, changed) != _length(tokenizer, text):
        raise InputProblem("Swapping the words of the first half changed the number of tokens; edit the corrupted "
                           "text by hand.")
    return changed, f"swapped the words of the first half in pairs ({len(half)} words)"
