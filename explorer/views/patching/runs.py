"""Patched forward passes, batched: batch row i carries the patches of one cell (an ``index_put`` of the clean
values into that row), up to ``CHUNK_TOKENS`` tokens in one forward pass, ``WORKERS`` passes side by side.

A model is causal: a patch at position p changes nothing before p. So a batch starts at its rows' first patched
position: the positions before it run once, unbatched, and the batch reads on from their cached keys and values.
"""

from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import torch

from modeling import Site, record

from explorer.core.machine import CORES
from explorer.views.patching.grids import Patch

CHUNK_TOKENS = 4096  # batch rows x tokens in one patched forward pass: bounds memory (about 4 MB per d_model-wide
#                      tensor at d_model 256), and big enough that a forward pass is mostly arithmetic
WORKERS = CORES  # chunks run side by side, one a core: torch releases the GIL in its kernels


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
    """The entries of a (1, ...) site value that ``patch`` overwrites."""
    positions = list(patch.positions)
    return value[0, positions] if patch.head is None else value[0, patch.head, positions]


def changes_nothing(patches: list[Patch], clean, corrupted) -> bool:
    """Whether every patch writes exactly the value the corrupted run has there (a causal model's two runs agree
    before the first changed token, and the embeddings agree wherever the tokens do): its run IS the corrupted run."""
    return all(torch.equal(patched_part(clean[p.site], p), patched_part(corrupted[p.site], p)) for p in patches)


def _keep_nothing(site: Site) -> bool:
    return False


def first_position(patches: list[Patch], length: int) -> int:
    """The first position a row's patches touch (``length - 1`` for none: only the last position is read)."""
    return min((min(patch.positions) for patch in patches), default=length - 1)


def patched_logits(model, ids: torch.Tensor, batch: list[list[Patch]], clean, start: int = 0) -> torch.Tensor:
    """(len(batch), vocab) last-position logits of ``ids`` (T,), batch row i run with the patches ``batch[i]``
    (an empty list: the plain run), in the caller's own recording.

    The positions before ``start`` (no patch touches them) run once, unbatched, and the batch reads on from their
    cached keys and values."""
    past = None
    with torch.inference_mode():
        if start > 0:
            with record(keep=_keep_nothing):  # positions 0 .. start-1: the corrupted run's own, unpatched
                past = model(input_ids=ids[None, :start], use_cache=True).past_key_values
            past.batch_repeat_interleave(len(batch))
        with record(keep=_keep_nothing, edits=patch_edits(batch, clean, start)):
            out = model(input_ids=ids[None, start:].expand(len(batch), -1), past_key_values=past,
                        use_cache=past is not None, logits_to_keep=1)
    return out.logits[:, -1].float()


def chunks_of(patches: list[list[Patch]], length: int, chunk_tokens: int) -> list[tuple[int, list[int]]]:
    """(start, row indices) of each batch: rows in order of their first patched position, each batch at most
    ``chunk_tokens`` tokens (rows x tokens from its start; at least one row)."""
    order = sorted(range(len(patches)), key=lambda i: first_position(patches[i], length))
    chunks: list[tuple[int, list[int]]] = []
    for i in order:
        if chunks and (len(chunks[-1][1]) + 1) * (length - chunks[-1][0]) <= chunk_tokens:
            chunks[-1][1].append(i)
        else:
            chunks.append((first_position(patches[i], length), [i]))
    return chunks


def run_batched(model, ids: torch.Tensor, patches: list[list[Patch]], clean, progress=None,
                chunk_tokens: int = CHUNK_TOKENS, workers: int = WORKERS) -> torch.Tensor:
    """``patched_logits`` of every row of ``patches``, in the row order given: batched by ``chunks_of``, ``workers``
    batches at a time. ``progress(done, total)`` as batches finish."""
    chunks = chunks_of(patches, ids.shape[0], chunk_tokens)
    out = torch.empty(len(patches), model.config.vocab_size)

    def run(chunk: tuple[int, list[int]]) -> torch.Tensor:
        start, rows = chunk
        return patched_logits(model, ids, [patches[i] for i in rows], clean, start)

    with ThreadPoolExecutor(max(1, min(workers, len(chunks) or 1))) as pool:
        for done, ((_, rows), logits) in enumerate(zip(chunks, pool.map(run, chunks)), 1):
            out[rows] = logits
            if progress is not None:
                progress(done, len(chunks))
    return out
