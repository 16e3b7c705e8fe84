"""Byte-level BPE tokenizer for the Shakespeare corpus, trained with the `tokenizers` library.

    python -m training.corpus       # prepares the corpus, then trains and saves data/tokenizer
    python -m training.tokenization [--force]  # (re)trains it alone and prints characters per token

Byte-level: every string maps to byte tokens first, so any text (emoji, control characters) encodes,
and decode(encode(x)) == x exactly (no normalisation, no added prefix space). Saved as a
``PreTrainedTokenizerFast`` so ``AutoTokenizer.from_pretrained`` loads it from any checkpoint folder.
"""

from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from .corpus import DATA_DIR, read_split

VOCAB_SIZE = 4096
END_OF_TEXT, PAD = "<|endoftext|>", "<pad>"


def tokenizer_dir(data_dir: Path = DATA_DIR) -> Path:
    return data_dir / "tokenizer"


def train_tokenizer(data_dir: Path = DATA_DIR, vocab_size: int = VOCAB_SIZE, force: bool = False) -> PreTrainedTokenizerFast:
    """Train on the train split only (validation/test plays stay unseen) and save; reuse if present."""
    out = tokenizer_dir(data_dir)
    if (out / "tokenizer.json").exists() and not force:
        return load_tokenizer(data_dir)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[END_OF_TEXT, PAD],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    text = read_split("train", data_dir)
    bpe.train_from_iterator((text[i:i + 100_000] for i in range(0, len(text), 100_000)), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, bos_token=END_OF_TEXT, eos_token=END_OF_TEXT, pad_token=PAD,
        clean_up_tokenization_spaces=False, model_max_length=1_000_000,
    )
    tokenizer.save_pretrained(out)
    return tokenizer


def load_tokenizer(data_dir: Path = DATA_DIR) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast.from_pretrained(tokenizer_dir(data_dir))


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--force", action="store_true", help="retrain even if data/tokenizer exists")
    args = parser.parse_args()
    tokenizer = train_tokenizer(args.data_dir, force=args.force)
    print(f"{tokenizer_dir(args.data_dir)}: {len(tokenizer)} tokens")
    for split in ("train", "validation", "test"):
        text = read_split(split, args.data_dir)
        ids = tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
        assert tokenizer.decode(ids) == text, f"{split}: decode(encode(text)) != text"
        print(f"{split:>10}: {len(text):9,d} chars, {len(ids):9,d} tokens, {len(text) / len(ids):.3f} chars/token, lossless")


if __name__ == "__main__":
    main()
