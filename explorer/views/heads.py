"""What a head is for, where the evidence is clear: scores computed from its attention weights A[query, key].

Each score is the weight the head puts, on average over the queries, where its type says it looks:

    previous token    mean_t A[t, t-1]
    first-token sink  mean_t A[t, 0]
    same token        mean_t A[t, t]
    induction         on a sequence of random tokens r_0..r_{n-1} followed by the same tokens again, for a
                      query in the repeat at t = n + i: A[t, t - n + 1], the token that FOLLOWED the earlier
                      occurrence of the current token (what an induction head copies forward); the standard
                      score, ``checkpointing.in_context.induction_scores``, measured once per model
                      (``cached_induction_scores``)

The first three are measured on the user's text over queries t >= 2, where the first token, the previous
token and the token itself are three different keys (at t = 1 the previous token IS the first token). A
head is labelled with a type when its score reaches ``THRESHOLD``; ``baseline`` is what a head spreading
its weight evenly over the keys it may see would score, for scale.
"""

import weakref
from dataclasses import dataclass, field

import numpy as np

from checkpointing.in_context import INDUCTION_LENGTH, THRESHOLD, induction_baseline, induction_scores

from explorer.views.architecture import describe
from explorer.views.forward_pass import ATTENTION_KINDS

TYPES = ("previous token", "first-token sink", "same token", "induction")


@dataclass
class HeadTypes:
    """``scores[type]``: (layers, heads); a type is missing where it cannot be measured (``unmeasured`` says why)."""

    scores: dict[str, np.ndarray]
    baseline: dict[str, float]
    threshold: float = THRESHOLD
    unmeasured: dict[str, str] = field(default_factory=dict)
    kv_sharing: str = ""  # which query heads share each key/value head ("" when every head has its own)

    def labels(self, layer: int, head: int) -> list[tuple[str, float]]:
        """(type, score) for every type whose score reaches the threshold, strongest first."""
        found = [(kind, float(s[layer, head])) for kind, s in self.scores.items() if s[layer, head] >= self.threshold]
        return sorted(found, key=lambda pair: -pair[1])

    def strongest(self, kind: str) -> tuple[int, int, float]:
        """(layer, head, score) of the head scoring highest for ``kind``."""
        scores = self.scores[kind]
        layer, head = np.unravel_index(int(np.argmax(scores)), scores.shape)
        return int(layer), int(head), float(scores[layer, head])


def visible_keys(n_queries: int, n_keys: int, causal: bool) -> np.ndarray:
    """(queries, keys) bool: which keys each query may attend to."""
    if not causal:
        return np.ones((n_queries, n_keys), dtype=bool)
    return np.tril(np.ones((n_queries, n_keys), dtype=bool), k=n_keys - n_queries)


def pattern_scores(weights: np.ndarray, causal: bool) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """Previous-token, first-token-sink and same-token scores of every head, and the uniform baseline.

    weights: (layers, heads, T, T) self-attention weights of one text, T >= 3."""
    n = weights.shape[-1]
    if n < 3 or weights.shape[-2] != n:
        raise ValueError(f"head types need self-attention over at least 3 tokens; got {weights.shape[-2]} x {n}")
    t = np.arange(2, n)
    where = {"previous token": t - 1, "first-token sink": np.zeros_like(t), "same token": t}
    uniform = visible_keys(n, n, causal) / visible_keys(n, n, causal).sum(1, keepdims=True)
    scores = {kind: weights[..., t, keys].mean(-1) for kind, keys in where.items()}
    baseline = {kind: float(uniform[t, keys].mean()) for kind, keys in where.items()}
    return scores, baseline


_induction_of_model: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def cached_induction_scores(model, length: int = INDUCTION_LENGTH) -> tuple[np.ndarray, float]:
    """The standard induction scores of a decoder-only model's heads (``checkpointing.in_context.induction_scores``)
    and the uniform baseline, measured once per (model, length): the probe is the same for every text, and the shared
    models never change (a gradient step or live training works on a model of its own). A model with a position
    limit under 2 ``length`` is measured on the longest probe that fits."""
    known = _induction_of_model.setdefault(model, {})
    if length not in known:
        limit = model.config.position_limit
        fitted = min(length, limit // 2) if limit else length
        known[length] = induction_scores(model, fitted), induction_baseline(fitted)
    scores, baseline = known[length]
    return scores.copy(), baseline


def head_types(model, weights: np.ndarray, kind: str) -> HeadTypes:
    """Scores of every head of one attention kind ("self", "encoder", "decoder"; "cross" has no types).

    weights: (layers, heads, queries, keys) of the user's text, from the same model."""
    attention = ATTENTION_KINDS[kind]
    if attention.is_cross:
        raise ValueError("head types are defined for self-attention; cross-attention heads look at another "
                         "sequence (pick encoder or decoder self-attention)")
    causal = attention.causal
    if weights.shape[-1] < 3:
        short = f"needs a text of at least 3 tokens; this one has {weights.shape[-1]}"
        return HeadTypes({}, {}, THRESHOLD, {t: short for t in TYPES})
    sharing = describe(model).kv_sharing()
    scores, baseline = pattern_scores(weights, causal)
    unmeasured = {}
    if not model.config.is_encoder_decoder:
        scores["induction"], baseline["induction"] = cached_induction_scores(model)
    else:
        unmeasured["induction"] = "measured on decoder-only models (random tokens repeated)"
    return HeadTypes(scores, baseline, THRESHOLD, unmeasured, sharing)
