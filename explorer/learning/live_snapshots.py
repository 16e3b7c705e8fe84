"""What a live training job shows of its model every few steps (``Snapshot``): the loss so far, a greedy sample, one
head's attention on a probe, and every head's induction score.

The induction score here is ``least_induction_score_over_offsets``: the standard score
(``checkpointing.in_context.induction_scores``: on random tokens r_0..r_{L-1} followed by the same tokens again, the
mean attention from each token of the second copy to the token after its first occurrence) taken at three lengths L
(``probe_lengths``), so three offsets; a head's score is the least of the three, so a head attending one fixed
distance back (right at one offset only) scores low. A head spreading its weight evenly scores about 1/T.
"""

from dataclasses import dataclass, field

import numpy as np
import torch
from transformers import GenerationConfig

from checkpointing.in_context import THRESHOLD, induction_probe, induction_scores

from explorer.generation.labels import text_after
from explorer.learning.live_data import SPECIAL_IDS, text_ids
from explorer.learning.live_settings import LiveSettings


def probe_lengths(context_length: int) -> tuple[int, ...]:
    """The lengths L of the induction probes: three, so three offsets, each probe (2L tokens) inside the context."""
    half = context_length // 2
    return tuple(sorted({max(4, half // 2), max(4, (3 * half) // 4), half}))


def least_induction_score_over_offsets(model, context_length: int) -> np.ndarray:
    """(layers, heads): each head's least standard induction score over the probes of ``probe_lengths`` (the i-th
    drawn with seed i); see the module docstring."""
    return np.min([induction_scores(model, length, seed=i, skip=SPECIAL_IDS)
                   for i, length in enumerate(probe_lengths(context_length))], axis=0)


def formed_head(induction, step: int) -> tuple[int, int, float, int] | None:
    """(layer, head, score, step) of the best head when its induction score reaches ``THRESHOLD`` (the label the
    app gives an induction head), else None: a job's status names the first step this is not None."""
    scores = np.asarray(induction, dtype=float)
    layer, head = divmod(int(scores.argmax()), scores.shape[1])
    return (layer, head, float(scores[layer, head]), step) if scores[layer, head] >= THRESHOLD else None


@dataclass
class Snapshot:
    """The model at one logged step. ``attention``: (2L, 2L) weights of head (layer, head) on the probe, random
    tokens of length L twice (the second copy starts at ``copy_start`` = L); ``induction``: (layers, heads)
    scores; ``logged_steps``/``losses``: the loss of every step so far, from step 0 (the fresh model on the first
    batch); ``watched``: why the plot shows this head; ``sample``: a ``Sample``."""

    step: int
    steps: int
    seconds: float
    logged_steps: list[int]
    losses: list[float]
    sample: "Sample"
    probe: list[int]
    layer: int
    head: int
    attention: list[list[float]]
    induction: list[list[float]]
    induction_baseline: float
    watched: str = ""

    @property
    def loss(self) -> float:
        return self.losses[-1] if self.losses else float("nan")

    @property
    def copy_start(self) -> int:
        return len(self.probe) // 2


def probe_ids(settings: LiveSettings, vocab_size: int) -> torch.Tensor:
    """(1, 2L): the fixed probe whose attention a snapshot shows, L the longest probe length."""
    return induction_probe(vocab_size, probe_lengths(settings.context_length)[-1], seed=0, skip=SPECIAL_IDS)


SAMPLE_PROMPT, SAMPLE_PROMPT_TOKENS = "ROMEO.\n", 8  # a text's sample continues its first 8 tokens (Shakespeare: these)


@dataclass
class Sample:
    """A greedy continuation: ``prompt`` what it read, ``tokens`` what it wrote, and for random tokens ``copy`` what
    a perfect copier writes (the probe's first copy, continued); each a list of token labels, or for a text its
    prompt and what it wrote each as one decoded text (a character split across tokens decodes whole)."""

    prompt: list[str]
    tokens: list[str]
    copy: list[str] = field(default_factory=list)

    @property
    def right(self) -> int:
        """How many written tokens are the copy's."""
        return sum(a == b for a, b in zip(self.tokens, self.copy))

    def __bool__(self) -> bool:
        return bool(self.tokens)


def sample(model, settings: LiveSettings, tokenizer) -> Sample:
    """A greedy continuation from the current weights: of the text's first tokens, or for random tokens of the
    probe's first copy and the first 3 tokens of its second (a copying model goes on with the copy)."""
    if settings.sample_tokens == 0:
        return Sample([], [])
    if tokenizer is None:
        probe = probe_ids(settings, model.config.vocab_size)
        prompt = probe[:, : probe.shape[1] // 2 + 3]
    else:
        prompt = text_ids(settings.text or SAMPLE_PROMPT, tokenizer)[:SAMPLE_PROMPT_TOKENS].unsqueeze(0)
    room = settings.context_length - prompt.shape[1]
    config = GenerationConfig(max_new_tokens=min(settings.sample_tokens, room), do_sample=False,
                              pad_token_id=1, eos_token_id=None, bos_token_id=0)
    with torch.no_grad():
        out = model.generate(prompt, generation_config=config)
    new = out[0, prompt.shape[1]:]
    if tokenizer is None:
        copy = probe[0, prompt.shape[1]:prompt.shape[1] + len(new)]
        return Sample([str(int(i)) for i in prompt[0]], [str(int(i)) for i in new], [str(int(i)) for i in copy])
    return Sample([tokenizer.decode(prompt[0])], [text_after(tokenizer, prompt[0, -1], new)])


SWITCH_MARGIN = 0.05  # the plot moves to another head only when its score passes the watched one's by this


def watched_head(scores: np.ndarray, current: tuple[int, int] | None) -> tuple[tuple[int, int], str]:
    """The head whose probe attention to show, and why: the best induction head, kept until another passes it
    by SWITCH_MARGIN (so the plot does not flicker between two close heads); a switch is said."""
    best = tuple(int(i) for i in np.unravel_index(int(np.argmax(scores)), scores.shape))
    if current is None:
        return best, f"the best induction head (score {scores[best]:.2f})"
    if best != current and scores[best] >= scores[current] + SWITCH_MARGIN:
        return best, (f"the best induction head (score {scores[best]:.2f}); it passed L{current[0]}.H{current[1]} "
                      f"({scores[current]:.2f}) at this step")
    if best != current:  # another leads, by less than the margin: the plot stays, and says so
        return current, (f"score {scores[current]:.2f}. L{best[0]}.H{best[1]} now scores a little higher "
                         f"({scores[best]:.2f}); the plot moves to another head only once it is ahead by "
                         f"{SWITCH_MARGIN:g} or more, so it does not flicker between two close heads")
    return current, f"the best induction head (score {scores[current]:.2f})"
