"""What a live training job reads (``explorer.live_training``): one sequence of ``context_length`` tokens at a
time, drawn afresh on every read (seeded).

- ``shakespeare``: a random window of two plays (``SHAKESPEARE_EXCERPT``, made by ``python -m training.excerpt``);
- ``shakespeare-repeats``: the same, and in ``repeat_share`` of the sequences passages repeated (``repeat_runs``);
- ``random-repeats``: uniformly random tokens of a ``vocab_size`` vocabulary, runs repeated (``repeat_runs``);
- ``own-text``: random windows of the learner's text.

A repeated run is followed at once by its copy, and run lengths are drawn anew each time, so the offset between
a token and its copy varies (``checkpointing.in_context.repeat_runs``): only a head that finds the earlier
occurrence of the current token by its content (an induction head) predicts the copy; a head looking a fixed
distance back cannot.

Text is read with shakespeare-main's byte-level BPE tokenizer (4096 tokens); random tokens are their own ids.
"""

from functools import lru_cache
from pathlib import Path

import torch
from transformers import AutoTokenizer

from checkpointing.in_context import SPECIAL_IDS, repeat_runs
from checkpointing.paths import checkpoints_dir

from .inputs import InputProblem

SHAKESPEARE_EXCERPT = Path(__file__).with_name("shakespeare_excerpt.txt")
TOKENIZER_MODEL = "shakespeare-main"  # whose tokenizer reads text


@lru_cache(maxsize=1)
def shipped_tokenizer():
    return AutoTokenizer.from_pretrained(checkpoints_dir() / TOKENIZER_MODEL)


@lru_cache(maxsize=4)
def text_ids(text: str, tokenizer) -> torch.Tensor:
    return torch.tensor(tokenizer(text, add_special_tokens=False, verbose=False).input_ids, dtype=torch.long)


class LiveData(torch.utils.data.IterableDataset):
    """Endless sequences of ``context_length`` tokens, drawn as the module docstring says; seeded."""

    def __init__(self, settings, ids: torch.Tensor | None):
        self.settings, self.ids = settings, ids

    def __iter__(self):
        s = self.settings
        generator = torch.Generator().manual_seed(s.seed)
        while True:
            if s.data == "random-repeats":
                sequence = torch.randint(SPECIAL_IDS, s.vocab_size, (s.context_length,), generator=generator)
                sequence = repeat_runs(sequence, s.copy_share, generator)
            else:
                start = int(torch.randint(0, len(self.ids) - s.context_length + 1, (), generator=generator))
                sequence = self.ids[start: start + s.context_length]
                if s.data == "shakespeare-repeats" and float(torch.rand((), generator=generator)) < s.repeat_share:
                    sequence = repeat_runs(sequence, s.copy_share, generator)
            yield {"input_ids": sequence, "labels": sequence}


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
