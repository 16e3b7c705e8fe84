"""Copying from the context: the data that teaches it and the probes that measure it.

- ``repeat_runs``: a sequence read as runs, some followed at once by a copy of themselves, at offsets that vary.
- ``induction_probe``: random tokens r_0..r_{L-1}, then the same tokens again (1, 2L).
- ``induction_scores_from``: THE induction score (Olsson et al. 2022), the one definition every view and the
  training pipeline use: on that probe, the mean attention from each token of the second copy to the token after
  its first occurrence,

      score = mean over i = 0..L-1 of A[L + i, i + 1]

  An induction head scores near 1; a head spreading its weight evenly over the keys it may see about 1/T.
  ``induction_scores``: that score of every head of a model, on the probe (the standard score). A score measured
  otherwise calls these and says in its name how it differs (the live tab's
  ``least_induction_score_over_offsets``, the Attention heads tab's ``cached_induction_scores``).
- ``previous_token_scores_from``: mean over t = 2..T-1 of A[t, t-1] (from t = 2, where the previous token is not
  also the first one); a previous-token head, the first half of the induction circuit, scores near 1.
- ``repeated_passage_ratio``: on passages of real text each read twice in a row, the mean loss on the second copy
  over the mean loss on the first (every token of the second copy; the first copy's from token 1, as its first token
  has no context).
  A model that copies from its context predicts the second copy far better: the ratio falls well below 1.
"""

import numpy as np
import torch
import torch.nn.functional as F

THRESHOLD = 0.4  # a head is said to be of a type (an induction head, ...) when its score for that type reaches this
INDUCTION_LENGTH = 32  # random tokens in each half of the probe
MIN_RUN = 4  # the shortest run ``repeat_runs`` copies
SPECIAL_IDS = 3  # random tokens never take ids 0..2: the special tokens (pad, bos/eos) of every vocabulary we train


def repeat_runs(sequence: torch.Tensor, share: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """A copy of ``sequence`` read as consecutive runs, each of a length ℓ drawn anew from [4, n/2] (n the
    length; less near the end, where a run and its copy must fit); a run is followed by a copy of itself with
    probability q = share / (1 − share), so that about ``share`` of the tokens are copies. The offset of a copy is
    its run's length: it varies, so copying needs a head that finds the earlier occurrence by content (a head
    looking a fixed distance back fits one length only)."""
    if not 0 < share <= 0.5:
        raise ValueError(f"share must be in (0, 0.5]: at most every other token can be a copy; got {share}")
    n = len(sequence)
    q = share / (1 - share)
    out, i = sequence.clone(), 0
    while n - i >= 2 * MIN_RUN:  # room for a run and its copy
        run = int(torch.randint(MIN_RUN, min(n // 2, (n - i) // 2) + 1, (), generator=generator))
        if float(torch.rand((), generator=generator)) < q:
            out[i + run: i + 2 * run] = out[i: i + run]
            i += 2 * run
        else:
            i += run
    return out


def induction_probe(vocab_size: int, length: int = INDUCTION_LENGTH, seed: int = 0, skip: int = SPECIAL_IDS) -> torch.Tensor:
    """(1, 2 * length): ``length`` random token ids (seeded; never one of the first ``skip`` ids, the special
    tokens), then the same ids again."""
    generator = torch.Generator().manual_seed(seed)
    first = torch.randint(skip, vocab_size, (1, length), generator=generator)
    return torch.cat([first, first], dim=1)


def induction_scores_from(weights: np.ndarray, length: int) -> np.ndarray:
    """(..., heads): mean over i = 0..L-1 of A[L + i, i + 1], from weights (..., 2L, 2L) on ``induction_probe``."""
    i = np.arange(length)
    return weights[..., length + i, i + 1].mean(-1)


def induction_baseline(length: int) -> float:
    """What a head spreading its weight evenly over the keys it may see scores: mean over i of 1 / (L + i + 1)."""
    return float(np.mean(1.0 / (length + np.arange(length) + 1)))


def previous_token_scores_from(weights: np.ndarray) -> np.ndarray:
    """(..., heads): mean over t = 2..T-1 of A[t, t-1], from weights (..., T, T), T >= 3."""
    t = np.arange(2, weights.shape[-1])
    return weights[..., t, t - 1].mean(-1)


def attention_weights(model, ids: torch.Tensor) -> np.ndarray:
    """(layers, heads, T, T) float32: every self-attention head of a decoder-only model on ids (1, T)."""
    with torch.no_grad():
        out = model(ids, output_attentions=True, use_cache=False)
    return torch.stack([w[0] for w in out.attentions]).float().numpy()


def induction_scores(model, length: int = INDUCTION_LENGTH, seed: int = 0, skip: int = SPECIAL_IDS) -> np.ndarray:
    """(layers, heads): the standard induction score of every self-attention head of a decoder-only model, from one
    forward pass over ``induction_probe(vocab_size, length, seed, skip)``."""
    weights = attention_weights(model, induction_probe(model.config.vocab_size, length, seed, skip))
    return induction_scores_from(weights, length)


def head_scores(model, length: int = INDUCTION_LENGTH, seed: int = 0, skip: int = SPECIAL_IDS) -> dict[str, np.ndarray]:
    """{"induction", "previous token"}: (layers, heads) scores of every head, both from one forward pass over
    ``induction_probe`` (the induction score is ``induction_scores``'; previous-token over all of the probe: random
    tokens, so no head can lean on the text)."""
    weights = attention_weights(model, induction_probe(model.config.vocab_size, length, seed, skip))
    return {"induction": induction_scores_from(weights, length), "previous token": previous_token_scores_from(weights)}


def repeated_passage_losses(model, passages: list[list[int]]) -> tuple[float, float]:
    """(first, second): the mean loss (nats per token) on the first copy (its tokens 1.., the first has no context)
    and on the second copy (all its tokens), each passage read twice in a row. Passages of one length run as one batch."""
    lengths = {len(p) for p in passages}
    if len(lengths) != 1 or min(lengths) < 2:
        raise ValueError("passages must all have one length of at least 2 tokens")
    n = lengths.pop()
    ids = torch.tensor([p + p for p in passages], dtype=torch.long)
    with torch.no_grad():
        logits = model(ids, use_cache=False).logits[:, :-1].float()
    nll = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")  # nll[:, t-1]: token t
    return float(nll[:, : n - 1].mean()), float(nll[:, n - 1:].mean())


def repeated_passage_ratio(model, passages: list[list[int]]) -> float:
    """Loss on the second copy over loss on the first, each passage read twice in a row (module docstring);
    means over all passages' tokens."""
    first, second = repeated_passage_losses(model, passages)
    return second / first


def evenly_spaced_passages(ids, length: int, count: int) -> list[list[int]]:
    """``count`` passages of ``length`` token ids, evenly spaced through ``ids`` (neither end touched)."""
    if len(ids) < length * count:
        raise ValueError(f"{count} passages of {length} tokens need {length * count} tokens; the text has {len(ids)}")
    starts = np.linspace(0, len(ids) - length, count + 2, dtype=int)[1:-1]
    return [[int(t) for t in ids[s: s + length]] for s in starts]
