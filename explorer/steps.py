"""Attention, step by step, with the real numbers.

A ``Step`` is one line of the computation: its formula, its values (a vector or a matrix whose rows are
tokens) and, where the model computed the same quantity in its own forward pass, the largest difference
between the two. ``attend`` is the formula every step-by-step view uses:

    scores  = q k^T / sqrt(d_k)          (queries x keys)
    weights = softmax(scores + bias)     (bias: 0 where a key may be seen, very negative where it is masked,
                                          ALiBi's -slope * distance)
    output  = weights v
"""

import math
from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class Step:
    """One step: ``values`` is 1-D (one vector) or 2-D (rows labelled by ``rows``, e.g. one per token)."""

    title: str
    formula: str
    values: np.ndarray
    rows: list[str] | None = None
    columns: list[str] | None = None
    note: str = ""
    model_difference: float | None = None  # max |recomputed - the model's own|, where the model has it

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.values.shape)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None = None
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(scores q k^T / sqrt(d_k), weights softmax(scores + bias), output weights v); d_k = q.shape[-1]."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = (scores if bias is None else scores + bias).softmax(dim=-1)
    return scores, weights, weights @ v
