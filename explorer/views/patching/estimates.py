"""Attribution patching (AtP: Nanda 2023; Kramár et al. 2024): every cell of every grid at once, to first order.

Patching a site's clean value a_c into the corrupted run (where it is a_r) changes the metric by about

    LD(a_c) - LD(a_r) ≈ (a_c - a_r) · dLD/da  at the corrupted run,

normalised as the exact grid is: restored ≈ that / (LD_clean - LD_corrupted). One clean forward pass and one
corrupted forward pass (both recorded already) and one corrupted backward pass give every cell of every grid: the
gradient at every site (``first_order.site_gradients``), dotted with the difference of the two runs' values over
the cell's positions (a head's cell: over its own slice). Where LD is linear in the patched value the estimate is
exact (the last layer's feed-forward output at the last position, in a model with no final norm); it misses what
is not linear: a softmax that saturates (a patch that moves an attention pattern a lot) and the norms' division by
the stream's size (AtP*, Kramár et al., recomputes the attention pattern for the patched keys and queries).
"""

from dataclasses import dataclass, field

import numpy as np

from explorer.generation.labels import token_labels
from explorer.views.first_order import site_gradients
from explorer.views.patching.analysis import PairedRuns, PatchGrid, logit_difference, paired_runs
from explorer.views.patching.grids import GRIDS, GridKind


@dataclass
class PatchingEstimate:
    """One ``PatchGrid`` per grid, its values the estimate (normalised as the exact grid's, the same rows and
    columns; no top tokens: no patched run was made); the texts' token labels as ``analysis.Patching`` has them."""

    grids: dict[str, PatchGrid]
    runs: PairedRuns = field(repr=False)
    tokens: list[str]
    corrupted_tokens: list[str]
    changed: list[int]

    def to_json(self) -> dict:
        return {name: [[round(float(v), 6) for v in row] for row in grid.values] for name, grid in self.grids.items()}


def cell_estimates(kind: GridKind, runs: PairedRuns, gradients: dict, n_layers: int) -> np.ndarray:
    """One grid's estimates: for each layer, (a_c - a_r) · dLD/da summed over d_model (a head's d_head) at each
    position; a head's row: summed over every position, and at the last one."""
    rows = []
    for layer in range(n_layers):
        site = kind.site(layer)
        delta = runs.clean.recording[site] - runs.corrupted.recording[site]
        product = (delta * gradients[site]).sum(-1)[0].double()  # (T,) or for heads (H, T)
        rows += [[float(head.sum()), float(head[-1])] for head in product] if kind.per_head else [product.tolist()]
    return np.array(rows) / (runs.clean_ld - runs.corrupted_ld)


def estimate_grids(model, runs: PairedRuns, tokens: list[str]) -> dict[str, PatchGrid]:
    """Every cell of the grids ``runs.names`` from one backward pass of the corrupted run."""
    kinds = [GRIDS[name] for name in runs.names]
    n_layers, n_heads = model.config.n_layers, model.config.n_heads
    sites = [kind.site(layer) for kind in kinds for layer in range(n_layers)]

    def metric(logits):
        return logit_difference(logits[0, -1].float(), runs.answer_id, runs.wrong_id)

    gradients = site_gradients(model, runs.corrupted.read.inputs, sites, metric, logits_to_keep=1)
    none = np.zeros((0,))
    return {kind.name: PatchGrid(kind.name, kind.title, kind.row_labels(n_layers, n_heads), kind.columns(tokens),
                                 cell_estimates(kind, runs, gradients, n_layers), none, none) for kind in kinds}


def attribution_patching(model, tokenizer, clean_text, corrupted_text, answer=None, wrong_answer=None,
                         grids=None) -> PatchingEstimate:
    """Every grid of ``analysis.activation_patching`` estimated to first order: the same checks, the same runs."""
    runs = paired_runs(model, tokenizer, clean_text, corrupted_text, answer, wrong_answer, grids)
    tokens = token_labels(tokenizer, runs.clean_ids)
    return PatchingEstimate(estimate_grids(model, runs, tokens), runs, tokens,
                            token_labels(tokenizer, runs.corrupted_ids), runs.changed)
