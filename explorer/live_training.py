"""Train a tiny Transformer from scratch, live: transformers' Trainer runs in a thread, and a callback publishes
a snapshot of the model every few steps (the loss so far, a sample, one head's attention on a probe, the
induction score of every head) until the steps are done or the caller sets a stop Event.

What it trains on (Shakespeare, with or without repeated passages, repeating random tokens, or the learner's
text) is ``explorer.live_data``.

The induction score (``induction_scores``): on random tokens r_0..r_{L-1} followed by the same tokens again,
the mean attention from each token of the second copy to the token after its first occurrence (the standard
score), taken at three lengths L (``probe_lengths``), so three offsets; a head's score is the least of the
three, so a head attending one fixed distance back (right at one offset only) scores low. A head spreading
its weight evenly scores about 1/T.
"""

import queue
import shutil
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Iterator

import numpy as np
import torch
from transformers import GenerationConfig, PrinterCallback, Trainer, TrainerCallback, TrainingArguments

from checkpointing.in_context import attention_weights, induction_baseline, induction_probe, induction_scores_from
from modeling import POSITION_ENCODINGS, ScratchTransformerConfig, ScratchTransformerForCausalLM

from .live_data import SPECIAL_IDS, LiveData, shipped_tokenizer, text_ids, training_ids
from .inputs import InputProblem, echo, number, whole_number

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
MAX_LEARNING_RATE = 0.1
MAX_TEXT_CHARS = 100_000  # the learner's own text


@dataclass(frozen=True)
class LiveSettings:
    """One job. ``copy_share``: the share of tokens that copy an earlier run (random-repeats, and the Shakespeare
    sequences with repeats; see ``repeat_runs``); ``repeat_share``: the share of Shakespeare sequences with repeats."""

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


# The default job: 300 steps on Shakespeare, loss 6.9 -> 4.3 nats/token; 32 s on one thread of the shared 2-core
# machine (python -m benchmarks.live_training --threads 1 --set data=shakespeare). No setting tried formed an
# induction head that copies at varying offsets within 60 s on one core, so there is no preset for one.
DEFAULT = LiveSettings()


def check_settings(**values) -> LiveSettings:
    """A LiveSettings from a client's values (missing ones take the default); anything out of bounds is an
    InputProblem naming the choice and what is allowed."""
    unknown = sorted(set(values) - set(LiveSettings.__dataclass_fields__))
    if unknown:
        raise InputProblem(f"Unknown choice(s): {', '.join(echo(u) for u in unknown)}.")
    settings = replace(DEFAULT, **{k: v for k, v in values.items() if v is not None})
    if settings.data not in DATA_KINDS:
        raise InputProblem(f"The data must be one of {', '.join(DATA_KINDS)}; got {echo(settings.data)}.")
    if settings.position_encoding not in POSITION_ENCODINGS:
        raise InputProblem(f"The position encoding must be one of {', '.join(POSITION_ENCODINGS)}; "
                           f"got {echo(settings.position_encoding)}.")
    checked = {name: whole_number(getattr(settings, name), name.replace("_", " ").capitalize(), *bounds)
               for name, bounds in LIMITS.items()}
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
    """A fresh, seeded model: pre-norm, d_ff = 4 d_model, no dropout, tied embeddings."""
    config = ScratchTransformerConfig(
        vocab_size=vocab_size, d_model=settings.d_model, n_heads=settings.n_heads, n_layers=settings.n_layers,
        d_ff=4 * settings.d_model, dropout=0.0, position_encoding=settings.position_encoding,
        max_position_embeddings=settings.context_length, training_context_length=settings.context_length,
        pad_token_id=1, bos_token_id=0, eos_token_id=0)
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


@dataclass
class Snapshot:
    """The model at one logged step. ``attention``: (2L, 2L) weights of head (layer, head) on the probe, random
    tokens of length L twice; ``induction``: (layers, heads) scores; ``losses``: one per logged step so far."""

    step: int
    steps: int
    seconds: float
    logged_steps: list[int]
    losses: list[float]
    sample: str
    probe: list[int]
    layer: int
    head: int
    attention: list[list[float]]
    induction: list[list[float]]
    induction_baseline: float

    @property
    def loss(self) -> float:
        return self.losses[-1] if self.losses else float("nan")


@dataclass
class LiveResult:
    """The finished (or stopped) job: ``losses`` one per logged step, the model as trained, its tokenizer (None
    for random tokens)."""

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


def sample(model, settings: LiveSettings, tokenizer) -> str:
    """A greedy continuation from the current weights: of the text's first tokens, or for random tokens of the
    probe's first copy and the first 3 tokens of its second (a copying model goes on with the copy)."""
    if settings.sample_tokens == 0:
        return ""
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
        return " ".join(str(int(i)) for i in new)
    return tokenizer.decode(new)


# --- the run -------------------------------------------------------------------------------------------------

class _Publisher(TrainerCallback):
    """Every logged step: records the loss and puts a Snapshot on the queue; stops the Trainer once ``stop`` is set."""

    def __init__(self, settings, tokenizer, stop: threading.Event, out: queue.Queue, watch: tuple[int, int] | None):
        self.settings, self.tokenizer, self.stop, self.out, self.watch = settings, tokenizer, stop, out, watch
        self.logged_steps, self.losses, self.started = [], [], time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if self.stop.is_set():
            control.should_training_stop = True

    def on_log(self, args, state, control, logs=None, model=None, **kwargs):
        if not logs or "loss" not in logs:
            return
        self.logged_steps.append(state.global_step)
        self.losses.append(float(logs["loss"]))
        if not self.stop.is_set():
            self.out.put(self.snapshot(model, state.global_step))

    def snapshot(self, model, step: int) -> Snapshot:
        was_training = model.training
        model.eval()
        try:
            scores = induction_scores(model, self.settings.context_length)
            layer, head = self.watch or np.unravel_index(int(np.argmax(scores)), scores.shape)
            probe = probe_ids(self.settings, model.config.vocab_size)
            attention = attention_weights(model, probe)[layer, head]
            text = sample(model, self.settings, self.tokenizer)
        finally:
            model.train(was_training)
        T = probe.shape[1]
        return Snapshot(step, self.settings.steps, time.perf_counter() - self.started, list(self.logged_steps),
                        list(self.losses), text, probe[0].tolist(), int(layer), int(head), attention.tolist(),
                        scores.tolist(), induction_baseline(T // 2))


_DONE = object()


def train_live(settings: LiveSettings, stop: threading.Event | None = None, tokenizer=None,
               watch: tuple[int, int] | None = None) -> Iterator[Snapshot | LiveResult]:
    """Yield a Snapshot every ``log_every`` steps, then one LiveResult. Setting ``stop`` ends the job after the
    current step; closing the generator (a client that left) sets it and waits for the Trainer to end.

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
    publisher = _Publisher(settings, tokenizer, stop, out, watch)
    with tempfile.TemporaryDirectory(prefix="live-training-") as scratch:
        args = TrainingArguments(
            output_dir=scratch, max_steps=settings.steps, per_device_train_batch_size=settings.batch_size,
            learning_rate=settings.learning_rate, lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0,
            logging_steps=settings.log_every, save_strategy="no", report_to="none", use_cpu=True,
            dataloader_num_workers=0, disable_tqdm=True, seed=settings.seed, data_seed=settings.seed)
        trainer = Trainer(model=model, args=args, train_dataset=LiveData(settings, ids), callbacks=[publisher])
        trainer.remove_callback(PrinterCallback)  # the snapshots carry the losses; nothing printed per log

        def run():
            try:
                trainer.train()
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
            if not finished:  # the client left mid-job, or the consumer failed: end the Trainer after this step
                stop.set()
            thread.join()
    model.eval()
    yield LiveResult(settings, publisher.logged_steps, publisher.losses, trainer.state.global_step,
                     stop.is_set() and trainer.state.global_step < settings.steps, time.perf_counter() - started,
                     induction_scores(model, settings.context_length).tolist(), model, tokenizer)


def save_zip(result: LiveResult, folder: Path) -> Path:
    """``result``'s model (and tokenizer, for text) saved with save_pretrained into ``folder``/model, zipped to
    ``folder``/model.zip; load it with ``AutoModelForCausalLM.from_pretrained`` (``trust_remote_code=True``
    where the modeling package is not installed)."""
    target = Path(folder) / "model"
    result.model.save_pretrained(target)
    if result.tokenizer is not None:
        result.tokenizer.save_pretrained(target)
    return Path(shutil.make_archive(str(target), "zip", root_dir=target))
