"""Watch it learn: a training run (``explorer.learning.training_runs``) at one snapshot on the learner's text
(``timeline_view``). The curves and scores come from timeline.json as written; the rest is computed from the
snapshot's own weights: every head's attention on the text (one recorded pass of the snapshot,
``explorer.views.forward_pass``), the next tokens it guesses right (``explorer.learning.guesses``), a greedy
continuation of the text (``model.generate``) and the composition of its heads over training
(``explorer.learning.composition``).
"""

from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

import numpy as np

from explorer.core.inputs import InputProblem, require_text
from explorer.generation.decoding import DecodingSettings, generate_ids
from explorer.generation.labels import text_after
from explorer.learning.composition import run_composition
from explorer.learning.guesses import guessed_tokens, guesses_line, guesses_right, repeated_ending, shown_tokens
from explorer.learning.timeline import CIRCUIT
from explorer.learning.training_runs import TrainingRun, partner, pick_run, pick_snapshot, snapshot_model
from explorer.models import registry
from explorer.views.attention import AttentionMaps, View, attention_maps
from explorer.views.forward_pass import recorded_pass

# a line, then the same line again, cut a few words in: an induction head copies what followed the first time. The
# line is shorter than 64 bytes, the longest repeat the run trained on.
DEFAULT_TEXT = "If music be the food of love, play on. If music be the food"
MAX_TEXT_CHARS = 2_000
SAMPLE_TOKENS = 40  # new tokens of the greedy continuation, at most: it stays within the context the model trained at
GREEDY = DecodingSettings(False, max_new_tokens=SAMPLE_TOKENS)

COMPOSITION_SHOWN = 0.05  # a pair is named when removing its earlier head costs the later this much score


def check_text(text, context: int) -> tuple[str, list[str]]:
    """The learner's text, at most ``MAX_TEXT_CHARS`` characters and not empty; else an InputProblem."""
    if isinstance(text, str) and len(text) > MAX_TEXT_CHARS:
        raise InputProblem(f"The text is {len(text):,} characters; this view takes at most {MAX_TEXT_CHARS:,} (and the "
                           f"model reads only its first {context} tokens, one per byte): shorten it.")
    return require_text(text, "some text")


@dataclass
class TimelineView:
    """A run at one snapshot: ``maps`` every head's attention on the tokens read (at most the model's context;
    ``maps.weights["self"]`` is (layers, heads, T, T)), ``sample`` the greedy continuation of those tokens."""

    run: TrainingRun
    other: TrainingRun | None
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
        return self.run.best_head(self.index, score)

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
        """The pair that composes most at this step, or that none does yet (each costs under COMPOSITION_SHOWN)."""
        found = self.strongest_pair()
        if found is None:
            return ""
        (l1, h1, l2, h2), score = found
        if score < COMPOSITION_SHOWN:
            return (f"Composition at this step: none yet. Removing any one earlier head lowers every later head's "
                    f"induction score by less than {COMPOSITION_SHOWN:g} (on its 0 to 1 scale), so no later head "
                    "relies on an earlier one.")
        return (f"Composition at this step: removing L{l1}.H{h1} costs L{l2}.H{h2} {score:.2f} of its induction score, "
                "the most of any pair (the K-composition plot).")

    def formed_line(self) -> str:
        """When each of the run's induction heads formed, from its snapshots: every head named."""
        return self.run.formed_line()


def timeline_view(run, snapshot, text, root: Path | None = None) -> TimelineView:
    """The run named ``run`` (nothing: the default) at snapshot index ``snapshot`` (−1: the last) on ``text``: the
    attention of every head of the snapshot on the text's first tokens (up to the model's context), and the greedy
    continuation of those tokens by ``model.generate``, up to ``SAMPLE_TOKENS`` new ones while the whole fits the
    context the model was trained at. Bad input is an InputProblem saying what is allowed."""
    chosen = pick_run(run, root)
    index = pick_snapshot(snapshot, chosen)
    _, final, tokenizer = registry.resolve(chosen.name, root)
    context = final.config.context_length
    text, notices = check_text(text, context)
    model = snapshot_model(chosen, index, final)
    maps = attention_maps(model, tokenizer, text, GREEDY, context)
    read = recorded_pass(model, tokenizer, text, GREEDY, context)  # the recorded pass attention_maps read, from the cache
    ids = read.read.source_ids[None]
    room = min(SAMPLE_TOKENS, context - ids.shape[1])

    def continuation() -> str:
        out = generate_ids(model, ids, replace(GREEDY, max_new_tokens=room))
        return text_after(tokenizer, ids[0, -1], out[0, ids.shape[1]:], skip_special_tokens=True)

    sample, full = (read.cached("greedy continuation", continuation), []) if room > 0 else ("", [
        f"The text fills the model's context ({context} tokens), so there is no room to continue it: "
        "shorten it to see a sample."])
    return TimelineView(chosen, partner(chosen.name, root), index, maps, sample, notices + maps.notices + full,
                        guessed_tokens(read.logits, ids[0], tokenizer),
                        shown_tokens(tokenizer, ids[0]), [int(i) for i in ids[0]],
                        run_composition(chosen, final))
