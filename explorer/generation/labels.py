"""How a token is written on screen, the same in every view and for every tokenizer the app opens (byte-level BPE:
GPT-2, Llama 3, Qwen2, Pythia, ours; SentencePiece with byte fallback: Llama 2, Mistral), and a label a user types
read back as the text it stands for.

A label is the text the token adds after other text (``token_texts``; a continuation's text, ``text_after``): a
word's leading space kept, which a SentencePiece decoder drops from a token decoded alone; the bytes of a character
split across tokens as ⟨c3⟩, since alone they decode to �. Every character that would draw nothing is marked
(``visible``): a space ␣, a line break ↵, a tab ⇥, any other control, format or space character by its name, ‹CR›,
‹ZWSP›, or its code point, ‹U+2066›: none of them can be read as a character the token holds (a '\\r' could: a
backslash and an r). A token that starts with an accent split from its letter is drawn on a dotted circle, ◌́
(``label_of``).
"""

import re
import unicodedata

from transformers.convert_slow_tokenizer import bytes_to_unicode

SPACE, LINE_BREAK, TAB = "␣", "↵", "⇥"
SHOWN_AS = {" ": SPACE, "\n": LINE_BREAK, "\t": TAB}
C0 = ("NUL SOH STX ETX EOT ENQ ACK BEL BS HT LF VT FF CR SO SI DLE DC1 DC2 DC3 DC4 NAK SYN ETB CAN EM SUB ESC FS GS "
      "RS US").split()  # ASCII's names of its control characters, 0 to 31 (a tab and a line break are drawn instead)
NAMED = {**{chr(code): name for code, name in enumerate(C0)}, "\x7f": "DEL", "\xa0": "NBSP", "\xad": "SHY",
         "\u200b": "ZWSP", "\u200c": "ZWNJ", "\u200d": "ZWJ", "\u2028": "LS", "\u2029": "PS",
         "\ufeff": "BOM"}  # short names, where a character that draws nothing has one a text is likely to hold
UNSEEN = ("Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp")  # Unicode categories that draw nothing, or no agreed glyph
DOTTED_CIRCLE, COMBINING = "◌", ("Mn", "Me")  # a mark that combines with the character before it, shown alone
MARKED = re.compile(r"‹([A-Z][A-Z0-9]*|U\+[0-9A-F]{4,6})›")
STAND_IN = bytes_to_unicode()  # byte -> byte-level BPE's printable stand-in for it (Ġ for a space)
BYTE_OF = {char: byte for byte, char in STAND_IN.items()}
BYTE_MARK = re.compile(r"⟨([0-9a-f]{2})⟩")  # one byte of a character split across tokens, as ``shown_bytes`` writes it
BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # SentencePiece's piece for one byte
TEXT_MARKS = f"{LINE_BREAK} marks a line break, {SPACE} a space a box would hide"  # a sample's marks (ui.events)
LABEL_KEY = (f"Tokens are labelled as the model reads them: {SPACE} is a space, {LINE_BREAK} a line break, {TAB} a "
             "tab, ‹CR› or ‹U+2066› a character that draws nothing, by its name or code point, and ⟨c3⟩ one byte of "
             "a character the tokenizer split across tokens.")


def visible(char: str) -> str:
    """``char`` as a label draws it: a space, line break or tab as ``SHOWN_AS``; any other character that draws
    nothing as ‹its name› (``NAMED``) or ‹U+code point›, marks every font has; else itself."""
    if char in SHOWN_AS:
        return SHOWN_AS[char]
    if unicodedata.category(char) in UNSEEN:
        return f"‹{NAMED.get(char, f'U+{ord(char):04X}')}›"
    return char


def typed(label: str) -> str:
    """The text a label a user typed stands for: ``label_of``'s marks read back (␣ a space, ‹CR› a carriage
    return, ‹U+2066› that code point, ◌ before a combining mark); other characters as typed."""
    names = {name: char for char, name in NAMED.items()}

    def char_of(mark: re.Match) -> str:
        name = mark.group(1)
        if name.startswith("U+"):
            point = int(name[2:], 16)
            return chr(point) if point <= 0x10FFFF and not 0xD800 <= point <= 0xDFFF else mark.group()  # no surrogate
        return names.get(name, mark.group())

    text = MARKED.sub(char_of, label)
    if text[:1] == DOTTED_CIRCLE and unicodedata.category(text[1:2] or " ") in COMBINING:
        text = text[1:]
    return text.translate({ord(mark): char for char, mark in SHOWN_AS.items()})


def typed_bytes(label: str) -> bytes:
    """The bytes a label stands for: ``typed``'s text in UTF-8, each ⟨c3⟩ the byte it names."""
    parts = BYTE_MARK.split(label)  # text, byte, text, byte, ..., text
    return b"".join(bytes([int(part, 16)]) if k % 2 else typed(part).encode("utf-8") for k, part in enumerate(parts))


def labelled(tokenizer, label: str) -> int | None:
    """The token whose label (``token_labels``) is ``label`` (its marks or the characters they stand for), looked up
    by the pieces it could be, in this order: byte-level BPE's stand-ins, the text itself (a special token),
    SentencePiece's ▁ for a space, then its byte fallback <0xC3>; None where no token has that label. A
    word-internal piece, which a tokenizer never gives for a typed text, is found too."""
    data = typed_bytes(label)
    text = data.decode("utf-8", "replace")
    pieces = ["".join(STAND_IN[b] for b in data), text, text.replace(" ", "▁")]
    pieces += [f"<0x{data[0]:02X}>"] if len(data) == 1 else []
    wanted = label_of(typed(label))
    for piece in dict.fromkeys(pieces):
        token_id = tokenizer.convert_tokens_to_ids(piece)
        if isinstance(token_id, int) and tokenizer.convert_ids_to_tokens(token_id) == piece \
                and token_labels(tokenizer, [token_id])[0] == wanted:
            return token_id
    return None


def shown_bytes(data: bytes) -> str:
    """Bytes as text: whole UTF-8 characters as themselves, each byte of an incomplete one as ⟨c3⟩."""
    text = data.decode("utf-8", "surrogateescape")  # a byte that is no whole character: U+DC00 + its value
    return "".join(f"⟨{ord(c) - 0xDC00:02x}⟩" if 0xDC80 <= ord(c) <= 0xDCFF else c for c in text)


def token_bytes(tokenizer, token_id: int) -> bytes | None:
    """The bytes one token stands for, read from its piece: SentencePiece's byte fallback <0xC3>, or byte-level
    BPE's stand-ins mapped back (Ġ a space); None for another piece."""
    piece = tokenizer.convert_ids_to_tokens(token_id)
    byte = BYTE_FALLBACK.fullmatch(piece or "")
    if byte:
        return bytes([int(byte.group(1), 16)])
    if piece and all(c in BYTE_OF for c in piece):
        return bytes(BYTE_OF[c] for c in piece)
    return None


def text_after(tokenizer, previous: int, ids, **decode_kwargs) -> str:
    """The text tokens ``ids`` add after a text whose last token is ``previous``: decoded after it and cut from it.
    Decoded alone they may read otherwise: a SentencePiece decoder drops the space a text starts with (▁the alone
    reads 'the', after 'a' ' the'), so a continuation decoded alone would lose the space between it and its prompt."""
    head = tokenizer.decode([int(previous)], **decode_kwargs)
    whole = tokenizer.decode([int(previous), *map(int, ids)], **decode_kwargs)
    return whole[len(head):] if whole.startswith(head) else tokenizer.decode(ids, **decode_kwargs)


def token_texts(tokenizer, ids) -> list[str]:
    """The text each token adds after other text (``text_after``, for many tokens at once). Decoded twice over,
    t t, its second copy is that text: a SentencePiece decoder strips the space that starts a text, not one inside
    it (t alone: 'the'; t t: 'the the').
    A token whose text holds �, a character split across tokens, is read from its bytes (``token_bytes``)."""
    ids = [int(i) for i in ids]
    alone = tokenizer.batch_decode([[i] for i in ids])
    twice = tokenizer.batch_decode([[i, i] for i in ids])
    texts = []
    for i, once, double in zip(ids, alone, twice):
        text = double[len(once):] if double.startswith(once) and len(double) > len(once) else once
        if "\ufffd" in text or not text:
            data = token_bytes(tokenizer, i)
            text = shown_bytes(data) if data is not None else tokenizer.convert_ids_to_tokens(i) or f"<{i}>"
        texts.append(text)
    return texts


def label_of(text: str) -> str:
    """A token's text as its label: every character visible (``visible``); one that starts with a combining mark
    (an accent a tokenizer split from its letter) on a dotted circle, ◌́, as Unicode shows a mark alone, so that it
    does not sit on what is written before the label."""
    label = "".join(map(visible, text))
    return DOTTED_CIRCLE + label if label and unicodedata.category(label[0]) in COMBINING else label


def token_labels(tokenizer, ids) -> list[str]:
    """A readable label per token id: its text (``token_texts``) as ``label_of`` writes it."""
    return [label_of(text) for text in token_texts(tokenizer, ids)]
