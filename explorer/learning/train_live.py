"""Train a tiny Transformer from scratch, live: a plain AdamW loop runs in a thread and publishes a ``Snapshot`` of
the model every few steps (``explorer.learning.live_snapshots``: the loss of every step so far, a sample, one head's
attention on a probe, the induction score of every head) until the steps are done or the caller sets a stop Event;
then one ``LiveResult`` (``explorer.learning.live_result``).

What a job may be asked for is ``explorer.learning.live_settings``, the model it builds
``explorer.learning.live_model``, what it trains on (Shakespeare, with or without repeated passages, repeating random
tokens, or the learner's text) ``explorer.learning.live_data``.
"""

import queue
import threading
import time
from typing import Iterator

import torch

from checkpointing.in_context import attention_weights, induction_baseline

from explorer.generation.symbols import symbol_tokenizer
from explorer.learning.live_data import LiveData, shipped_tokenizer, training_ids
from explorer.learning.live_model import build_model
from explorer.learning.live_result import LiveResult
from explorer.learning.live_settings import TEXT_KINDS, LiveSettings
from explorer.learning.live_snapshots import (Snapshot, least_induction_score_over_offsets, probe_ids, sample,
                                              watched_head)


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
            scores = least_induction_score_over_offsets(model, self.settings.context_length)
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
                     time.perf_counter() - started, least_induction_score_over_offsets(model, settings.context_length).tolist(),
                     model, tokenizer or symbol_tokenizer(vocab_size))  # random tokens: one symbol per id
