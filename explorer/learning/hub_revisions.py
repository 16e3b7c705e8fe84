"""A real language model learning: the training checkpoints a Hub repo publishes as revisions (Pythia: ``step0`` …
``step143000``), each opened as our Transformer (``explorer.models.opening``, cached) and seen as the training runs are seen
(``explorer.learning.watch_it_learn``): every head's induction and previous-token score on the standard probes
(``checkpointing.in_context``), the attention of the best induction head on the learner's text, and a greedy sample.
What is measured is a ``HubTimeline`` (a ``Timeline``, as a training run is); its ``to_json()`` is the API's JSON.

``request`` checks what was asked; its ``opening()`` downloads every revision's files and streams the progress, its
``measure()`` opens and measures them one at a time, letting each one's weights go before the next (at most one
revision held beside what the app holds: 12 revisions of Pythia-160M fit a 16 GB Space), and returns the
``HubTimeline``; ``hub_timeline`` does both (the API), the Watch it learn tab runs them as two events
(``ui.tabs.watch_it_learn``).

Induction score: on random tokens r_0..r_{L-1} followed by the same tokens again, the mean attention from each token
of the second copy to the token after its first occurrence; a head spreading its weight evenly scores about 1/T.
"""

import re
import threading
from dataclasses import asdict, dataclass, field, replace
from typing import Callable, Iterator

import numpy as np
from huggingface_hub import HfApi
from huggingface_hub import errors as hub_errors

from checkpointing.in_context import head_scores, induction_baseline, INDUCTION_LENGTH

from explorer.models import hub_cache, hub_files, jobs, opening, registry
from explorer.generation.decoding import generate_ids
from explorer.generation.labels import text_after
from explorer.core.inputs import InputProblem, echo, kind_of
from explorer.learning.guesses import guessed_tokens, shown_tokens
from explorer.learning.timeline import Timeline
from explorer.learning.watch_it_learn import GREEDY, check_text
from explorer.views.forward_pass import record_pass

MAX_REVISIONS = 12
# one measurement at a time, whichever event asks (the API's, in the opening slots, of which there are four; the
# tab's, in the views' slot): the model's work never takes more than one core from the generations' decode thread
MEASURING = threading.Lock()


def step_of(revision: str) -> int | None:
    """The training step a revision names (``step1000`` -> 1000), else None."""
    match = re.fullmatch(r"step(\d+)", revision)
    return int(match.group(1)) if match else None


def spaced(names: list, n: int = MAX_REVISIONS) -> list:
    """``n`` of ``names`` evenly spaced by position, the first and last among them."""
    if len(names) <= n:
        return list(names)
    return [names[round(i * (len(names) - 1) / (n - 1))] for i in range(n)]


def training_revisions(repo_id: str) -> list[str]:
    """The repo's ``step<N>`` branches and tags, in step order (asked of the Hub, bounded by the stall limit). A
    private or gated repo is refused before its names are listed (a lent token could list them)."""
    def work(job):
        job.report("listing the repo's revisions", hub=True)
        api = HfApi(endpoint=hub_files.endpoint(), token=hub_files.token())
        hub_files.refuse_restricted(repo_id, api.model_info(repo_id, timeout=hub_files.HTTP_TIMEOUT))
        refs = api.list_repo_refs(repo_id)
        return [ref.name for ref in [*refs.branches, *refs.tags]]

    names = jobs.run_shared(("refs", repo_id), work).outcome()
    steps = sorted((step_of(n), n) for n in names if step_of(n) is not None)
    if not steps:
        raise InputProblem(f"{echo(repo_id)} has no revisions named `step<N>` (as Pythia's training checkpoints are): "
                           "name the revisions to compare.")
    return [name for _, name in steps]


def pick_revisions(repo_id: str, revisions) -> list[str]:
    """The revisions asked for (a list, or a text with commas), at most ``MAX_REVISIONS``; none: the repo's
    ``step<N>`` revisions, ``MAX_REVISIONS`` of them evenly spaced."""
    if revisions is None or (isinstance(revisions, str) and not revisions.strip()) or revisions == []:
        return spaced(training_revisions(repo_id))
    if isinstance(revisions, str):
        revisions = [r for r in revisions.replace("\n", ",").split(",") if r.strip()]
    if not isinstance(revisions, list) or not all(isinstance(r, str) for r in revisions):
        raise InputProblem(f"Give the revisions as a list of texts or one text with commas; got {kind_of(revisions)}.")
    if len(revisions) > MAX_REVISIONS:
        raise InputProblem(f"{len(revisions)} revisions asked for; at most {MAX_REVISIONS} (leave it empty for "
                           f"{MAX_REVISIONS} evenly spaced ones).")
    checked = []
    for revision in revisions:
        try:
            checked.append(hub_files.check_revision(revision))
        except InputProblem:
            raise InputProblem(f"{echo(revision, 60)} is not a revision name: give a branch, tag or commit such as "
                               "`step1000`, without spaces, `..`, `~`, `^`, `:`, `?`, `*`, `[` or `\\`, with commas "
                               "between revisions; or leave the box empty for the repo's `step<N>` revisions, "
                               f"{MAX_REVISIONS} evenly spaced.") from None
    return list(dict.fromkeys(checked))


@dataclass(frozen=True)
class BestHead:
    """The head scoring highest at a revision, and its score."""

    layer: int
    head: int
    score: float


def best(scores: np.ndarray) -> BestHead:
    layer, head = np.unravel_index(int(np.argmax(scores)), scores.shape)
    return BestHead(int(layer), int(head), round(float(scores[layer, head]), 6))


@dataclass(frozen=True)
class RevisionView:
    """One opened revision, seen as a training run's snapshot is: ``induction``, ``previous_token`` (layers x heads,
    rounded to 6 places), on the learner's text the attention of the best induction head (T x T), a greedy
    ``sample``, ``guessed`` (each next token, "" where the top guess missed it) and ``read_tokens``."""

    revision: str
    commit: str | None
    step: int | None  # the training step its name says (``step_of``), else None
    menu_name: str
    induction: list[list[float]]
    previous_token: list[list[float]]
    best_induction: BestHead
    best_previous_token: BestHead
    attention_of_best_induction_head: list[list[float]]
    sample: str
    guessed: list[str]
    read_tokens: list[str]


def revision_view(name: str, text: str) -> tuple[RevisionView, list[str]]:
    """One opened revision seen as a training run's snapshot is, and the learner's text as its attention maps label
    it. Its run is recorded apart from the views' cache of runs (``record_pass``, not ``recorded_pass``): a cached
    run would keep the revision's model alive after it is let go."""
    opened = registry.opened(name)
    _, model, tokenizer = registry.resolve(name)
    scores = head_scores(model)
    induction, previous = scores["induction"], scores["previous token"]
    top = best(induction)
    read = record_pass(model, tokenizer, text, GREEDY)
    attention = read.weights("self")[top.layer, top.head].float().numpy()
    ids = read.read.source_ids[None]
    out = generate_ids(model, ids, replace(GREEDY, max_new_tokens=min(GREEDY.max_new_tokens, 24)))
    view = RevisionView(opened.revision, opened.commit, step_of(opened.revision or ""), name,
                        induction.round(6).tolist(), previous.round(6).tolist(), top, best(previous),
                        attention.round(6).tolist(), text_after(tokenizer, ids[0, -1], out[0, ids.shape[1]:], skip_special_tokens=True),
                        guessed_tokens(read.logits, ids[0], tokenizer), shown_tokens(tokenizer, ids[0]))
    return view, read.tokens("target")


def measured_revision(repo_id: str, revision: str, text: str) -> tuple[RevisionView, list[str]]:
    """One revision seen (``revision_view``): the model the app holds if it holds it; else opened from the files in
    the cache, seen, and let go again, so that Watch it learn holds one revision at a time beside what the app holds."""
    was_held = registry.holds(repo_id, revision)
    name = opening.open_repo(repo_id, revision).name
    try:
        return revision_view(name, text)
    finally:
        if not was_held:
            registry.let_go(name)  # still listed: a view that asks for it loads it again from its files


@dataclass(frozen=True)
class HubTimeline(Timeline):
    """A Hub repo's opened revisions, in step order, measured (``RevisionView``): a ``Timeline`` whose steps are its
    revisions. ``tokens``: the learner's text as the attention maps label it; ``induction_baseline``: what a head
    spreading its weight evenly scores on the probe."""

    repo_id: str
    revisions: list[RevisionView]
    tokens: list[str]
    induction_baseline: float
    notices: list[str]
    where = "revision"

    @property
    def name(self) -> str:
        return self.repo_id

    @property
    def steps(self) -> list:
        """Each revision's training step, the x axis of the views (a revision that names none, such as ``main``, by
        its name)."""
        return [v.step if v.step is not None else v.revision or v.menu_name for v in self.revisions]

    def scores(self, score: str = "induction") -> np.ndarray:
        return np.asarray([getattr(v, score) for v in self.revisions], dtype=float)

    def to_json(self) -> dict:
        """The ``hub_timeline`` API's JSON: {"repo_id", "revisions": [every field of each ``RevisionView``, a
        ``BestHead`` as {"layer", "head", "score"}], "tokens", "induction_baseline", "notices"}."""
        return asdict(self)


@dataclass
class Request:
    """A checked request: the repo, the revisions to open (in the order asked), the learner's text. ``opening()``
    opens them (downloads wait on the network), ``measure()`` then reads them (the model's work); what was downloaded
    stays in the Hub cache until then (``kept``)."""

    repo_id: str
    revisions: list[str]
    text: str
    notices: list[str]
    names: list[str] = field(default_factory=list)  # the revisions whose files are here so far
    kept: hub_cache.Kept = field(default_factory=hub_cache.Kept)

    def opening(self) -> Iterator[str]:
        """Download every revision's files (each once, whoever asks; the Hub cache keeps them), one progress line at
        a time. Nothing is converted yet: ``measure`` opens the revisions one at a time."""
        self.names = []
        try:
            for number, revision in enumerate(self.revisions, 1):
                job = download(self.repo_id, revision)
                for line in ["opening", *job.follow()]:
                    yield f"revision {revision} ({number} of {len(self.revisions)}): {line}"
                try:
                    self.kept.add(self.repo_id, job.outcome())
                except InputProblem as problem:
                    raise InputProblem(revision_problem(self.repo_id, revision, number, len(self.revisions),
                                                        problem)) from None
                self.names.append(revision)
        except BaseException:  # a revision refused, or the visitor gone (the generator closed): nothing to read
            self.kept.end()
            raise

    def measure(self, on_progress: Callable[[str], None] | None = None) -> HubTimeline:
        """What the views draw: every downloaded revision opened and measured in turn (``measured_revision``: one
        revision's weights held at a time), in step order. ``on_progress`` hears which revision is being measured."""
        with MEASURING:
            self.kept.renew()
            measured = []
            try:
                for number, revision in enumerate(self.names, 1):
                    if on_progress:
                        on_progress(f"revision {revision} ({number} of {len(self.names)}): converting, measuring every "
                                    "head, reading the text")
                    measured.append(measured_revision(self.repo_id, revision, self.text))
            finally:
                self.kept.end()
            measured.sort(key=lambda pair: (pair[0].step is None, pair[0].step or 0))
            views = [view for view, _ in measured]
            return HubTimeline(self.repo_id, views, measured[0][1], induction_baseline(INDUCTION_LENGTH), self.notices)


def download(repo_id: str, revision: str) -> jobs.Job:
    """The shared job that downloads one revision's files into the Hub cache (``hub_files.fetch``), converting
    nothing; follow it, then ``outcome()`` raises what failed."""
    def work(job: jobs.Job) -> str:
        with hub_cache.claim(repo_id) as claim:
            return hub_files.fetch(job, repo_id, revision, claim)[1]

    return jobs.run_shared(("hub files", repo_id, revision), work)


def revision_problem(repo_id: str, revision: str, number: int, count: int, problem: InputProblem) -> str:
    """Why revision ``revision`` (the ``number``-th of ``count``) of ``repo_id`` did not open, naming it, and what to
    type instead in this tab's box (empty here means the repo's ``step<N>`` revisions, not its default branch)."""
    which = f"Revision {echo(revision, 60)} ({number} of {count}) of {echo(repo_id, 90)}"
    if isinstance(problem.__cause__, hub_errors.RevisionNotFoundError):
        return (f"{which} is not on the Hub: the repo has no branch, tag or commit of that name. Check its spelling "
                f"against the repo's list of branches (Pythia's are `step0` … `step143000`, in steps of 1000 after "
                f"`step512`), remove it, or leave the box empty to take {MAX_REVISIONS} of the repo's `step<N>` "
                "revisions, evenly spaced.")
    return f"{which} did not open: {problem}"


def request(repo_id, revisions, text) -> Request:
    """Check what was asked (repo id, at most ``MAX_REVISIONS`` revisions, the text); InputProblem saying what is
    allowed. No revisions: the repo's ``step<N>`` ones, listed by the Hub."""
    repo_id = hub_files.check_repo_id(repo_id)
    text, notices = check_text(text, 2048)
    return Request(repo_id, pick_revisions(repo_id, revisions), text, notices)


def hub_timeline(repo_id, revisions, text, on_progress: Callable[[str], None] | None = None) -> HubTimeline:
    """Every revision asked for, opened (downloads cached) and measured: what the Watch it learn views draw."""
    asked = request(repo_id, revisions, text)
    for line in asked.opening():
        if on_progress:
            on_progress(line)
    return asked.measure(on_progress)
