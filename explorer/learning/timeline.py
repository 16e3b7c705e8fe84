"""One typed timeline: every head's scores over a model's training, whatever recorded it. A training run on disk
(``explorer.learning.training_runs.TrainingRun``: its snapshots) and a Hub repo's training revisions
(``explorer.learning.hub_revisions.HubTimeline``) are each a ``Timeline``, so the views draw and name both alike.

At each step, every head's induction and previous-token score on the standard probe (``checkpointing.in_context``:
random tokens read twice); a head is an induction head from the step its score first reaches ``THRESHOLD``.
"""

import numpy as np

from checkpointing.in_context import THRESHOLD

# the scores a timeline holds at each step, by field, and what the two heads of the copying circuit are called
CIRCUIT = {"previous_token": "previous-token head", "induction": "induction head"}


def step_label(step) -> str:
    """A step as the views name it: "step 1,000"; a revision that names no step (``main``) by its name."""
    return f"step {step:,}" if isinstance(step, int) else str(step)


def heads_formed(steps: list, scores) -> list[tuple[int, int, object]]:
    """(layer, head, step) of every head whose score (``scores``: one layers x heads array per step) reaches
    THRESHOLD at some step, with the first such step, in the order they formed."""
    scores = np.asarray(scores)  # (steps, layers, heads)
    found = [(int(np.argmax(scores[:, l, h] >= THRESHOLD)), l, h) for l in range(scores.shape[1])
             for h in range(scores.shape[2]) if scores[:, l, h].max() >= THRESHOLD]
    return [(l, h, steps[i]) for i, l, h in sorted(found)]


def formed_line(name: str, formed: list[tuple[int, int, object]], where: str) -> str:
    """Every induction head of ``heads_formed`` named with the step it first reached THRESHOLD at (a step that is
    not a number, such as a revision named ``main``, as it is named); ``where``: what a step is (a snapshot)."""
    if not formed:
        return f"No head of {name} reaches an induction score of {THRESHOLD:g} at any {where}."
    named = ", ".join(f"L{layer}.H{head} from {step_label(step)}" for layer, head, step in formed)
    kind = "an induction head" if len(formed) == 1 else f"{len(formed)} induction heads"
    return f"{name} forms {kind} (score at least {THRESHOLD:g} at a {where}): {named}."


class Timeline:
    """Every head's scores over training. A kind of timeline gives ``name`` (whose training), ``where`` (what one
    step of it is: a "snapshot", a "revision"), ``steps`` (each a step number, or a revision's name where it names
    none) and ``scores(score)``; the rest follows from them."""

    name: str
    where: str

    @property
    def steps(self) -> list:
        raise NotImplementedError

    def scores(self, score: str = "induction") -> np.ndarray:
        """(steps, layers, heads): every head's ``score`` (a field of ``CIRCUIT``) at each step."""
        raise NotImplementedError

    def best_head(self, index: int, score: str = "induction") -> tuple[int, int, float]:
        """(layer, head, score) of the head scoring highest at step ``index``."""
        scores = self.scores(score)[index]
        layer, head = np.unravel_index(int(np.argmax(scores)), scores.shape)
        return int(layer), int(head), float(scores[layer, head])

    def best_scores(self, score: str = "induction") -> list[float]:
        """The highest ``score`` of any head, at each step."""
        return [float(np.max(scores)) for scores in self.scores(score)]

    def nearest(self, step) -> int:
        """The index of the step nearest ``step`` (the earlier of two as near)."""
        return int(np.argmin([abs(s - step) for s in self.steps]))

    def heads_formed(self, score: str = "induction") -> list[tuple[int, int, object]]:
        """``heads_formed`` of this timeline's ``score``."""
        return heads_formed(self.steps, self.scores(score))

    def formed(self) -> int | None:
        """The index of the first step where some head's induction score reaches ``THRESHOLD`` (the score at which
        the Attention heads tab labels a head "induction"), or None."""
        return next((i for i, score in enumerate(self.best_scores()) if score >= THRESHOLD), None)

    def formed_line(self, name: str | None = None) -> str:
        """``formed_line`` of this timeline: every induction head named with its first step (``name``: how the line
        names the model; default its own name)."""
        return formed_line(self.name if name is None else name, self.heads_formed(), self.where)
