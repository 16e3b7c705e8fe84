"""Train a tiny Transformer from scratch, live: a plain AdamW loop runs in a thread and publishes a snapshot of
the model every few steps (the loss of every step so far, a sample, one head's attention on a probe, the
induction score of every head) until the steps are done or the caller sets a stop Event.

What it trains on (Shakespeare, with or without repeated passages, repeating random tokens, or the learner's
text) is ``explorer.learning.live_data``.

The induction score (``induction_scores``): on random tokens r_0..r_{L-1} followed by the same tokens again,
the mean attention from each token of the second copy to the token after its first occurrence (the standard
score), taken at three lengths L (``probe_lengths``), so three offsets; a head's score is the least of the
three, so a head attending one fixed distance back (right at one offset only) scores low. A head spreading
its weight evenly scores about 1/T.
"""

import queue
import shutil
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Iterator

import numpy as np
import torch
from transformers import GenerationConfig

from checkpointing.in_context import THRESHOLD, attention_weights, induction_baseline, induction_probe, induction_scores_from
from modeling import POSITION_ENCODINGS, ScratchTransformerConfig, ScratchTransformerForCausalLM

from explorer.models import catalog
from explorer.learning.live_data import SPECIAL_IDS, LiveData, shipped_tokenizer, text_ids, training_ids
from explorer.core.inputs import InputProblem, echo, number, whole_number

DATA_KINDS = {
    "shakespeare": "Shakespeare",
    "shakespeare-repeats": "Shakespeare with repeated passages",
    "random-repeats": "Repeating random tokens",
    "own-text": "Your own text",
}
TEXT_KINDS = ("shakespeare", "shakespeare-repeats", "own-text")
# (least, most) of every whole-number choice: the bounds that keep one job small on a shared CPU
LIMITS = {
    "n_layers": (1, 2),
    "n_heads": (1, 8),
    "d_model": (16, 256),
    "steps": (1, 3000),
    "batch_size": (1, 64),
    "context_length": (16, 128),
    "vocab_size": (8, 512),  # random tokens only
    "log_every": (1, 500),
    "sample_tokens": (0, 64),
    "seed": (0, 2**31 - 1),
}
# how a message names a choice: the label the tab shows beside it
LABELS = {"n_layers": "Layers", "n_heads": "Heads", "d_model": "d_model", "vocab_size": "Vocabulary size",
          "attention_only": "Attention only", "copies_only": "Loss on the copies only"}
MAX_LEARNING_RATE = 0.1
MAX_TEXT_CHARS = 100_000  # the learner's own text


@dataclass(frozen=True)
class LiveSettings:
    """One job. ``copy_share``: the share of tokens that copy an earlier run (random-repeats, and the Shakespeare
    sequences with repeats; see ``repeat_runs``); ``repeat_share``: the share of Shakespeare sequences with repeats;
    ``attention_only``: no feed-forward sublayer (``build_model``); ``copies_only``: the loss counts only the
    copyable tokens (``live_data.copyable``)."""

    data: str = "shakespeare"
    n_layers: int = 2
    n_heads: int = 4
    d_model: int = 64
    steps: int = 300
    learning_rate: float = 3e-3
    position_encoding: str = "rope"
    batch_size: int = 16
    context_length: int = 64
    vocab_size: int = 64
    copy_share: float = 0.5
    repeat_share: float = 0.5
    log_every: int = 25
    sample_tokens: int = 24
    seed: int = 0
    text: str = ""
    attention_only: bool = False
    copies_only: bool = False


# The default job: 300 steps on Shakespeare (python -m benchmarks.live_training --threads 1 --set data=shakespeare).
DEFAULT = LiveSettings()

# One-click settings: (label, the choices they set). "induction": measured through the tab's own loop, one thread
# (docs/watch-it-learn.md "Live"): the copy loss sits near ln 256 for the first ~800 steps, then falls as a layer-1
# head passes 0.3 at about step 1000 (seed 0: 1000, seed 1: 1200, with attention-only layers of the model's own).
PRESETS = {
    "induction": ("Induction head: random tokens, attention only, loss on the copies",
                  dict(data="random-repeats", n_layers=2, n_heads=4, d_model=64, vocab_size=259, context_length=64,
                       batch_size=16, learning_rate=3e-3, position_encoding="learned", copy_share=0.5, steps=2000,
                       log_every=100, attention_only=True, copies_only=True)),
}


def check_settings(**values) -> LiveSettings:
    """A LiveSettings from a client's values (missing ones take the preset's, if one is named, else the default);
    anything out of bounds is an InputProblem naming the choice and what is allowed."""
    preset = values.pop("preset", None) or None
    unknown = sorted(set(values) - set(LiveSettings.__dataclass_fields__))
    if unknown:
        raise InputProblem(f"Unknown choice(s): {', '.join(echo(u) for u in unknown)}.")
    if preset is not None and preset not in PRESETS:
        raise InputProblem(f"The preset must be one of {', '.join(PRESETS)} (or none); got {echo(preset)}.")
    values = (PRESETS[preset][1] if preset else {}) | {k: v for k, v in values.items() if v is not None}
    settings = replace(DEFAULT, **values)
    if settings.data not in DATA_KINDS:
        raise InputProblem(f"The data must be one of {', '.join(DATA_KINDS)}; got {echo(settings.data)}.")
    if settings.position_encoding not in POSITION_ENCODINGS:
        raise InputProblem(f"The position encoding must be one of {', '.join(POSITION_ENCODINGS)}; "
                           f"got {echo(settings.position_encoding)}.")
    checked = {name: whole_number(getattr(settings, name), LABELS.get(name, name.replace("_", " ").capitalize()), *bounds)
               for name, bounds in LIMITS.items()}
    for name in ("attention_only", "copies_only"):
        if not isinstance(getattr(settings, name), bool):
            raise InputProblem(f"{LABELS[name]} must be true or false; got {echo(getattr(settings, name))}.")
    if checked["d_model"] % checked["n_heads"]:
        raise InputProblem(f"d_model ({checked['d_model']}) must be divisible by the number of heads "
                           f"({checked['n_heads']}): each head reads d_model / heads dimensions.")
    if (checked["d_model"] // checked["n_heads"]) % 2 and settings.position_encoding == "rope":
        raise InputProblem("RoPE rotates pairs of dimensions: d_model / heads must be even.")
    rate = number(settings.learning_rate, "The learning rate", f"greater than 0, at most {MAX_LEARNING_RATE:g}")
    if not 0 < rate <= MAX_LEARNING_RATE:
        raise InputProblem(f"The learning rate must be greater than 0 and at most {MAX_LEARNING_RATE:g}; "
                           f"got {echo(settings.learning_rate)}.")
    shares = {}
    for name, low in (("copy_share", 0.02), ("repeat_share", 0.0)):
        value = number(getattr(settings, name), name.replace("_", " ").capitalize(), f"from {low:g} to 0.5")
        if not low <= value <= 0.5:
            raise InputProblem(f"{name.replace('_', ' ').capitalize()} must be from {low:g} to 0.5; got {echo(value)}.")
        shares[name] = value
    text = settings.text if settings.data == "own-text" else ""
    if settings.data == "own-text":
        if not isinstance(text, str) or not text.strip():
            raise InputProblem("Paste your own text first: the box is empty.")
        if len(text) > MAX_TEXT_CHARS:
            raise InputProblem(f"Your text is {len(text):,} characters; live training reads at most "
                               f"{MAX_TEXT_CHARS:,}. Shorten it.")
    return replace(settings, **checked, **shares, learning_rate=rate, text=text)


def build_model(settings: LiveSettings, vocab_size: int) -> ScratchTransformerForCausalLM:
    """A fresh, seeded model: pre-norm, d_ff = 4 d_model, no dropout, tied embeddings; ``attention_only``: layers
    with no feed-forward, x + Attn(LN(x)) (``feed_forward="none"``). Built behind ``catalog.LOAD_LOCK``:
    transformers' ``from_pretrained`` replaces torch's init functions with no-ops for the whole process while it
    loads, so a model built beside it would keep uninitialised weights."""
    feed_forward = dict(feed_forward="none") if settings.attention_only else dict(d_ff=4 * settings.d_model)
    config = ScratchTransformerConfig(
        vocab_size=vocab_size, d_model=settings.d_model, n_heads=settings.n_heads, n_layers=settings.n_layers,
        **feed_forward, dropout=0.0, position_encoding=settings.position_encoding,
        max_position_embeddings=settings.context_length, training_context_length=settings.context_length,
        pad_token_id=1, bos_token_id=0, eos_token_id=0)
    with catalog.LOAD_LOCK:  # never while a from_pretrained elsewhere has switched torch's init functions off
        torch.manual_seed(settings.seed)
        return ScratchTransformerForCausalLM(config)


# --- what a snapshot shows -----------------------------------------------------------------------------------

def probe_lengths(context_length: int) -> tuple[int, ...]:
    """The lengths L of the induction probes: three, so three offsets, each probe (2L tokens) inside the context."""
    half = context_length // 2
    return tuple(sorted({max(4, half // 2), max(4, (3 * half) // 4), half}))


def induction_scores(model, context_length: int) -> np.ndarray:
    """(layers, heads): each head's least standard induction score over the probe lengths (see the module
    docstring)."""
    scores = []
    for i, length in enumerate(probe_lengths(context_length)):
        ids = induction_probe(model.config.vocab_size, length, seed=i, skip=SPECIAL_IDS)
        scores.append(induction_scores_from(attention_weights(model, ids), length))
    return np.min(scores, axis=0)


def formed_head(induction, step: int) -> tuple[int, int, float, int] | None:
    """(layer, head, score, step) of the best head when its induction score reaches ``THRESHOLD`` (the label the
    app gives an induction head), else None: a job's status names the first step this is not None."""
    scores = np.asarray(induction, dtype=float)
    layer, head = divmod(int(scores.argmax()), scores.shape[1])
    return (layer, head, float(scores[layer, head]), step) if scores[layer, head] >= THRESHOLD else None


@dataclass
class Snapshot:
    """The model at one logged step. ``attention``: (2L, 2L) weights of head (layer, head) on the probe, random
    tokens of length L twice (the second copy starts at ``copy_start`` = L); ``induction``: (layers, heads)
    scores; ``logged_steps``/``losses``: the loss of every step so far, from step 0 (the fresh model on the first
    batch); ``watched``: why the plot shows this head; ``sample``: a ``Sample``."""

    step: int
    steps: int
    seconds: float
    logged_steps: list[int]
    losses: list[float]
    sample: "Sample"
    probe: list[int]
    layer: int
    head: int
    attention: list[list[float]]
    induction: list[list[float]]
    induction_baseline: float
    watched: str = ""

    @property
    def loss(self) -> float:
        return self.losses[-1] if self.losses else float("nan")

    @property
    def copy_start(self) -> int:
        return len(self.probe) // 2


@dataclass
class LiveResult:
    """The finished (or stopped) job: ``losses`` one per step from step 0, the model as trained, its tokenizer
    (None for random tokens)."""

    settings: LiveSettings
    logged_steps: list[int]
    losses: list[float]
    steps_done: int
    stopped: bool
    seconds: float
    induction: list[list[float]]
    model: ScratchTransformerForCausalLM = field(repr=False)
    tokenizer: object = field(default=None, repr=False)

    def to_json(self) -> dict:
        return {"losses": self.losses, "logged_steps": self.logged_steps, "steps_done": self.steps_done,
                "stopped": self.stopped, "seconds": round(self.seconds, 2), "induction": self.induction,
                "settings": {k: v for k, v in asdict(self.settings).items() if k != "text"}}


def probe_ids(settings: LiveSettings, vocab_size: int) -> torch.Tensor:
    """(1, 2L): the fixed probe whose attention a snapshot shows, L the longest probe length."""
    return induction_probe(vocab_size, probe_lengths(settings.context_length)[-1], seed=0, skip=SPECIAL_IDS)


@dataclass
class Sample:
    """A greedy continuation: ``prompt`` the tokens it read, ``tokens`` what it wrote, and for random tokens
    ``copy`` what a perfect copier writes (the probe's first copy, continued); each a list of token labels."""

    prompt: list[str]
    tokens: list[str]
    copy: list[str] = field(default_factory=list)

    @property
    def right(self) -> int:
        """How many written tokens are the copy's."""
        return sum(a == b for a, b in zip(self.tokens, self.copy))

    def __bool__(self) -> bool:
        return bool(self.tokens)


def sample(model, settings: LiveSettings, tokenizer) -> Sample:
    """A greedy continuation from the current weights: of the text's first tokens, or for random tokens of the
    probe's first copy and the first 3 tokens of its second (a copying model goes on with the copy)."""
    if settings.sample_tokens == 0:
        return Sample([], [])
    if tokenizer is None:
        probe = probe_ids(settings, model.config.vocab_size)
        prompt = probe[:, : probe.shape[1] // 2 + 3]
    else:
        prompt = text_ids(settings.text or "ROMEO.\n", tokenizer)[:8].unsqueeze(0)
    room = settings.context_length - prompt.shape[1]
    config = GenerationConfig(max_new_tokens=min(settings.sample_tokens, room), do_sample=False,
                              pad_token_id=1, eos_token_id=None, bos_token_id=0)
    with torch.no_grad():
        out = model.generate(prompt, generation_config=config)
    new = out[0, prompt.shape[1]:]
    if tokenizer is None:
        copy = probe[0, prompt.shape[1]:prompt.shape[1] + len(new)]
        return Sample([str(int(i)) for i in prompt[0]], [str(int(i)) for i in new], [str(int(i)) for i in copy])
    return Sample([tokenizer.decode([int(i)]) for i in prompt[0]], [tokenizer.decode([int(i)]) for i in new])


SWITCH_MARGIN = 0.05  # the plot moves to another head only when its score passes the watched one's by this


def watched_head(scores: np.ndarray, current: tuple[int, int] | None) -> tuple[tuple[int, int], str]:
    """The head whose probe attention to show, and why: the best induction head, kept until another passes it
    by SWITCH_MARGIN (so the plot does not flicker between two close heads); a switch is said."""
    best = tuple(int(i) for i in np.unravel_index(int(np.argmax(scores)), scores.shape))
    if current is None:
        return best, f"the best induction head (score {scores[best]:.2f})"
    if best != current and scores[best] >= scores[current] + SWITCH_MARGIN:
        return best, (f"the best induction head (score {scores[best]:.2f}); it passed L{current[0]}.H{current[1]} "
                      f"({scores[current]:.2f}) at this step")
    if best != current:  # another leads, by less than the margin: the plot stays, and says so
        return current, f"score {scores[current]:.2f}; L{best[0]}.H{best[1]} leads ({scores[best]:.2f}), by under {SWITCH_MARGIN:g}"
    return current, f"the best induction head (score {scores[current]:.2f})"


# --- the run -------------------------------------------------------------------------------------------------

class _Job:
    """The training loop, run in a thread: each step draws a batch, takes the loss, its gradient and one AdamW
    step, and records the loss; every ``log_every`` steps (and at the last) it puts a Snapshot on the queue. It
    ends after the step during which ``stop`` was set. Step 0 is the fresh model's loss on the first batch.

    A plain loop, not transformers' Trainer: on a model this small the Trainer's per-step work (its data loader,
    accelerate's wrappers, the callbacks) took longer than the arithmetic (``python -m benchmarks.live_training
    --against-bare``)."""

    def __init__(self, settings, model, data, tokenizer, stop: threading.Event, out: queue.Queue,
                 watch: tuple[int, int] | None):
        self.settings, self.model, self.data, self.tokenizer = settings, model, data, tokenizer
        self.stop, self.out, self.watch, self.watched = stop, out, watch, watch
        self.logged_steps, self.losses, self.step, self.started = [], [], 0, time.perf_counter()

    def run(self) -> None:
        s, model = self.settings, self.model
        torch.manual_seed(s.seed)
        optimizer = torch.optim.AdamW(model.parameters(), lr=s.learning_rate, weight_decay=0.0)
        batches = self.data.batches()
        batch = next(batches)
        model.train()
        with torch.no_grad():
            self.record(0, model(**batch, use_cache=False).loss)
        while self.step < s.steps and not self.stop.is_set():
            loss = model(**batch, use_cache=False).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            self.step += 1
            self.record(self.step, loss.detach())
            if (self.step % s.log_every == 0 or self.step == s.steps) and not self.stop.is_set():
                self.out.put(self.snapshot(self.step))
            batch = next(batches)

    def record(self, step: int, loss: torch.Tensor) -> None:
        self.logged_steps.append(step)
        self.losses.append(float(loss))

    def snapshot(self, step: int) -> Snapshot:
        model = self.model
        model.eval()
        try:
            scores = induction_scores(model, self.settings.context_length)
            if self.watch:
                (layer, head), why = self.watch, "the head you chose"
            else:
                (layer, head), why = watched_head(scores, self.watched)
                self.watched = (layer, head)
            probe = probe_ids(self.settings, model.config.vocab_size)
            attention = attention_weights(model, probe)[layer, head]
            text = sample(model, self.settings, self.tokenizer)
        finally:
            model.train()
        T = probe.shape[1]
        return Snapshot(step, self.settings.steps, time.perf_counter() - self.started, list(self.logged_steps),
                        list(self.losses), text, probe[0].tolist(), int(layer), int(head), attention.tolist(),
                        scores.tolist(), induction_baseline(T // 2), why)


_DONE = object()


def train_live(settings: LiveSettings, stop: threading.Event | None = None, tokenizer=None,
               watch: tuple[int, int] | None = None) -> Iterator[Snapshot | LiveResult]:
    """Yield a Snapshot every ``log_every`` steps (and at the last), then one LiveResult. Setting ``stop`` ends
    the job after the current step; closing the generator (a client that left) sets it and waits for the loop.

    ``watch``: the (layer, head) whose probe attention the snapshots show; None: the best induction head so far.
    ``tokenizer``: what reads text data (default: shakespeare-main's)."""
    stop = threading.Event() if stop is None else stop
    started = time.perf_counter()
    if settings.data in TEXT_KINDS:
        tokenizer = tokenizer or shipped_tokenizer()
        vocab_size = len(tokenizer)
    else:
        tokenizer, vocab_size = None, settings.vocab_size
    ids = training_ids(settings, tokenizer)
    model = build_model(settings, vocab_size)
    out: queue.Queue = queue.Queue()
    job = _Job(settings, model, LiveData(settings, ids), tokenizer, stop, out, watch)

    def run():
        try:
            job.run()
            out.put(_DONE)
        except BaseException as error:  # handed to the consumer, raised there
            out.put(error)

    thread = threading.Thread(target=run, name="live-training", daemon=True)
    thread.start()
    finished = False
    try:
        while not finished:
            item = out.get()
            if isinstance(item, BaseException):
                raise item
            finished = item is _DONE
            if not finished:
                yield item
    finally:
        if not finished:  # the client left mid-job, or the consumer failed: end the loop after this step
            stop.set()
        thread.join()
    model.eval()
    yield LiveResult(settings, job.logged_steps, job.losses, job.step, stop.is_set() and job.step < settings.steps,
                     time.perf_counter() - started, induction_scores(model, settings.context_length).tolist(),
                     model, tokenizer)


def save_zip(result: LiveResult, folder: Path) -> Path:
    """``result``'s model (and tokenizer, for text) saved with save_pretrained into ``folder``/model, zipped to
    ``folder``/model.zip; load it with ``AutoModelForCausalLM.from_pretrained`` (``trust_remote_code=True``
    where the modeling package is not installed)."""
    target = Path(folder) / "model"
    result.model.save_pretrained(target)
    if result.tokenizer is not None:
        result.tokenizer.save_pretrained(target)
    return Path(shutil.make_archive(str(target), "zip", root_dir=target))
