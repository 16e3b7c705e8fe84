"""``activation_patching``: the texts and answers checked, the clean and corrupted runs, every cell's patched run,
and the result: one ``PatchGrid`` per grid, normalised (0 the corrupted run, 1 the clean run), and its JSON.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch

from explorer.core.inputs import InputProblem, echo, require_text
from explorer.generation.model_ids import model_ids
from explorer.generation.labels import token_labels
from explorer.generation.tokens import one_token
from explorer.views.forward_pass import RecordedPass, recorded_pass
from explorer.views.patching.grids import GRIDS, GridKind, model_grids, parse_grids
from explorer.views.patching.runs import CHUNK_TOKENS, WORKERS, run_batched, trimmed

# The least gap between the clean and corrupted logit differences for "restored" to mean anything. restored divides
# each patched run's change of LD by this gap; 0.1 nats is the corruption changing the odds of answer against wrong
# answer by about 10% (e^0.1 = 1.105). Under it the corruption barely moves the model's choice, and a patched run
# that moves LD by a few hundredths of a nat, as patching almost anything does, reads as 0.3 or 8: the grid is noise.
MIN_LOGIT_GAP = 0.1
# Under this (relative to the logit difference, at least 1), the two runs' logit differences are the same up to
# float32 rounding: restored would divide rounding by rounding, and nothing is patched
SAME_GAP = 1e-6
MAX_TOKENS = 128  # tokens of each text: the residual grid is layers x T patched runs of T tokens each
TOP_K = 5  # the next tokens shown for a clicked cell


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

    @property
    def measurable(self) -> bool:
        """Whether the clean and corrupted runs differ enough (``MIN_LOGIT_GAP``) for restored to rank places."""
        return abs(self.clean_metric - self.corrupted_metric) >= MIN_LOGIT_GAP

    def cell_top(self, grid: str, row: int, column: int) -> list[tuple[str, float]]:
        """The top next tokens (label, probability) of one cell's patched run."""
        g = self.grids[grid]
        return list(zip(self.labels(g.top_ids[row, column].tolist()), g.top_probs[row, column].tolist()))

    def to_json(self) -> dict:
        """clean_metric, corrupted_metric, and each grid, [row][column] (a column per position; for "heads": patched
        at every position, at the last position), normalised; the rows and columns named."""
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


# ----------------------------------------------------------------------------------------------
# The checks: the model, the two texts, the answers, the metric
# ----------------------------------------------------------------------------------------------


def check_model(model) -> None:
    if model.config.is_encoder_decoder:
        raise InputProblem("Activation patching works on decoder-only models (one text in, its next token out); "
                           "this one is an encoder-decoder, which reads a source text and writes another.")


def text_ids(tokenizer, text, what: str, limit: int, vocab_size: int) -> tuple[str, torch.Tensor]:
    """(the cleaned text, its (T,) ids as the app feeds them); empty, over ``limit`` tokens or holding a token beyond
    the model's ``vocab_size`` rows (``model_ids``) is an InputProblem."""
    cleaned, _ = require_text(text, f"a {what}")
    ids = model_ids(tokenizer, cleaned, vocab_size, f"The {what}")[0]
    if ids.shape[0] > limit:
        raise InputProblem(f"The {what} is {ids.shape[0]} tokens; activation patching reads at most {limit} tokens "
                           f"(the residual grid alone is layers x {limit} patched runs). Shorten it.")
    if ids.shape[0] < 2:
        raise InputProblem(f"The {what} needs at least two tokens: patching compares positions before the last one.")
    return cleaned, ids


def paired_texts(tokenizer, clean_text, corrupted_text, limit: int, vocab_size: int
                 ) -> tuple[str, torch.Tensor, str, torch.Tensor]:
    """(clean text, its ids, corrupted text, its ids): two texts of the same number of tokens."""
    clean_text, clean_ids = text_ids(tokenizer, clean_text, "clean text", limit, vocab_size)
    corrupted_text, corrupted_ids = text_ids(tokenizer, corrupted_text, "corrupted text", limit, vocab_size)
    if clean_ids.shape != corrupted_ids.shape:
        raise InputProblem(f"The clean and corrupted texts must have the same number of tokens, so that each position "
                           f"of one has a partner in the other; the clean text is {clean_ids.shape[0]} tokens, the "
                           f"corrupted text {corrupted_ids.shape[0]}. Change words for words of as many tokens.")
    return clean_text, clean_ids, corrupted_text, corrupted_ids


def answer_ids(tokenizer, clean_last: torch.Tensor, answer, wrong_answer) -> tuple[int, int, list[str]]:
    """(answer, wrong answer token ids, notices): one token each, checked as every answer is
    (``tokens.one_token``); empty: the clean run's most likely and second most likely next tokens (``clean_last``:
    its last-position logits, one per token of the model's vocabulary), with a notice saying which was taken."""
    typed, notices = {}, []
    for what, value in (("The answer", answer), ("The wrong answer", wrong_answer)):
        if value:
            typed[what], said = one_token(tokenizer, value, what, clean_last.shape[-1])
            notices += said
    ranked = [i for i in clean_last.topk(3).indices.tolist() if i not in typed.values()]
    answer_id = typed.get("The answer", ranked[0])
    wrong_id = typed.get("The wrong answer", next(i for i in ranked if i != answer_id))
    if answer_id == wrong_id:
        raise InputProblem(f"The answer and the wrong answer are the same token ({echo(token_labels(tokenizer, [answer_id])[0])}): "
                           "the metric is the difference of their logits. Pick two different tokens.")
    taken = [what for what, typed in (("answer", answer), ("wrong answer", wrong_answer)) if not typed]
    if taken:
        notices.append(f"The empty {' and '.join(taken)} box{'es' if len(taken) > 1 else ''} took the clean run's "
                       + ("two most likely next tokens." if len(taken) > 1 else
                          "most likely next token other than the wrong answer." if taken == ["answer"] else
                          "most likely next token other than the answer."))
    return answer_id, wrong_id, notices


def metric_notices(changed: list[int], clean_ld: float, corrupted_ld: float) -> list[str]:
    """What the two runs' logit differences say: an InputProblem where nothing can be restored (the same tokens,
    the same logit difference), a notice where the corrupted run leads."""
    if not changed:
        raise InputProblem("The clean and corrupted texts are the same tokens: there is nothing to patch. Change a word "
                           "of the corrupted text (or use one of the buttons that make a corrupted copy).")
    if abs(clean_ld - corrupted_ld) <= SAME_GAP * max(1.0, abs(clean_ld)):
        raise InputProblem(f"The logit difference is the same in both runs ({clean_ld:.4f}): the corruption does not "
                           "change how the model weighs the answer against the wrong answer, so there is nothing to "
                           "restore. Corrupt a token the answer depends on, or pick other answers.")
    gap = abs(clean_ld - corrupted_ld)
    if gap < MIN_LOGIT_GAP:
        return [f"**Nothing to measure here.** The two runs barely differ: the logit difference is {clean_ld:.3f} clean "
                f"and {corrupted_ld:.3f} corrupted, {gap:.3f} apart, under {MIN_LOGIT_GAP:g} nats. restored divides "
                "each patched run's change by that gap, so these grids magnify noise, and no place is ranked. Change "
                "a token the answer depends on in the corrupted text (the word the answer copies or follows), or "
                "type an answer and a wrong answer that the two texts disagree on."]
    if clean_ld < corrupted_ld:
        return ["The corrupted run gives the answer a larger lead over the wrong answer than the clean run does; "
                "restored still runs from 0 (the corrupted run) to 1 (the clean run)."]
    return []


# ----------------------------------------------------------------------------------------------
# Every cell's patched run, and the grids
# ----------------------------------------------------------------------------------------------


class CellResults(NamedTuple):
    """Every cell's patched run, summarised: the logit difference (cells,), its top next tokens' probabilities and
    ids (cells, TOP_K)."""

    metric: torch.Tensor
    top_probs: torch.Tensor
    top_ids: torch.Tensor


def cell_results(model, kinds: list[GridKind], clean, corrupted, answer_id: int, wrong_id: int, progress=None,
                 chunk_tokens: int = CHUNK_TOKENS, workers: int = WORKERS) -> CellResults:
    """Every cell of the grids ``kinds``, grid after grid, row by row, from the recorded passes ``clean`` and
    ``corrupted``. A cell whose patches write what the corrupted run has there is not run: it is the corrupted run.
    Each batch's logits are summarised as it finishes: no (cells, vocab) table is held."""
    config, length = model.config, corrupted.read.target_ids.shape[0]
    every = [cell for kind in kinds for cell in kind.cells(config.n_layers, config.n_heads, length)]
    values = {site: clean.recording[site] for site in {patch.site for cell in every for patch in cell}}
    cells = [trimmed(cell, values, corrupted.recording) for cell in every]
    to_run = [i for i, cell in enumerate(cells) if cell]

    def summarise(logits: torch.Tensor) -> CellResults:
        top = logits.softmax(-1).topk(TOP_K)
        return CellResults(logit_difference(logits, answer_id, wrong_id), top.values, top.indices)

    plain = summarise(corrupted.logits[-1][None])  # a cell that writes what is there: the corrupted run
    results = CellResults(*(column.expand(len(every), *column.shape[1:]).clone() for column in plain))
    if to_run:
        report = None if progress is None else (
            lambda done, total, work: progress(work, f"{len(to_run)} patched runs: {done} of {total} batches"))
        ran = run_batched(model, corrupted.recording, [cells[i] for i in to_run], values, summarise, report,
                          chunk_tokens, workers)
        for column, part in zip(results, ran):
            column[to_run] = part
    return results


def patch_grids(kinds: list[GridKind], scores: torch.Tensor, top: CellResults, n_layers: int, n_heads: int,
                tokens: list[str]) -> dict[str, PatchGrid]:
    """The grids from every cell's normalised ``scores`` (cells,) and ``top`` next tokens (cells, TOP_K), in the
    order of ``cell_results``; ``tokens``: the clean text's token labels."""
    grids, start = {}, 0
    for kind in kinds:
        rows, columns = kind.row_labels(n_layers, n_heads), kind.columns(tokens)
        shape, stop = (len(rows), len(columns)), start + len(rows) * len(columns)
        grids[kind.name] = PatchGrid(kind.name, kind.title, rows, columns, scores[start:stop].reshape(shape).numpy(),
                                     top.top_ids[start:stop].reshape(*shape, TOP_K).numpy(),
                                     top.top_probs[start:stop].reshape(*shape, TOP_K).numpy())
        start = stop
    return grids


@dataclass
class PairedRuns:
    """The checked request: the grids the model has, the two texts' ids and recorded runs, the answers and the
    metric of each run; what the exact grids and their estimate (``estimates``) both start from."""

    names: list[str]
    clean_ids: torch.Tensor
    corrupted_ids: torch.Tensor
    changed: list[int]
    clean: RecordedPass
    corrupted: RecordedPass
    answer_id: int
    wrong_id: int
    clean_ld: float
    corrupted_ld: float
    notices: list[str]


def paired_runs(model, tokenizer, clean_text, corrupted_text, answer=None, wrong_answer=None, grids=None,
                max_tokens: int = MAX_TOKENS) -> PairedRuns:
    """The model, texts, answers and grids checked (an InputProblem says what is wrong), and the two runs."""
    check_model(model)
    names, left_out = model_grids(model, parse_grids(grids))
    limit = min(max_tokens, model.config.position_limit or max_tokens)
    clean_text, clean_ids, corrupted_text, corrupted_ids = paired_texts(tokenizer, clean_text, corrupted_text, limit,
                                                                        model.config.vocab_size)
    changed = torch.nonzero(clean_ids != corrupted_ids).flatten().tolist()
    clean, corrupted = recorded_pass(model, tokenizer, clean_text), recorded_pass(model, tokenizer, corrupted_text)
    answer_id, wrong_id, answer_notices = answer_ids(tokenizer, clean.logits[-1], answer, wrong_answer)
    clean_ld = float(logit_difference(clean.logits[-1], answer_id, wrong_id))
    corrupted_ld = float(logit_difference(corrupted.logits[-1], answer_id, wrong_id))
    notices = left_out + answer_notices + metric_notices(changed, clean_ld, corrupted_ld)
    return PairedRuns(names, clean_ids, corrupted_ids, changed, clean, corrupted, answer_id, wrong_id, clean_ld,
                      corrupted_ld, notices)


def activation_patching(model, tokenizer, clean_text, corrupted_text, answer=None, wrong_answer=None, grids=None,
                        progress=None, max_tokens: int = MAX_TOKENS, chunk_tokens: int = CHUNK_TOKENS,
                        workers: int = WORKERS) -> Patching:
    """The clean and corrupted runs, and every patched run of the grids ``grids`` (``GRIDS``' names; None: all).

    ``answer`` and ``wrong_answer``: one token each; empty: the clean run's most likely and second most likely
    next tokens. ``progress(fraction, description)`` as the patched runs finish; ``chunk_tokens`` and ``workers``:
    ``run_batched``."""
    runs = paired_runs(model, tokenizer, clean_text, corrupted_text, answer, wrong_answer, grids, max_tokens)
    clean, corrupted, answer_id, wrong_id = runs.clean, runs.corrupted, runs.answer_id, runs.wrong_id
    clean_ld, corrupted_ld = runs.clean_ld, runs.corrupted_ld
    kinds = [GRIDS[name] for name in runs.names]
    results = cell_results(model, kinds, clean, corrupted, answer_id, wrong_id, progress, chunk_tokens, workers)
    scores = (results.metric - corrupted_ld) / (clean_ld - corrupted_ld)
    tokens, n_heads = token_labels(tokenizer, runs.clean_ids), model.config.n_heads
    return Patching(
        tokens=tokens, corrupted_tokens=token_labels(tokenizer, runs.corrupted_ids), changed=runs.changed,
        answer=token_labels(tokenizer, [answer_id])[0], wrong_answer=token_labels(tokenizer, [wrong_id])[0],
        answer_id=answer_id, wrong_id=wrong_id, clean_metric=clean_ld, corrupted_metric=corrupted_ld,
        clean_top=top_tokens(tokenizer, clean.logits[-1]), corrupted_top=top_tokens(tokenizer, corrupted.logits[-1]),
        grids=patch_grids(kinds, scores, results, model.config.n_layers, n_heads, tokens),
        n_heads=n_heads, labels=lambda ids: token_labels(tokenizer, ids), notices=runs.notices + list(clean.read.notices))
