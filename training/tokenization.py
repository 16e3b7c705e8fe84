"""Tokenizers for the Shakespeare corpus, built with the `tokenizers` library.

    python -m training.tokenization [--force]   # prepares the corpus if needed, (re)trains the BPE, reports chars/token

Two kinds, both byte-level: every string maps to bytes first, so any text (emoji, control characters)
encodes, and decode(encode(x)) == x exactly (no normalisation, no added prefix space).

- ``"bpe"``: byte-level BPE with 4096 tokens, trained on the train split only (the language models).
- ``"bytes"``: one token per byte, no merges (folio-to-modern): spelling changes are edits of single
  letters ("vnfold" -> "unfold"), which a model sees directly when every letter is its own token.

Both are wrapped as ``PreTrainedTokenizerFast`` and built from the tokenizer object itself, so the saved
tokenizer_config.json carries no machine-local loading flags.
"""

import argparse
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from checkpointing.paths import data_dir as default_data_dir

from .corpus import read_split

VOCAB_SIZE = 4096
END_OF_TEXT, PAD = "<|endoftext|>", "<pad>"
TOKENIZER_KINDS = ("bpe", "bytes")


def tokenizer_dir(data_dir: Path | None = None) -> Path:
    return (data_dir or default_data_dir()) / "tokenizer"


def wrap(backend: Tokenizer) -> PreTrainedTokenizerFast:
    """The transformers tokenizer around a `tokenizers` one: <|endoftext|> begins and ends, <pad> pads."""
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token=END_OF_TEXT, eos_token=END_OF_TEXT, pad_token=PAD,
        clean_up_tokenization_spaces=False, model_max_length=1_000_000,
    )


def _byte_level(model: models.Model) -> Tokenizer:
    backend = Tokenizer(model)
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    return backend


def train_tokenizer(data_dir: Path | None = None, vocab_size: int = VOCAB_SIZE, force: bool = False) -> PreTrainedTokenizerFast:
    """The BPE: trained on the train split only (validation/test plays stay unseen) and saved; reused if present."""
    out = tokenizer_dir(data_dir)
    if (out / "tokenizer.json").exists() and not force:
        return load_tokenizer(data_dir)
    backend = _byte_level(models.BPE())
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[END_OF_TEXT, PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    text = read_split("train", data_dir)
    backend.train_from_iterator((text[i:i + 100_000] for i in range(0, len(text), 100_000)), trainer=trainer)
    tokenizer = wrap(backend)
    tokenizer.save_pretrained(out)
    return tokenizer


def load_tokenizer(data_dir: Path | None = None) -> PreTrainedTokenizerFast:
    return wrap(Tokenizer.from_file(str(tokenizer_dir(data_dir) / "tokenizer.json")))


BYTE_VOCABULARY_SIZE = 2 + 256  # <|endoftext|>, <pad>, then the 256 byte symbols


def byte_tokenizer() -> PreTrainedTokenizerFast:
    """One token per byte (BYTE_VOCABULARY_SIZE tokens: <|endoftext|>, <pad>, the 256 bytes); nothing to train."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {token: i for i, token in enumerate([END_OF_TEXT, PAD, *alphabet])}
    return wrap(_byte_level(models.BPE(vocab=vocab, merges=[])))


def tokenizer_for(kind: str, data_dir: Path | None = None) -> PreTrainedTokenizerFast:
    if kind not in TOKENIZER_KINDS:
        raise ValueError(f"tokenizer must be one of {', '.join(TOKENIZER_KINDS)}; got {kind!r}")
    return train_tokenizer(data_dir) if kind == "bpe" else byte_tokenizer()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, help="default: the repository's data/ ($SCRATCH_DATA)")
    parser.add_argument("--force", action="store_true", help="retrain even if data/tokenizer exists")
    args = parser.parse_args()
    tokenizer = train_tokenizer(args.data_dir, force=args.force)
    print(f"{tokenizer_dir(args.data_dir)}: {len(tokenizer)} tokens")
    for split in ("train", "validation", "test"):
        text = read_split(split, args.data_dir)
        ids = tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
        if tokenizer.decode(ids) != text:
            raise RuntimeError(f"{split}: decode(encode(text)) != text; the tokenizer is not lossless")
        print(f"{split:>10}: {len(text):9,d} chars, {len(ids):9,d} tokens, {len(text) / len(ids):.3f} chars/token, lossless")


if __name__ == "__main__":
    main()
