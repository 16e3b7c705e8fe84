"""The grids of activation patching: what each one patches, its rows and columns, and one ``Patch`` per cell.

A grid is a table of patched runs. Its rows are layers (for "heads": layer x head); its columns are positions
(for "heads": "every position" and "the last position"). A cell patches one place: the grid's ``modeling.Site`` in
the row's layer, at the column's positions (for "heads": only the row's head).
"""

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from modeling import Site

from explorer.core.inputs import InputProblem, echo, kind_of
from explorer.views.forward_pass import ATTENTION_KINDS


class Patch(NamedTuple):
    """Overwrite ``site`` at ``positions`` with the clean run's value; for the site of a head's output ("heads")
    only head ``head``."""

    site: Site
    positions: tuple[int, ...]
    head: int | None = None


@dataclass(frozen=True)
class GridKind:
    """One kind of grid: what is patched (``site(layer)``), its rows, and whether its columns are positions."""

    name: str
    title: str
    site: Callable[[int], Site]
    per_head: bool = False  # rows are layer x head, columns are "every position" and "the last position"

    def rows(self, n_layers: int, n_heads: int) -> list[tuple[int, int | None]]:
        """(layer, head) of each row."""
        if self.per_head:
            return [(layer, head) for layer in range(n_layers) for head in range(n_heads)]
        return [(layer, None) for layer in range(n_layers)]

    def row_labels(self, n_layers: int, n_heads: int) -> list[str]:
        return [f"L{l}.H{h}" if h is not None else f"L{l}" for l, h in self.rows(n_layers, n_heads)]

    def columns(self, token_labels: list[str]) -> list[str]:
        """A column per position ('p:token'), or for heads "every position" and "last position"."""
        return list(HEAD_COLUMNS) if self.per_head else [f"{p}:{t}" for p, t in enumerate(token_labels)]

    def cells(self, n_layers: int, n_heads: int, length: int) -> list[list[Patch]]:
        """One patch per cell, row by row: a position per column, or for heads "every position" then "last"."""
        cells = []
        for layer, head in self.rows(n_layers, n_heads):
            site = self.site(layer)
            if self.per_head:
                cells += [[Patch(site, tuple(range(length)), head)], [Patch(site, (length - 1,), head)]]
            else:
                cells += [[Patch(site, (p,))] for p in range(length)]
        return cells


SELF_ATTENTION = ATTENTION_KINDS["self"]  # a decoder-only model's masked self-attention: patching reads no other
GRIDS = {
    "residual": GridKind("residual", "Residual stream entering each layer", lambda l: Site("decoder", l, None, "input")),
    "heads": GridKind("heads", "Each head's output (before W_O)", lambda l: SELF_ATTENTION.site(l, "heads"), per_head=True),
    "attention": GridKind("attention", "Attention output (all heads, after W_O)", lambda l: SELF_ATTENTION.site(l, "output")),
    "feed_forward": GridKind("feed_forward", "Feed-forward output", lambda l: Site("decoder", l, "ffn", "output")),
}
HEAD_COLUMNS = ("every position", "last position")


def parse_grids(grids) -> list[str]:
    """The grids asked for: a list of names or one text ('residual, heads'); None or empty: all of them."""
    allowed = f"any of {', '.join(GRIDS)}"
    if grids is None or grids == "" or grids == []:
        return list(GRIDS)
    if isinstance(grids, str):
        grids = [name for name in re.split(r"[,\s]+", grids.strip()) if name]
    if not isinstance(grids, (list, tuple)) or not all(isinstance(name, str) for name in grids):
        raise InputProblem(f"Grids: {allowed}; got {kind_of(grids)}.")
    unknown = [name for name in grids if name not in GRIDS]
    if unknown:
        raise InputProblem(f"Grids: {allowed}; {echo(unknown[0], 30)} is not one of them.")
    return [name for name in GRIDS if name in grids]


def grids_of(model) -> list[str]:
    """The grids ``model`` has: all of ``GRIDS``, but an attention-only model (``feed_forward="none"``) has no
    feed-forward output to patch."""
    return [name for name in GRIDS if not (model.config.feed_forward == "none" and name == "feed_forward")]


def model_grids(model, names: list[str]) -> tuple[list[str], list[str]]:
    """(the grids of ``names`` the model has, a notice for those left out). None of them left: an InputProblem."""
    has = grids_of(model)
    kept = [name for name in names if name in has]
    if kept == names:
        return names, []
    why = "this model is attention only (feed_forward='none'): its layers have no feed-forward sublayer to patch"
    if not kept:
        raise InputProblem(f"No feed-forward grid: {why}. Pick any of {', '.join(has)}.")
    return kept, [f"The feed-forward grid is left out: {why}."]
