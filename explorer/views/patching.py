"""Activation patching: where does the information that decides an answer live?

Two texts of the same token length: a clean one, whose next token the model gets right, and a corrupted one that
differs in a few tokens. Run the corrupted text, but at ONE site (a layer's residual stream at one position, one
head's output, ...) write in the value that site had in the clean run. If the answer comes back, what the clean
run carried there was enough to decide it.

The metric is the logit difference at the last position, LD = logit(answer) - logit(wrong answer), normalised:

    patched = (LD_patched - LD_corrupted) / (LD_clean - LD_corrupted)

0 is the corrupted run, 1 the clean run. A patch is an edit of the request's own recording (``modeling.record``'s
``edits``): the shared model is never changed, and requests running at once never see each other's patches.
Patched runs are batched: batch row i carries patch i (an ``index_put`` of the clean values into that row), up to
``CHUNK_TOKENS`` tokens in one forward pass.
"""

import re
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch

from modeling import Site, record

from explorer.core.inputs import InputProblem, echo, kind_of, require_text
from explorer.core.machine import CORES
from explorer.views.forward_pass import recorded_pass
from explorer.generation.tokens import one_token, token_labels

MAX_TOKENS = 128  # tokens of each text: the residual grid is layers x T patched runs of T tokens each
CHUNK_TOKENS = 4096  # batch rows x tokens in one patched forward pass: bounds memory (about 4 MB per d_model-wide
#                      tensor at d_model 256), and big enough that a forward pass is mostly arithmetic
TOP_K = 5  # the next tokens shown for a clicked cell
WORKERS = CORES  # chunks run side by side, one a core: torch releases the GIL in its kernels


# The default example: on shakespeare-main the answer can only come from copying the earlier passage (the name,
# then " send"); the corrupted copy changes the name where it first appears (``change_one_word``). SPREAD_TEXTS are
# texts of the same kind beside it, so a learner sees whether the default is typical.
DEFAULT_CLEAN = "My lord, the duke of Norfolk sends word, and the earl of Warwick waits. Tell the duke of Norfolk"
DEFAULT_CORRUPTED = "My lord, the duke of Portia sends word, and the earl of Warwick waits. Tell the duke of Norfolk"
DEFAULT_NOTE = ("**The example.** The text ends by naming \"the duke of Norfolk\" a second time; the first time, "
                "\" sends\" came next. Only copying that earlier passage predicts \" send\", and the corrupted text names "
                "another duke where the first copy is. Press Patch and follow the information: from the earlier name, "
                "to the token after it, to the last position.")
SPREAD_TEXTS = (
    "Enter Mistress Overdone and Pompey. Then enter Mistress Overdone",
    "The porter Quibble kept the gate; the cook kept the fire. At dawn the porter Quibble",
    "Old Capulet struck the table twice, and Tybalt drew his sword. Then old Capulet",
    "Here lies Dogberry, constable of the watch; there lies Verges, his friend. Here lies Dogberry",
    "Lord Polonius hid behind the arras while the prince spoke. Later Lord Polonius",
    "Malvolio wore yellow stockings for his lady; Feste laughed at him. Malvolio wore",
    "Sir John Falstaff drank sack at the tavern; Hal paid the bill. Sir John Falstaff",
)

class Patch(NamedTuple):
    """Overwrite ``site`` at ``positions`` with the clean run's value; for a "heads" site only head ``head``."""

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


GRIDS = {
    "residual": GridKind("residual", "Residual stream entering each layer", lambda l: Site("decoder", l, None, "input")),
    "heads": GridKind("heads", "Each head's output (before W_O)", lambda l: Site("decoder", l, "self", "heads"), per_head=True),
    "attention": GridKind("attention", "Attention output (all heads, after W_O)", lambda l: Site("decoder", l, "self", "output")),
    "feed_forward": GridKind("feed_forward", "Feed-forward output", lambda l: Site("decoder", l, "ffn", "output")),
}
HEAD_COLUMNS = ("every position", "last position")


def parse_sites(sites) -> list[str]:
    """The grids asked for: a list of names or one text ('residual, heads'); None or empty: all of them."""
    allowed = f"any of {', '.join(GRIDS)}"
    if sites is None or sites == "" or sites == []:
        return list(GRIDS)
    if isinstance(sites, str):
        sites = [s for s in re.split(r"[,\s]+", sites.strip()) if s]
    if not isinstance(sites, (list, tuple)) or not all(isinstance(s, str) for s in sites):
        raise InputProblem(f"Sites: {allowed}; got {kind_of(sites)}.")
    unknown = [s for s in sites if s not in GRIDS]
    if unknown:
        raise InputProblem(f"Sites: {allowed}; {echo(unknown[0], 30)} is not one of them.")
    return [name for name in GRIDS if name in sites]


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


def text_ids(tokenizer, text, what: str, limit: int) -> tuple[str, torch.Tensor]:
    """(the cleaned text, its (T,) ids as the app feeds them); empty or over ``limit`` tokens is an InputProblem."""
    cleaned, _ = require_text(text, f"a {what}")
    ids = tokenizer(cleaned, return_tensors="pt").input_ids[0]
    if ids.shape[0] > limit:
        raise InputProblem(f"The {what} is {ids.shape[0]} tokens; activation patching reads at most {limit} tokens "
                           f"(the residual grid alone is layers x {limit} patched runs). Shorten it.")
    if ids.shape[0] < 2:
        raise InputProblem(f"The {what} needs at least two tokens: patching compares positions before the last one.")
    return cleaned, ids


# ----------------------------------------------------------------------------------------------
# Making a corrupted copy
# ----------------------------------------------------------------------------------------------

# words a changed word may become: the first one not in the text that keeps the token count is taken
REPLACEMENTS = ("Lancaster", "Gloucester", "Norfolk", "Warwick", "Somerset", "Antonio", "Lorenzo", "Horatio", "Banquo",
                "Portia", "Viola", "Oberon", "sword", "crown", "horse", "letter", "rose", "gold", "ring", "glove", "dagger",
                "candle", "mirror", "apple", "tower", "river", "garden", "silver", "feather", "lantern", "window")
WORD = re.compile(r"[A-Za-z][A-Za-z']*")


def _length(tokenizer, text: str) -> int:
    return len(tokenizer(text).input_ids)


def change_one_word(tokenizer, text, word=None) -> tuple[str, str]:
    """(the text with one word changed, what was done). The word: ``word`` (its first occurrence), or else the
    earlier copy of the text's last word (what an induction head would copy from), or else the first word. It
    becomes the first of ``REPLACEMENTS`` not in the text, else the first other word of the text, that keeps the
    token count (capitalised like it)."""
    text, _ = require_text(text, "a clean text")
    found = list(WORD.finditer(text))
    if not found:
        raise InputProblem("The text has no word to change (letters a to z); type a text with words.")
    if word:
        chosen = next((m for m in found if m.group() == str(word).strip()), None)
        if chosen is None:
            raise InputProblem(f"The word {echo(word, 30)} is not in the text.")
    else:
        earlier = [m for m in found[:-1] if m.group() == found[-1].group()]
        chosen = earlier[0] if earlier else found[0]
    original, length = chosen.group(), _length(tokenizer, text)
    others = [m.group() for m in found if m.group().lower() != original.lower()]
    fresh = [w for w in REPLACEMENTS if w.lower() not in text.lower()]
    for candidate in dict.fromkeys([*fresh, *others]):  # new words first, then the text's own
        candidate = candidate.capitalize() if original[0].isupper() else candidate.lower()
        if candidate == original:
            continue
        changed = text[:chosen.start()] + candidate + text[chosen.end():]
        if _length(tokenizer, changed) == length:
            return changed, f"changed {echo(original, 30)} to {echo(candidate, 30)} (same number of tokens)"
    raise InputProblem(f"No replacement for {echo(original, 30)} keeps the number of tokens; edit the corrupted text by hand.")


def swap_repeated_half(tokenizer, text) -> tuple[str, str]:
    """(the text with the words of its first half swapped in pairs, what was done): a text whose second half
    repeats its first keeps every word, but no longer says which word followed which, the information that
    copying the first half needs. The token count must stay the same."""
    text, _ = require_text(text, "a clean text")
    found = list(WORD.finditer(text))
    half = found[:len(found) // 2]
    if len(half) < 2:
        raise InputProblem("Swapping needs at least four words (two in the first half); type a longer text.")
    words = [m.group() for m in half]
    for i in range(0, len(words) - 1, 2):
        words[i], words[i + 1] = words[i + 1], words[i]
    pieces, last = [], 0
    for m, new in zip(half, words):
        pieces += [text[last:m.start()], new]
        last = m.end()
    changed = "".join(pieces) + text[last:]
    if _length(tokenizer, changed) != _length(tokenizer, text):
        raise InputProblem("Swapping the words of the first half changed the number of tokens; edit the corrupted "
                           "text by hand.")
    return changed, f"swapped the words of the first half in pairs ({len(half)} words)"


# ----------------------------------------------------------------------------------------------
# Patched forward passes, batched
# ----------------------------------------------------------------------------------------------


def _overwrite(clean: torch.Tensor, rows: list[int], heads: list[int | None], positions: list[int], start: int
               ) -> Callable:
    """An edit: value[row, position - start] = clean[0, position] for each (row, position) (for (B, H, T, Dh) head
    outputs value[row, head, position - start] = clean[0, head, position]); the other entries stay as they are.
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

    A model is causal: a patch at position p changes nothing before p. The positions before ``start`` (no patch
    touches them) run once, unbatched, and the batch reads on from their cached keys and values."""
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


# ----------------------------------------------------------------------------------------------
# The grids
# ----------------------------------------------------------------------------------------------


@dataclass
class PatchGrid:
    """One grid: ``values`` (rows, columns) normalised (0 corrupted, 1 clean); the top next tokens of each cell's
    patched run, ``top_ids`` and ``top_probs`` (rows, columns, TOP_K)."""

    name: str
    title: str
    rows: list[str]
    columns: list[str]
    values: np.ndarray
    top_ids: np.ndarray = field(repr=False)
    top_probs: np.ndarray = field(repr=False)


@dataclass
class Patching:
    tokens: list[str]  # the clean text's token labels (the corrupted one's where they differ: ``corrupted_tokens``)
    corrupted_tokens: list[str]
    changed: list[int]  # positions where the two texts' tokens differ
    answer: str
    wrong_answer: str
    answer_id: int
    wrong_id: int
    clean_metric: float  # logit(answer) - logit(wrong answer), last position, clean run
    corrupted_metric: float
    clean_top: list[tuple[str, float]]
    corrupted_top: list[tuple[str, float]]
    grids: dict[str, PatchGrid]
    n_heads: int
    labels: Callable[[list[int]], list[str]] = field(repr=False)
    notices: list[str] = field(default_factory=list)

    def cell_top(self, grid: str, row: int, column: int) -> list[tuple[str, float]]:
        """The top next tokens (label, probability) of one cell's patched run."""
        g = self.grids[grid]
        return list(zip(self.labels(g.top_ids[row, column].tolist()), g.top_probs[row, column].tolist()))

    def to_json(self) -> dict:
        """clean_metric, corrupted_metric, and one grid per site, [row][column] (a column per position; for
        "heads": patched at every position, at the last position), normalised; the rows and columns named."""
        out = {"clean_metric": self.clean_metric, "corrupted_metric": self.corrupted_metric,
               "answer": self.answer, "wrong_answer": self.wrong_answer, "tokens": self.tokens,
               "corrupted_tokens": self.corrupted_tokens, "changed_positions": self.changed}
        for name, grid in self.grids.items():
            out[name] = [[round(float(v), 6) for v in row] for row in grid.values]
            out[f"{name}_rows"], out[f"{name}_columns"] = grid.rows, grid.columns
        return out


def logit_difference(logits: torch.Tensor, answer: int, wrong: int) -> torch.Tensor:
    """logit(answer) - logit(wrong) of (..., vocab) logits."""
    return logits[..., answer] - logits[..., wrong]


def top_tokens(tokenizer, logits: torch.Tensor, k: int = TOP_K) -> list[tuple[str, float]]:
    top = logits.softmax(-1).topk(k)
    return list(zip(token_labels(tokenizer, top.indices), top.values.tolist()))


def grid_patches(kind: GridKind, n_layers: int, n_heads: int, length: int) -> list[list[Patch]]:
    """One patch per cell, row by row: a position per column, or for heads "every position" then "last"."""
    cells = []
    for layer, head in kind.rows(n_layers, n_heads):
        site = kind.site(layer)
        if kind.per_head:
            cells += [[Patch(site, tuple(range(length)), head)], [Patch(site, (length - 1,), head)]]
        else:
            cells += [[Patch(site, (p,))] for p in range(length)]
    return cells


def check_model(model) -> None:
    if model.config.is_encoder_decoder:
        raise InputProblem("Activation patching works on decoder-only models (one text in, its next token out); "
                           "this one is an encoder-decoder, which reads a source text and writes another.")


def activation_patching(model, tokenizer, clean_text, corrupted_text, answer=None, wrong_answer=None, sites=None,
                        progress=None, max_tokens: int = MAX_TOKENS, chunk_tokens: int = CHUNK_TOKENS,
                        workers: int = WORKERS) -> Patching:
    """The clean and corrupted runs, and every patched run of the grids ``sites`` (``GRIDS``' names).

    ``answer`` and ``wrong_answer``: one token each; empty: the clean run's most likely and second most likely
    next tokens. ``progress(fraction, description)`` as the patched runs finish; ``chunk_tokens`` and ``workers``:
    ``run_batched``."""
    check_model(model)
    names, left_out = model_grids(model, parse_sites(sites))
    limit = min(max_tokens, model.config.position_limit or max_tokens)
    clean_text, clean_ids = text_ids(tokenizer, clean_text, "clean text", limit)
    corrupted_text, corrupted_ids = text_ids(tokenizer, corrupted_text, "corrupted text", limit)
    if clean_ids.shape != corrupted_ids.shape:
        raise InputProblem(f"The clean and corrupted texts must have the same number of tokens, so that each position "
                           f"of one has a partner in the other; the clean text is {clean_ids.shape[0]} tokens, the "
                           f"corrupted text {corrupted_ids.shape[0]}. Change words for words of as many tokens.")
    changed = torch.nonzero(clean_ids != corrupted_ids).flatten().tolist()
    clean, corrupted = recorded_pass(model, tokenizer, clean_text), recorded_pass(model, tokenizer, corrupted_text)
    clean_last, corrupted_last = clean.logits[-1], corrupted.logits[-1]
    ranked = clean_last.topk(2).indices.tolist()
    answer_id = one_token(tokenizer, answer, "The answer") if answer else ranked[0]
    wrong_id = one_token(tokenizer, wrong_answer, "The wrong answer") if wrong_answer else (
        ranked[1] if ranked[0] == answer_id else ranked[0])
    if answer_id == wrong_id:
        raise InputProblem(f"The answer and the wrong answer are the same token ({echo(token_labels(tokenizer, [answer_id])[0])}): "
                           "the metric is the difference of their logits. Pick two different tokens.")
    clean_ld = float(logit_difference(clean_last, answer_id, wrong_id))
    corrupted_ld = float(logit_difference(corrupted_last, answer_id, wrong_id))
    notices = left_out
    if not changed:
        raise InputProblem("The clean and corrupted texts are the same tokens: there is nothing to patch. Change a word "
                           "of the corrupted text (or use one of the buttons that make a corrupted copy).")
    if abs(clean_ld - corrupted_ld) < 1e-3:
        raise InputProblem(f"The logit difference is the same in both runs ({clean_ld:.4f}): the corruption does not "
                           "change how the model weighs the answer against the wrong answer, so there is nothing to "
                           "restore. Corrupt a token the answer depends on, or pick other answers.")
    if clean_ld < corrupted_ld:
        notices.append("The corrupted run gives the answer a larger lead over the wrong answer than the clean run does; "
                       "restored still runs from 0 (the corrupted run) to 1 (the clean run).")

    n_layers, n_heads, length = model.config.n_layers, model.config.n_heads, clean_ids.shape[0]
    kinds = [GRIDS[name] for name in names]
    cells = [grid_patches(kind, n_layers, n_heads, length) for kind in kinds]
    needed = {patch.site for rows in cells for patch_list in rows for patch in patch_list}
    values = {site: clean.recording[site] for site in needed}
    every = [patch for rows in cells for patch in rows]
    same = [changes_nothing(row, values, corrupted.recording) for row in every]
    to_run = [row for row, unchanged in zip(every, same) if not unchanged]
    report = None if progress is None else (
        lambda done, total: progress(done / total, f"{len(to_run)} patched runs: {done} of {total} batches"))
    logits = corrupted_last.expand(len(every), -1).clone()  # a patch that writes what is there: the corrupted run
    logits[[i for i, unchanged in enumerate(same) if not unchanged]] = run_batched(
        model, corrupted.read.target_ids, to_run, values, report, chunk_tokens, workers)
    scores = (logit_difference(logits, answer_id, wrong_id) - corrupted_ld) / (clean_ld - corrupted_ld)
    top = logits.softmax(-1).topk(TOP_K)

    grids, start = {}, 0
    for kind, rows in zip(kinds, cells):
        n_rows = len(kind.rows(n_layers, n_heads))
        columns = list(HEAD_COLUMNS) if kind.per_head else [f"{p}:{t}" for p, t in enumerate(token_labels(tokenizer, clean_ids))]
        shape = (n_rows, len(columns))
        stop = start + len(rows)
        grids[kind.name] = PatchGrid(kind.name, kind.title, kind.row_labels(n_layers, n_heads), columns,
                                     scores[start:stop].reshape(shape).numpy(),
                                     top.indices[start:stop].reshape(*shape, TOP_K).numpy(),
                                     top.values[start:stop].reshape(*shape, TOP_K).numpy())
        start = stop
    return Patching(
        tokens=token_labels(tokenizer, clean_ids), corrupted_tokens=token_labels(tokenizer, corrupted_ids), changed=changed,
        answer=token_labels(tokenizer, [answer_id])[0], wrong_answer=token_labels(tokenizer, [wrong_id])[0],
        answer_id=answer_id, wrong_id=wrong_id, clean_metric=clean_ld, corrupted_metric=corrupted_ld,
        clean_top=top_tokens(tokenizer, clean_last), corrupted_top=top_tokens(tokenizer, corrupted_last), grids=grids,
        n_heads=n_heads,
        labels=lambda ids: token_labels(tokenizer, ids), notices=notices + list(clean.read.notices))
