"""First-order estimates: the gradient of a metric at named sites of one pass, and how an estimate agrees with the
exact answer it stands in for.

An estimate replaces a change of the metric M by its first-order term: changing a site's value a by Δ changes M by
about Δ · dM/da. The gradients come from one forward and one backward pass: ``record``'s edits add a zero probe
at each site (a + p, p = 0 requiring grad), so dM/dp = dM/da, the total derivative through everything after the
site; the model itself is untouched and its parameters get no gradient (``torch.autograd.grad`` asks for the
probes' only).
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from modeling import Site, record

SIGN_FLOOR = 0.05  # an exact value smaller than this (as a fraction of the grid's largest) has no sign to get wrong
TOP_CELLS = 10  # the exact answer's largest cells, which the estimate should rank among its own largest as many


def _keep_nothing(site: Site) -> bool:
    return False


def site_gradients(model, inputs: dict, sites: list[Site], metric: Callable[[torch.Tensor], torch.Tensor],
                   logits_to_keep: int = 0) -> dict[Site, torch.Tensor]:
    """dM/da at each site of ``sites`` in one pass of the model over ``inputs`` (its forward's keyword arguments);
    M = ``metric(logits)``, a scalar, of the pass's (1, T or logits_to_keep, vocab) logits."""
    probes: dict[Site, torch.Tensor] = {}

    def probe(site: Site) -> Callable[[torch.Tensor], torch.Tensor]:
        def edit(value: torch.Tensor) -> torch.Tensor:
            probes[site] = torch.zeros_like(value, requires_grad=True)
            return value + probes[site]
        return edit

    # inputs made under inference_mode (an encoder-decoder's generated rewrite) cannot be saved for backward: copies
    inputs = {name: value.clone() if isinstance(value, torch.Tensor) else value for name, value in inputs.items()}
    with torch.enable_grad(), record(keep=_keep_nothing, edits={site: probe(site) for site in sites}):
        value = metric(model(**inputs, use_cache=False, logits_to_keep=logits_to_keep).logits)
    return dict(zip(sites, torch.autograd.grad(value, [probes[site] for site in sites])))


@dataclass
class Agreement:
    """How an estimated grid agrees with the exact one (both the same shape).

    ``correlation``: Pearson's r over every cell (nan where either grid is constant). ``wrong_sign``: the cells
    whose exact value is at least ``SIGN_FLOOR`` of the largest |exact| and whose estimate has the other sign.
    ``off_rank``: of the exact grid's ``k`` largest cells by |value|, those the estimate does not rank among its own
    ``k`` largest. Cells are (row, column)."""

    correlation: float
    wrong_sign: list[tuple[int, int]]
    off_rank: list[tuple[int, int]]
    k: int

    def said_correlation(self) -> str:
        return "undefined (a constant grid)" if np.isnan(self.correlation) else f"{self.correlation:.3f}"

    def line(self) -> str:
        r = self.said_correlation()
        wrong = len(self.wrong_sign)
        return (f"correlation with the exact grid {r}; {wrong} cell{'' if wrong == 1 else 's'} of the wrong sign, "
                f"{len(self.off_rank)} of the exact top {self.k} ranked outside the estimate's top {self.k}")

    def legend(self) -> str:
        """The short form a map's title carries: the correlation, and what its two markers stand for, counted."""
        r = "undefined" if np.isnan(self.correlation) else f"{self.correlation:.3f}"
        return (f"correlation with the exact grid {r}; × wrong sign ({len(self.wrong_sign)}), ○ exact top {self.k} "
                f"not in the estimate's ({len(self.off_rank)})")

    def to_json(self) -> dict:
        return {"correlation": None if np.isnan(self.correlation) else round(self.correlation, 6),
                "wrong_sign": [list(c) for c in self.wrong_sign], "off_rank": [list(c) for c in self.off_rank],
                "top_cells": self.k}


def _cells(flat_indices, columns: int) -> list[tuple[int, int]]:
    return [(int(i) // columns, int(i) % columns) for i in flat_indices]


def agreement(estimate: np.ndarray, exact: np.ndarray, k: int = TOP_CELLS) -> Agreement:
    """``Agreement`` of an estimated grid with the exact one."""
    if estimate.shape != exact.shape:
        raise ValueError(f"an estimate of shape {estimate.shape} cannot be compared with an exact grid of {exact.shape}")
    e, x = estimate.ravel().astype(np.float64), exact.ravel().astype(np.float64)
    constant = e.std() == 0 or x.std() == 0
    correlation = float("nan") if constant else float(np.corrcoef(e, x)[0, 1])
    floor = SIGN_FLOOR * np.abs(x).max()
    wrong = np.flatnonzero((np.abs(x) >= floor) & (np.abs(x) > 0) & (np.sign(e) != np.sign(x)))
    k = min(k, x.size)
    exact_top = np.argsort(-np.abs(x), kind="stable")[:k]
    estimate_top = set(np.argsort(-np.abs(e), kind="stable")[:k].tolist())
    off = [i for i in exact_top if int(i) not in estimate_top]
    columns = exact.shape[1] if exact.ndim == 2 else exact.size
    return Agreement(correlation, _cells(wrong, columns), _cells(off, columns), k)
