"""What a live training job reads (``explorer.learning.train_live``): one sequence of ``context_length`` tokens at a
time, drawn afresh on every read (seeded).

- ``shakespeare``: a random window of two plays (``SHAKESPEARE_EXCERPT``, made by ``python -m training.excerpt``);
- ``shakespeare-repeats``: the same, and in ``repeat_share`` of the sequences passages repeated (``repeat_runs``);
- ``random-repeats``: uniformly random tokens of a ``vocab_size`` vocabulary, runs repeated (``repeat_runs``);
- ``own-text``: random windows of the learner's text.

``copies_only``: the loss counts only the copyable tokens (``copyable``), those an induction head predicts; the
others are labelled -100, the label the loss ignores (transformers' convention), so the curve is the loss on
the copies alone.

A repeated run is followed at once by its copy, and run lengths are drawn anew each time, so the offset between
a token and its copy varies (``checkpointing.in_context.repeat_runs``): only a head that finds the earlier
occurrence of the current token by its content (an induction head) predicts the copy; a head looking a fixed
distance back cannot.

Text is read with shakespeare-main's byte-level BPE tokenizer (4096 tokens); random tokens are their own ids.
"""

import itertools
from functools import lru_cache
from typing import Iterator
from pathlib import Path

import torch
from transformers import AutoTokenizer

from checkpointing.in_context import SPECIAL_IDS, repeat_runs
from checkpointing.paths import checkpoints_dir

from explorer.core.inputs import InputProblem

SHAKESPEARE_EXCERPT = Path(__file__).with_name("shakespeare_excerpt.txt")
TOKENIZER_MODEL = "shakespeare-main"  # whose tokenizer reads text


@lru_cache(maxsize=1)
def shipped_tokenizer():
    return AutoTokenizer.from_pretrained(checkpoints_dir() / TOKENIZER_MODEL)


@lru_cache(maxsize=4)
def text_ids(text: str, tokenizer) -> torch.Tensor:
    return torch.tensor(tokenizer(text, add_special_tokens=False, verbose=False).input_ids, dtype=torch.long)


IGNORED = -100  # a label the loss skips (transformers' ignore_index)


def copyable(sequences: torch.Tensor) -> torch.Tensor:
    """(..., T) bool: token t is what an induction head predicts there, the token that followed the latest earlier
    occurrence of token t−1 (False at t = 0 and where t−1 has no earlier occurrence). One batched computation."""
    n = sequences.shape[-1]
    earlier = (sequences[..., :, None] == sequences[..., None, :]) & torch.ones(n, n, dtype=torch.bool).tril(-1)
    latest = torch.where(earlier, torch.arange(n), -1).max(-1).values  # latest earlier occurrence of each token
    predicted = torch.where(latest >= 0, sequences.gather(-1, (latest + 1).clamp(max=n - 1)), -1)
    out = torch.zeros_like(sequences, dtype=torch.bool)
    out[..., 1:] = predicted[..., :-1] == sequences[..., 1:]
    return out


class LiveData:
    """Endless sequences of ``context_length`` tokens, drawn as the module docstring says; seeded. Iterating gives
    one sequence at a time; ``batches`` stacks them (and labels a whole batch in one computation)."""

    def __init__(self, settings, ids: torch.Tensor | None):
        self.settings, self.ids = settings, ids

    def sequences(self) -> Iterator[torch.Tensor]:
        s = self.settings
        generator = torch.Generator().manual_seed(s.seed)
        while True:
            if s.data == "random-repeats":
                sequence = torch.randint(SPECIAL_IDS, s.vocab_size, (s.context_length,), generator=generator)
                yield repeat_runs(sequence, s.copy_share, generator)
            else:
                start = int(torch.randint(0, len(self.ids) - s.context_length + 1, (), generator=generator))
                sequence = self.ids[start: start + s.context_length]
                if s.data == "shakespeare-repeats" and float(torch.rand((), generator=generator)) < s.repeat_share:
                    sequence = repeat_runs(sequence, s.copy_share, generator)
                yield sequence

    def labelled(self, input_ids: torch.Tensor) -> dict:
        """{"input_ids", "labels"}: the labels are the tokens, or with ``copies_only`` the copyable ones alone."""
        labels = input_ids
        if self.settings.copies_only:
            labels = torch.where(copyable(input_ids), input_ids, IGNORED)
        return {"input_ids": input_ids, "labels": labels}

    def __iter__(self) -> Iterator[dict]:
        return map(self.labelled, self.sequences())

    def batches(self) -> Iterator[dict]:
        """Endless batches of ``batch_size`` sequences: the same sequences, in the same order, as iterating gives."""
        sequences = self.sequences()
        while True:
            yield self.labelled(torch.stack(list(itertools.islice(sequences, self.settings.batch_size))))


def training_ids(settings, tokenizer) -> torch.Tensor | None:
    """The token ids text data is drawn from (None for random tokens); too short a text is an InputProblem."""
    if settings.data == "random-repeats":
        return None
    text = settings.text if settings.data == "own-text" else SHAKESPEARE_EXCERPT.read_text()
    ids = text_ids(text, tokenizer)
    if len(ids) < settings.context_length + 1:
        raise InputProblem(f"Your text is {len(ids)} tokens; training reads windows of {settings.context_length} "
                           f"tokens, so it needs at least {settings.context_length + 1} (a few hundred characters).")
    return ids
