"""What a training run reads: blocks of the tokenized text for a language model, aligned (First Folio line ->
modern line) pairs for the spelling model, and the pair of sets (train, validation) a preset trains on."""

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import DataCollatorForSeq2Seq

from checkpointing.in_context import SPECIAL_IDS, repeat_runs
from checkpointing.paths import data_dir

from .corpus import plausible_pair, read_pairs, read_split
from .presets import TrainSettings
from .renaming import NameSwapper, lowercase_words


class TokenBlocks(torch.utils.data.Dataset):
    """Blocks of ``length`` tokens; each block is its own label sequence.

    Fixed (validation, and the encoding models' training): the non-overlapping blocks ids[i·L : (i+1)·L].
    Shifted (``shifted=True``): block i starts at i·L + s, with s drawn uniformly from [0, L) on every read,
    so each pass cuts the text at new places and no token always sits at position 0 (random crops, as
    nanoGPT samples its batches). One block fewer, so that every shift stays inside the text."""

    def __init__(self, ids, length: int, limit: int | None = None, shifted: bool = False):
        self.ids = torch.as_tensor(np.asarray(ids), dtype=torch.long)
        self.length, self.shifted = length, shifted
        count = len(self.ids) // length - (1 if shifted else 0)
        self.count = count if limit is None else min(count, limit)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> dict:
        if not 0 <= i < self.count:
            raise IndexError(f"block {i} of {self.count}")
        start = i * self.length + (int(torch.randint(self.length, ())) if self.shifted else 0)
        block = self.ids[start: start + self.length]
        return {"input_ids": block, "labels": block}


class WithRepeats(torch.utils.data.Dataset):
    """Blocks of text where some sequences teach copying: on each read, with probability ``random_share`` the
    block is replaced by random token ids (never the first ``skip``, the special tokens), else with probability
    ``passage_share`` the text is kept; either way such a sequence then has runs repeated at varying offsets,
    ``copy_share`` of its tokens copies (``repeat_runs``). The other reads are the plain text.

    ``mark``: each item also says whether it is the plain text (``plain``), for a loss that treats the two kinds
    apart (``training.distillation.distillation_loss``)."""

    def __init__(self, blocks: TokenBlocks, vocab_size: int, random_share: float, passage_share: float,
                 copy_share: float, skip: int = SPECIAL_IDS, mark: bool = False):
        self.blocks, self.vocab_size, self.skip, self.mark = blocks, vocab_size, skip, mark
        self.random_share, self.passage_share, self.copy_share = random_share, passage_share, copy_share

    def __len__(self) -> int:
        return len(self.blocks)

    def __getitem__(self, i: int) -> dict:
        block, plain = self.blocks[i]["input_ids"], False
        if float(torch.rand(())) < self.random_share:
            block = repeat_runs(torch.randint(self.skip, self.vocab_size, block.shape), self.copy_share)
        elif float(torch.rand(())) < self.passage_share:
            block = repeat_runs(block, self.copy_share)
        else:
            plain = True
        return {"input_ids": block, "labels": block} | ({"plain": torch.tensor(plain)} if self.mark else {})


def token_ids(split: str, tokenizer, root: Path | None = None) -> np.ndarray:
    """The token ids of a corpus split, computed once and cached in data/tokens/ under a key of the text
    and the tokenizer (so a changed corpus or tokenizer never reads stale ids). The cache file is
    written atomically: under torchrun every rank may compute it at the same time."""
    root = data_dir() if root is None else root
    text = read_split(split, root)
    key = hashlib.sha256(text.encode() + tokenizer.backend_tokenizer.to_str().encode()).hexdigest()[:16]
    cache = root / "tokens" / f"{split}-{key}.npy"
    if cache.exists():
        return np.load(cache)
    ids = np.asarray(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"], dtype=np.int32)
    cache.parent.mkdir(parents=True, exist_ok=True)
    partial = cache.with_name(f"{cache.stem}.{os.getpid()}.tmp.npy")
    np.save(partial, ids)
    os.replace(partial, cache)
    return ids


class SpellingPairs(torch.utils.data.Dataset):
    """(First Folio line -> modern line) pairs, each side cut to ``length`` tokens, target ends with EOS.

    With ``rename`` (a ``training.renaming.NameSwapper``), each read may replace the pair's copied names by
    invented ones, the same on both sides, and tokenizes the result anew."""

    def __init__(self, pairs: list[dict], tokenizer, length: int, limit: int | None = None, rename=None):
        self.pairs, self.tokenizer, self.length, self.rename = pairs[:limit], tokenizer, length, rename
        self.items = self.encode([p["folio"] for p in self.pairs], [p["modern"] for p in self.pairs])

    def encode(self, folio: list[str], modern: list[str]) -> list[dict]:
        sources = self.tokenizer(folio, truncation=True, max_length=self.length)["input_ids"]
        targets = self.tokenizer(modern, truncation=True, max_length=self.length - 1)["input_ids"]
        return [{"input_ids": s, "labels": t + [self.tokenizer.eos_token_id]} for s, t in zip(sources, targets)]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict:
        if self.rename is None:
            return self.items[i]
        pair = self.pairs[i]
        folio, modern = self.rename(pair["folio"], pair["modern"])
        if folio == pair["folio"]:
            return self.items[i]
        return self.encode([folio], [modern])[0]


@dataclass
class TrainingData:
    """The sets a run trains and validates on, the collator that batches them (None: the default one), and the
    token count of the train split (None for pairs, whose passes are counted in pairs)."""

    train: torch.utils.data.Dataset
    validation: torch.utils.data.Dataset
    collator: DataCollatorForSeq2Seq | None
    train_tokens: int | None

    def passes(self, tokens_seen: int, examples_seen: int) -> float:
        """Passes over the train split: tokens seen / its tokens, or for pairs examples seen / its pairs."""
        return tokens_seen / self.train_tokens if self.train_tokens else examples_seen / len(self.train)


def training_data(model, tokenizer, settings: TrainSettings, root: Path, train_limit: int | None,
                  seed: int) -> TrainingData:
    """A seq2seq model reads the plausible train pairs (names swapped in ``settings.renamed_share`` of reads),
    a language model blocks of ``settings.context_length`` tokens (some teaching copying where the settings say:
    ``WithRepeats``); validation reads ``settings.eval_examples`` plain blocks."""
    length = settings.context_length
    if model.config.is_encoder_decoder:
        pairs = [pair for pair in read_pairs("train", root) if plausible_pair(pair)]
        rename = (NameSwapper(settings.renamed_share, lowercase_words(p["modern"] for p in pairs), seed)
                  if settings.renamed_share else None)
        return TrainingData(SpellingPairs(pairs, tokenizer, length, train_limit, rename),
                            SpellingPairs(read_pairs("validation", root), tokenizer, length, settings.eval_examples),
                            DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100), None)
    ids = token_ids("train", tokenizer, root)
    train = TokenBlocks(ids, length, train_limit, shifted=settings.shifted_blocks)
    if settings.random_repeat_share or settings.passage_repeat_share:
        train = WithRepeats(train, len(tokenizer), settings.random_repeat_share, settings.passage_repeat_share,
                            settings.copy_share, mark=bool(settings.distill_weight))
    return TrainingData(train,
                        TokenBlocks(token_ids("validation", tokenizer, root), length, settings.eval_examples),
                        None, len(ids))
