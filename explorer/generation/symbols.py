"""A tokenizer for a model trained on random tokens (Train one yourself's induction setting): one printable symbol per
token id, so every view can show its tokens and read a text typed in them; and texts that model can read.

Ids 0, 1, 2 are the special tokens of every vocabulary we train (``<s>``, also the end; ``<pad>``; ``<unk>``, for a
character outside the alphabet); id i ≥ 3 is ``SYMBOLS[i - 3]``: digits, then A-Z, a-z, then Latin, Greek and
Cyrillic letters, as many as the vocabulary needs (Train one yourself allows at most 512 ids). A text is read one
character a token; spaces and line breaks are skipped, so ``ABC ABC`` reads as six tokens.
"""

import random
import unicodedata

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

SPECIAL_TOKENS = ("<s>", "<pad>", "<unk>")  # ids 0, 1, 2 (checkpointing.in_context.SPECIAL_IDS)
MAX_VOCAB = 512
SYMBOLS = tuple(c for c in map(chr, range(0x30, 0x500)) if unicodedata.category(c) in ("Nd", "Lu", "Ll")
                and unicodedata.normalize("NFKC", c) == c)[:MAX_VOCAB - len(SPECIAL_TOKENS)]
EXAMPLE_LENGTH = 12  # symbols in the first copy of the example text


def symbol_tokenizer(vocab_size: int) -> PreTrainedTokenizerFast:
    """One symbol per token id for a vocabulary of ``vocab_size`` ids (3 special, then ``SYMBOLS``)."""
    if not len(SPECIAL_TOKENS) < vocab_size <= MAX_VOCAB:
        raise ValueError(f"a symbol vocabulary has {len(SPECIAL_TOKENS) + 1} to {MAX_VOCAB} ids; got {vocab_size}")
    vocab = {token: i for i, token in enumerate((*SPECIAL_TOKENS, *SYMBOLS[:vocab_size - len(SPECIAL_TOKENS)]))}
    reader = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    reader.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                    pre_tokenizers.Split(Regex("."), behavior="isolated")])
    reader.decoder = decoders.Fuse()  # symbols side by side, as typed
    return PreTrainedTokenizerFast(tokenizer_object=reader, bos_token="<s>", eos_token="<s>", pad_token="<pad>",
                                   unk_token="<unk>", model_max_length=10**6)


def reads_symbols(tokenizer) -> bool:
    """Whether ``tokenizer`` is a ``symbol_tokenizer`` (saved and loaded again, too): its vocabulary is exactly
    the special tokens and the first symbols."""
    vocab = tokenizer.get_vocab()
    size = len(vocab) - len(SPECIAL_TOKENS)
    return 0 < size <= len(SYMBOLS) and vocab == {t: i for i, t in enumerate((*SPECIAL_TOKENS, *SYMBOLS[:size]))}


def repeated_example(tokenizer, seed: int = 0) -> tuple[str, str, str]:
    """(clean, corrupted, what they are) for a symbol model, as it was trained: ``EXAMPLE_LENGTH`` random symbols,
    then the same again but its last one, so that the next token is the one after the earlier copy of the last
    (what an induction head predicts); the corrupted text changes that one in the first copy."""
    size = len(tokenizer.get_vocab()) - len(SPECIAL_TOKENS)
    letters = [s for s in SYMBOLS[:size] if s.isascii() and s.isalpha()]  # easiest to read, where there are enough
    pool = letters if len(letters) > EXAMPLE_LENGTH else list(SYMBOLS[:size])
    draw = random.Random(seed)
    first = draw.sample(pool, min(EXAMPLE_LENGTH, len(pool) - 1))
    clean = "".join(first) + " " + "".join(first[:-1])
    other = next(s for s in pool if s not in first)
    corrupted = "".join(first[:-1]) + other + " " + "".join(first[:-1])
    return clean, corrupted, (f"random symbols, then the same again but the last: the answer is {first[-1]}, the "
                              f"symbol after the earlier {first[-2]}; the corrupted text has {other} there")
