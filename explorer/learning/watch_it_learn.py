"""The recorded training runs as the Watch it learn tab shows them: which checkpoints hold one, their snapshots'
weights (loaded on first use, the most recently used kept), and one view of a run at one snapshot on a text; what
any model's steps of training share with it (``heads_formed``, ``formed_line``, ``step_label``, ``guesses_line``,
``guesses_right``).

A recorded run is a checkpoint folder with a timeline.json beside the final model (``checkpointing.training_run``):
what was measured at every snapshot, on fixed probes, and the snapshots' float16 weights. A view takes the curves
and scores from timeline.json as written, and computes the rest from the snapshot's own weights: every head's
attention on the text (one recorded run of the snapshot, ``explorer.views.forward_pass``) and a greedy continuation of the text
(``model.generate``).
"""

import copy
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

import numpy as np
from transformers.convert_slow_tokenizer import bytes_to_unicode

from checkpointing.in_context import INDUCTION_LENGTH, attention_weights, induction_probe, induction_scores_from
from checkpointing.training_run import TIMELINE_FILE, is_timeline, load_snapshot, read_timeline
from modeling import ablate_heads, record

from explorer.models import catalog
from explorer.views.attention import AttentionMaps, View, attention_maps
from explorer.generation.decoding import DecodingSettings, generate_ids
from explorer.views.heads import THRESHOLD
from explorer.core.inputs import InputProblem, echo, kind_of, require_text, whole_number
from explorer.views.forward_pass import LRUCache, recorded_pass

DEFAULT_RUN, CONTROL_RUN = "timeline-repeats", "timeline-plain"  # the run the tab opens on, and its control
# a line, then the same line again, cut a few words in: an induction head copies what followed the first time. The
# line is shorter than 64 bytes, the longest repeat the run trained on.
DEFAULT_TEXT = "If music be the food of love, play on. If music be the food"
MAX_TEXT_CHARS = 2_000
MISSED = "·"  # where the model's guess of the next token was wrong
SAMPLE_TOKENS = 40  # new tokens of the greedy continuation, at most: it stays within the context the model trained at
GREEDY = DecodingSettings(False, max_new_tokens=SAMPLE_TOKENS)
TIMELINES = LRUCache(8)  # (timeline.json, its mtime and size) -> its contents
COMPOSITIONS = LRUCache(8)  # (timeline.json, its mtime and size) -> every pair's composition at every snapshot
SNAPSHOTS = LRUCache(64)  # (weights file, its mtime and size) -> the snapshot's model: a few hundred kB each


def timeline_runs(root: Path | None = None) -> dict[str, catalog.CheckpointInfo]:
    """The usable decoder-only checkpoints that hold a recorded run, by name: the default run, its control, the rest."""
    found = [info for info in catalog.discover_checkpoints(root).values()
             if info.usable and not info.is_encoder_decoder and is_timeline(info.path)]
    found.sort(key=lambda info: (info.name != DEFAULT_RUN, info.name != CONTROL_RUN, info.name))
    return {info.name: info for info in found}


def no_runs_message() -> str:
    return ("No recorded training run found among the checkpoints (a checkpoint folder with a timeline.json): "
            f"train one with `python -m training.train --preset {DEFAULT_RUN} --output-dir checkpoints/{DEFAULT_RUN}`.")


def _file_key(path: Path) -> tuple:
    stat = path.stat()
    return str(path.resolve()), stat.st_mtime_ns, stat.st_size


@dataclass(frozen=True)
class RecordedRun:
    """One run: its checkpoint and its timeline.json, read and checked (``checkpointing.training_run.read_timeline``)."""

    info: catalog.CheckpointInfo
    timeline: dict

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def snapshots(self) -> list[dict]:
        return self.timeline["snapshots"]

    @property
    def steps(self) -> list[int]:
        return [s["step"] for s in self.snapshots]

    def best_induction(self) -> list[float]:
        """The highest induction score of any head, at each snapshot."""
        return [float(np.max(s["induction"])) for s in self.snapshots]

    def nearest(self, step: int) -> int:
        """The index of the snapshot whose step is nearest ``step`` (the earlier of two as near)."""
        return int(np.argmin([abs(s - step) for s in self.steps]))

    def heads_formed(self, score: str = "induction") -> list[tuple[int, int, int]]:
        """(layer, head, step) of every head whose ``score`` reaches THRESHOLD at some snapshot, with the first such
        step, in the order they formed."""
        return heads_formed(self.steps, [s[score] for s in self.snapshots])

    def formed(self) -> int | None:
        """The index of the first snapshot where some head's induction score reaches ``THRESHOLD`` (the score at which
        the Attention heads tab labels a head "induction"), or None."""
        return next((i for i, score in enumerate(self.best_induction()) if score >= THRESHOLD), None)


def heads_formed(steps: list, scores) -> list[tuple[int, int, object]]:
    """(layer, head, step) of every head whose score (``scores``: one layers x heads array per step) reaches
    THRESHOLD at some step, with the first such step, in the order they formed."""
    scores = np.asarray(scores)  # (steps, layers, heads)
    found = [(int(np.argmax(scores[:, l, h] >= THRESHOLD)), l, h) for l in range(scores.shape[1])
             for h in range(scores.shape[2]) if scores[:, l, h].max() >= THRESHOLD]
    return [(l, h, steps[i]) for i, l, h in sorted(found)]


def step_label(step) -> str:
    """A step as the views name it: "step 1,000"; a revision that names no step (``main``) by its name."""
    return f"step {step:,}" if isinstance(step, int) else str(step)


def formed_line(name: str, formed: list[tuple[int, int, object]], where: str) -> str:
    """Every induction head of ``heads_formed`` named with the step it first reached THRESHOLD at (a step that is
    not a number, such as a revision named ``main``, as it is named); ``where``: what a step is (a snapshot)."""
    if not formed:
        return f"No head of {name} reaches an induction score of {THRESHOLD:g} at any {where}."
    named = ", ".join(f"L{layer}.H{head} from {step_label(step)}" for layer, head, step in formed)
    kind = "an induction head" if len(formed) == 1 else f"{len(formed)} induction heads"
    return f"{name} forms {kind} (score at least {THRESHOLD:g} at a {where}): {named}."


def guesses_line(cells: list[str], guessed: list[str]) -> str:
    """Two aligned lines: the text as the model reads it, one cell per token (a byte outside ASCII as ⟨hex⟩), and
    under each token from the second on, the token again where the model guessed it (``guessed_tokens``: its most
    likely next token), else a ·. Meant for a monospace font."""
    widths = [len(c) for c in cells]
    guesses = [" " * widths[0]] + [(c if g else MISSED).ljust(w) for c, g, w in zip(cells[1:], guessed, widths[1:])]
    return "".join(cells) + "\n" + "".join(guesses)


def guesses_right(guessed: list[str]) -> str:
    """How many of the text's next tokens the model guessed (``guessed_tokens``: "" where it missed)."""
    return f"Right on {sum(1 for token in guessed if token)} of the {len(guessed)} next tokens of your text."


def recorded(info: catalog.CheckpointInfo) -> RecordedRun:
    """The run in ``info``'s folder; its timeline.json read once per version of the file."""
    path = info.path / TIMELINE_FILE
    try:
        timeline = TIMELINES.get(_file_key(path), lambda: read_timeline(info.path))
    except (OSError, ValueError) as error:
        raise InputProblem(f"The recorded run {info.name} cannot be read: {error}") from None
    return RecordedRun(info, timeline)


def pick_run(name, root: Path | None = None) -> RecordedRun:
    """The run a client names (nothing: the first of ``timeline_runs``); else an InputProblem naming the runs."""
    runs = timeline_runs(root)
    if not runs:
        raise InputProblem(no_runs_message())
    if name is None or (isinstance(name, str) and not name.strip()):
        return recorded(next(iter(runs.values())))
    if not isinstance(name, str):
        raise InputProblem(f"The run is named by a text, one of: {', '.join(runs)}; got {kind_of(name)}.")
    name = name.strip()
    if name not in runs:
        why = ("has no recorded training (no timeline.json)" if name in catalog.discover_checkpoints(root)
               else "is not a checkpoint here")
        raise InputProblem(f"{echo(name)} {why}; pick a recorded run: {', '.join(runs)}.")
    return recorded(runs[name])


def partner(name: str, root: Path | None = None) -> RecordedRun | None:
    """The run ``name`` is compared with: the control for the default run, the default run for any other (else the
    first other run; None when there is none)."""
    runs = timeline_runs(root)
    preferred = CONTROL_RUN if name == DEFAULT_RUN else DEFAULT_RUN
    others = [other for other in runs if other != name]
    if not others:
        return None
    return recorded(runs[preferred if preferred in others else others[0]])


def pick_snapshot(value, run: RecordedRun) -> int:
    """A snapshot index of ``run`` (−1: the last); anything else is an InputProblem saying which exist."""
    n = len(run.snapshots)
    what = (f"The snapshot ({run.name} has {n}: 0 is step {run.steps[0]:,}, {n - 1} is step {run.steps[-1]:,}; "
            "−1 is the last)")
    index = whole_number(value, what, -1, n - 1)
    return n - 1 if index == -1 else index


def check_text(text, context: int) -> tuple[str, list[str]]:
    """The learner's text, at most ``MAX_TEXT_CHARS`` characters and not empty; else an InputProblem."""
    if isinstance(text, str) and len(text) > MAX_TEXT_CHARS:
        raise InputProblem(f"The text is {len(text):,} characters; this view takes at most {MAX_TEXT_CHARS:,} (and the "
                           f"model reads only its first {context} tokens, one per byte): shorten it.")
    return require_text(text, "some text")


def snapshot_model(run: RecordedRun, index: int, final):
    """The float32 model of snapshot ``index``, with the generation settings of the run's final model ``final``."""
    entry = run.snapshots[index]

    def load():
        with catalog.LOAD_LOCK:  # built as every model the app loads is: never beside another load
            model = load_snapshot(run.info.path, entry["file"], final.config).requires_grad_(False)
        model.generation_config = copy.deepcopy(final.generation_config)
        return model

    return SNAPSHOTS.get(_file_key(run.info.path / entry["file"]), load)


def composition_scores(model, length: int = INDUCTION_LENGTH) -> dict[tuple[int, int, int, int], float]:
    """{(l1, h1, l2, h2): how much head h2 of layer l2 loses of its induction score when head h1 of an earlier
    layer l1 is removed}, for every such pair, on ``induction_probe``.

    K-composition (Elhage et al. 2021) asks whether h2's keys read what h1 wrote. The weight-based form,
    ‖W_QK^h2ᵀ W_OV^h1‖_F / (‖W_QK^h2‖_F ‖W_OV^h1‖_F), assumes one W_QK per head; under RoPE W_QK depends on the
    offset, so it is measured on the probe instead: h2's induction score with every head, minus its score with h1's
    output removed (zeroed before W_O, ``modeling.ablate_heads``). A pair that forms the circuit scores near h2's
    whole score; an unrelated pair near 0."""
    config = model.config
    ids = induction_probe(config.vocab_size, length)
    base = induction_scores_from(attention_weights(model, ids), length)
    out = {}
    for l1 in range(config.n_layers - 1):
        for h1 in range(config.n_heads):
            with record(keep=lambda site: False, edits=ablate_heads("decoder", "self", [(l1, h1)], config.n_layers,
                                                                     config.n_heads)):
                ablated = induction_scores_from(attention_weights(model, ids), length)
            for l2 in range(l1 + 1, config.n_layers):
                for h2 in range(config.n_heads):
                    out[(l1, h1, l2, h2)] = float(base[l2, h2] - ablated[l2, h2])
    return out


def run_composition(run: RecordedRun, final) -> dict[tuple[int, int, int, int], list[float]]:
    """``composition_scores`` at every snapshot of ``run``: {pair: one score per snapshot}; computed once per run."""
    def measure():
        per_snapshot = [composition_scores(snapshot_model(run, i, final)) for i in range(len(run.snapshots))]
        return {pair: [scores[pair] for scores in per_snapshot] for pair in per_snapshot[0]}

    return COMPOSITIONS.get(_file_key(run.info.path / TIMELINE_FILE), measure)


# what the two heads of the copying circuit are called, by the snapshot field that scores them
CIRCUIT = {"previous_token": "previous-token head", "induction": "induction head"}


@dataclass
class TimelineView:
    """A run at one snapshot: ``maps`` every head's attention on the tokens read (at most the model's context;
    ``maps.weights["self"]`` is (layers, heads, T, T)), ``sample`` the greedy continuation of those tokens."""

    run: RecordedRun
    other: RecordedRun | None
    index: int
    maps: AttentionMaps
    sample: str
    notices: list[str]
    guessed: list[str] = field(default_factory=list)  # the next tokens of the text, each "" where the model's top guess missed it
    read_tokens: list[str] = field(default_factory=list)  # each token read, decoded alone
    read_ids: list[int] = field(default_factory=list)
    composition: dict = field(default_factory=dict)  # run_composition of the run

    @cached_property
    def snapshot(self) -> dict:
        return self.run.snapshots[self.index]

    @property
    def step(self) -> int:
        return self.snapshot["step"]

    @property
    def tokens(self) -> list[str]:
        """Numbered labels of the tokens read."""
        return self.maps.query_labels["self"]

    @property
    def weights(self) -> np.ndarray:
        return self.maps.weights["self"]

    def best_head(self, score: str = "induction") -> tuple[int, int, float]:
        """(layer, head, score) of the head scoring highest at this snapshot (``score``: a field of ``CIRCUIT``)."""
        scores = np.asarray(self.snapshot[score])
        layer, head = np.unravel_index(int(np.argmax(scores)), scores.shape)
        return int(layer), int(head), float(scores[layer, head])

    def circuit_views(self) -> dict[str, View]:
        """The heads to enlarge: the best previous-token head and the best induction head at this snapshot."""
        return {score: View("self", *self.best_head(score)[:2]) for score in CIRCUIT}

    def summary(self) -> str:
        """One line: where in training, and what timeline.json says of this snapshot."""
        s, last = self.snapshot, len(self.run.snapshots) - 1
        train = "none yet" if s["train_loss"] is None else f"{s['train_loss']:.3f}"
        layer, head, score = self.best_head()
        return (f"**Step {s['step']:,}** of {self.run.steps[-1]:,} (snapshot {self.index} of 0–{last}) · "
                f"{s['tokens']:,} tokens seen · training loss {train}, validation loss {s['validation_loss']:.3f} "
                f"nats/token · best induction head: layer {layer}, head {head} ({score:.2f}) · "
                f"repeated-passage ratio {s['repeated_passage_ratio']:.2f}")

    def guesses_line(self) -> str:
        """``guesses_line``: the tokens read, and under each the snapshot's right guesses."""
        return guesses_line(self.read_tokens, self.guessed)

    def guess_counts(self) -> dict[str, tuple[int, int]] | None:
        """{"first copy", "repeat"}: (right, of how many) over the two copies of the text's repeated ending
        (``repeated_ending``), each from its second token (nothing in the text tells its first); None when the
        text does not end with a repeat."""
        found = repeated_ending(self.read_ids)
        if found is None:
            return None
        first, repeat, length = found
        right = lambda start: sum(bool(self.guessed[t - 1]) for t in range(start + 1, start + length))
        return {"first copy": (right(first), length - 1), "repeat": (right(repeat), length - 1)}

    def guesses_count(self) -> str:
        line = guesses_right(self.guessed)
        counts = self.guess_counts()
        if counts:
            (a, n), (b, _) = counts.values()
            line += (f" Of the part it repeats, {a} of {n} right the first time and {b} of {n} in the repeat (each "
                     "copy from its second token).")
        return line

    def strongest_pair(self) -> tuple[tuple[int, int, int, int], float] | None:
        """The pair with the highest composition score at this snapshot, and the score."""
        if not self.composition:
            return None
        pair = max(self.composition, key=lambda p: self.composition[p][self.index])
        return pair, self.composition[pair][self.index]

    def composition_line(self) -> str:
        found = self.strongest_pair()
        if found is None:
            return ""
        (l1, h1, l2, h2), score = found
        if score < 0.05:
            return "Composition at this step: removing no earlier head costs a later head 0.05 of its induction score."
        return (f"Composition at this step: removing L{l1}.H{h1} costs L{l2}.H{h2} {score:.2f} of its induction score, "
                "the most of any pair (the K-composition plot).")

    def formed_line(self) -> str:
        """When each of the run's induction heads formed, from its snapshots: every head named."""
        return formed_line(self.run.name, self.run.heads_formed(), "snapshot")


def timeline_view(run, snapshot, text, root: Path | None = None) -> TimelineView:
    """The run named ``run`` (nothing: the default) at snapshot index ``snapshot`` (−1: the last) on ``text``: the
    attention of every head of the snapshot on the text's first tokens (up to the model's context), and the greedy
    continuation of those tokens by ``model.generate``, up to ``SAMPLE_TOKENS`` new ones while the whole fits the
    context the model was trained at. Bad input is an InputProblem saying what is allowed."""
    chosen = pick_run(run, root)
    index = pick_snapshot(snapshot, chosen)
    _, final, tokenizer = catalog.resolve(chosen.name, root)
    context = final.config.context_length
    text, notices = check_text(text, context)
    model = snapshot_model(chosen, index, final)
    maps = attention_maps(model, tokenizer, text, GREEDY, context)
    read = recorded_pass(model, tokenizer, text, GREEDY, context)  # the run attention_maps read, from the cache
    ids = read.read.source_ids[None]
    room = min(SAMPLE_TOKENS, context - ids.shape[1])

    def continuation() -> str:
        out = generate_ids(model, ids, replace(GREEDY, max_new_tokens=room))
        return tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)

    sample, full = (read.cached("greedy continuation", continuation), []) if room > 0 else ("", [
        f"The text fills the model's context ({context} tokens), so there is no room to continue it: "
        "shorten it to see a sample."])
    return TimelineView(chosen, partner(chosen.name, root), index, maps, sample, notices + maps.notices + full,
                        guessed_tokens(read.logits, ids[0], tokenizer),
                        [shown_token(tokenizer, int(i)) for i in ids[0]], [int(i) for i in ids[0]],
                        run_composition(chosen, final))


def repeated_ending(ids: list[int], shortest: int = 4) -> tuple[int, int, int] | None:
    """(first, repeat, length): the longest ending ids[repeat:] of at least ``shortest`` tokens that also occurs
    earlier, at ids[first:first + length], not overlapping it; None when there is none."""
    n = len(ids)
    for repeat in range(1, n - shortest + 1):  # longest ending first
        length = n - repeat
        for first in range(0, repeat - length + 1):
            if ids[first:first + length] == ids[repeat:]:
                return first, repeat, length
    return None


BYTE_OF = {char: byte for byte, char in bytes_to_unicode().items()}  # byte-level BPE's printable stand-ins


def shown_token(tokenizer, token_id: int) -> str:
    """A token as one cell of the guesses: its text, a line break as ⏎; a part of a multi-byte character, which
    alone decodes to �, as its bytes in hex (⟨c3⟩)."""
    text = tokenizer.decode([token_id])
    if "\ufffd" in text:
        piece = tokenizer.convert_ids_to_tokens(token_id)
        if all(c in BYTE_OF for c in piece):
            return "".join(f"⟨{BYTE_OF[c]:02x}⟩" for c in piece)
    return text.replace("\n", "⏎")


def guessed_tokens(logits, ids, tokenizer) -> list[str]:
    """For each token of ``ids`` after the first: its text where the model's most likely next token (argmax of the
    logits (T, vocab) one position before) is that token, else ""."""
    guesses = logits[:-1].argmax(-1)
    return [tokenizer.decode([int(actual)]) if int(guess) == int(actual) else ""
            for guess, actual in zip(guesses, ids[1:])]
