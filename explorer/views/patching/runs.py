"""Patched forward passes, batched: batch row i carries the patches of one cell (an ``index_put`` of the clean
values into that row), rows with the same first patched layer side by side, ``WORKERS`` batches at a time.

A model is causal in time and in depth: a patch at layer l and position p changes nothing below layer l and
nothing before position p. So a batch runs from its rows' first patched layer (``forward_from``: the residual
stream entering it is the corrupted run's, recorded), at the positions from its rows' first patched position on;
the positions before read the corrupted run's own keys and values (a cache made from its recording). A patch that
writes at a position what the corrupted run already has there (a causal model's two runs agree before the first
changed token; the embeddings agree wherever the tokens do) is dropped: a cell left with none is not run.

Each batch's logits are summarised at once (``summarise``: the metric and the top tokens), so no (cells, vocab)
table is ever held.
"""

from collections import defaultdict
from collections.abc import Callable
from typing import NamedTuple

import torch
from transformers.cache_utils import DynamicCache

from modeling import Recording, Site, record

from explorer.core.machine import CORES, side_by_side
from explorer.views import vocabulary
from explorer.views.patching.grids import Patch

CHUNK_TOKENS = 4096  # batch rows x tokens in one patched forward pass: bounds memory (about 12 MB per d_model-wide
#                      tensor at GPT-2 small's 768), and big enough that a forward pass is mostly arithmetic
MERGE_POSITIONS = 6  # a row joins a batch that starts up to this many positions before its own first patch: the
#                      tokens it recomputes cost less than another pass over every layer's weights (a batch of a
#                      few rows reads each weight matrix once for few tokens)
WORKERS = CORES  # batches run side by side, one a core: torch releases the GIL in its kernels


class Batch(NamedTuple):
    """Rows (cell indices) run together from ``layer`` and ``position`` on."""

    layer: int
    position: int
    rows: list[int]

    def cost(self, n_layers: int, length: int) -> int:
        """Its work, in layer-tokens: rows x layers run x tokens run (the first batches, from the lowest layers, cost
        the most)."""
        return len(self.rows) * (n_layers - self.layer) * (length - self.position)


def _overwrite(clean: torch.Tensor, rows: list[int], heads: list[int | None], positions: list[int], start: int
               ) -> Callable:
    """An edit: value[row, position - start] = clean[0, position] for each (row, position) (for (B, H, T, d_head)
    head outputs value[row, head, position - start] = clean[0, head, position]); the other entries stay as they are.
    ``start``: the position of the value's first column (the pass reads the positions from ``start`` on)."""
    rows_t, positions_t = torch.tensor(rows), torch.tensor(positions)
    if heads[0] is None:
        index, source = (rows_t, positions_t - start), clean[0, positions_t]
    else:
        heads_t = torch.tensor(heads)
        index, source = (rows_t, heads_t, positions_t - start), clean[0, heads_t, positions_t]

    def edit(value: torch.Tensor) -> torch.Tensor:
        return value.index_put(index, source.to(value.dtype))

    return edit


def patch_edits(batch: list[list[Patch]], clean, start: int = 0) -> dict[Site, Callable]:
    """The edits of one batch: row i gets the patches ``batch[i]``; ``clean`` maps a site to its (1, ...) value;
    the pass reads the positions from ``start`` on."""
    by_site: dict[Site, tuple[list, list, list]] = defaultdict(lambda: ([], [], []))
    for row, patches in enumerate(batch):
        for patch in patches:
            if (patch.head is None) != (patch.site.name != "heads"):
                raise ValueError(f"a patch of {patch.site} needs a head exactly when its site is 'heads'")
            if min(patch.positions) < start:
                raise ValueError(f"a patch at position {min(patch.positions)} in a pass from position {start}")
            rows, heads, positions = by_site[patch.site]
            rows += [row] * len(patch.positions)
            heads += [patch.head] * len(patch.positions)
            positions += list(patch.positions)
    return {site: _overwrite(clean[site], *entries, start) for site, entries in by_site.items()}


def patched_part(value: torch.Tensor, patch: Patch) -> torch.Tensor:
    """The entries of a (1, ...) site value that ``patch`` overwrites: (positions, ...)."""
    positions = list(patch.positions)
    return value[0, positions] if patch.head is None else value[0, patch.head, positions]


def trimmed(patches: list[Patch], clean, corrupted) -> list[Patch]:
    """``patches`` without the positions where they write exactly what the corrupted run has there (a write that
    changes nothing); a patch left with no position is dropped. [] : the cell's run IS the corrupted run."""
    kept = []
    for patch in patches:
        same = (patched_part(clean[patch.site], patch) == patched_part(corrupted[patch.site], patch))
        differ = ~same.flatten(1).all(1)
        positions = tuple(p for p, d in zip(patch.positions, differ.tolist()) if d)
        if positions:
            kept.append(patch._replace(positions=positions))
    return kept


def changes_nothing(patches: list[Patch], clean, corrupted) -> bool:
    """Whether every patch writes exactly the value the corrupted run has there: its run IS the corrupted run."""
    return not trimmed(patches, clean, corrupted)


def _keep_nothing(site: Site) -> bool:
    return False


def first_position(patches: list[Patch], length: int) -> int:
    """The first position a row's patches touch (``length - 1`` for none: only the last position is read)."""
    return min((min(patch.positions) for patch in patches), default=length - 1)


def first_layer(patches: list[Patch], n_layers: int) -> int:
    """The first layer a row's patches touch (the last layer for none)."""
    return min((patch.site.layer for patch in patches), default=n_layers - 1)


def corrupted_cache(corrupted: Recording, config, stop: int, rows: int) -> DynamicCache | None:
    """The keys and values of the corrupted run's positions 0 .. stop-1 in every self-attention layer, as the model's
    own cache holds them (keys after RoPE's rotation; grouped-query attention's fewer key heads), for ``rows`` rows;
    None for ``stop`` 0."""
    if stop == 0:
        return None
    cache = DynamicCache(config=config)
    for layer in range(config.n_layers):
        key = corrupted.get("decoder", layer, "self", "key_rotated")
        key = corrupted["decoder", layer, "self", "key"] if key is None else key
        value = corrupted["decoder", layer, "self", "value"]
        cache.update(key[:, :, :stop].expand(rows, -1, -1, -1), value[:, :, :stop].expand(rows, -1, -1, -1), layer)
    return cache


def patched_logits(model, corrupted: Recording, batch: list[list[Patch]], clean, layer: int = 0, start: int = 0
                   ) -> torch.Tensor:
    """(len(batch), vocab) last-position logits of the corrupted run, batch row i with the patches ``batch[i]``
    (an empty list: the plain run), in the caller's own recording.

    The pass runs from ``layer`` on (``forward_from``: the residual stream entering it is the corrupted run's) at
    the positions from ``start`` on; the positions before read the corrupted run's keys and values. The LM head
    reads the last position, a chunk of the vocabulary at a time (``vocabulary.logits``)."""
    hidden = corrupted["decoder", layer, None, "input"][:, start:].expand(len(batch), -1, -1)
    past = corrupted_cache(corrupted, model.config, start, len(batch))
    with torch.inference_mode(), record(keep=_keep_nothing, edits=patch_edits(batch, clean, start)):
        out = model.model.forward_from(layer, hidden, past_key_values=past, use_cache=past is not None)
        return vocabulary.logits(out.last_hidden_state[:, -1], model.get_output_embeddings())


def batches_of(patches: list[list[Patch]], n_layers: int, length: int, chunk_tokens: int = CHUNK_TOKENS,
               merge: int = MERGE_POSITIONS) -> list[Batch]:
    """The batches: rows with the same first patched layer, in order of their first patched position; a row joins
    the batch before it when that starts at most ``merge`` positions before its own and stays within
    ``chunk_tokens`` (rows x tokens from its start; at least one row)."""
    def start(i):
        return first_layer(patches[i], n_layers), first_position(patches[i], length)

    batches: list[Batch] = []
    for i in sorted(range(len(patches)), key=start):
        layer, position = start(i)
        last = batches[-1] if batches else None
        if (last is not None and last.layer == layer and position - last.position <= merge
                and (len(last.rows) + 1) * (length - last.position) <= chunk_tokens):
            last.rows.append(i)
        else:
            batches.append(Batch(layer, position, [i]))
    return batches


def run_batched(model, corrupted: Recording, patches: list[list[Patch]], clean,
                summarise: Callable[[torch.Tensor], tuple[torch.Tensor, ...]], progress=None,
                chunk_tokens: int = CHUNK_TOKENS, workers: int = WORKERS) -> tuple[torch.Tensor, ...]:
    """``summarise`` of ``patched_logits`` of every row of ``patches``, in the row order given: each field of
    ``summarise((rows, vocab) logits)`` for every row. Batched by ``batches_of``, ``workers`` batches at a time;
    ``progress(done, total, work)`` as batches finish (``work``: the fraction of the work done, by ``Batch.cost``): an
    error it raises stops the batches not started."""
    length = corrupted["decoder", 0, None, "input"].shape[1]
    batches = batches_of(patches, model.config.n_layers, length, chunk_tokens)
    costs = [batch.cost(model.config.n_layers, length) for batch in batches]
    fields: list[torch.Tensor] | None = None

    def run(batch: Batch) -> tuple[torch.Tensor, ...]:
        rows = [patches[i] for i in batch.rows]
        return summarise(patched_logits(model, corrupted, rows, clean, batch.layer, batch.position))

    with side_by_side(run, batches, workers) as results:
        for done, (batch, parts) in enumerate(zip(batches, results), 1):
            if fields is None:
                fields = [torch.empty((len(patches), *p.shape[1:]), dtype=p.dtype) for p in parts]
            for out, part in zip(fields, parts):
                out[batch.rows] = part
            if progress is not None:
                progress(done, len(batches), sum(costs[:done]) / sum(costs))
    return tuple(fields or ())
