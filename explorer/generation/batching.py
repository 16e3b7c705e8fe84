"""Continuous batching: concurrent generations on one decoder-only model decode together, one forward pass per
step for all of them, as inference servers do.

A request joins the running batch between two steps. Its prompt is read alone (the prefill: the same pass a
solo ``generate`` makes), its first token is chosen, and its key/value cache is laid beside the others',
left-padded to the longest row: the padding is masked out and each row keeps its own positions (RoPE and
learned or sinusoidal positions read ``position_ids``; ALiBi counts distance in cache slots, which left
padding leaves unchanged between real tokens). From then on each step feeds one token per row:

    logits[b] = model(token[b] | cache[b], mask[b], position[b]),  position[b] = real tokens in row b so far

A row leaves when it ends: end of text, its max new tokens, or its stop flag (checked after each token, as
``generate``'s stopping criteria are); leading cache columns that are padding in every row left are then cut.
Each row's logits go through what ``generate`` applies to it alone (``generation.request_processors``): the
shaping processors (repetition penalty, temperature, top-k, top-p: row by row operations, so the rows that share
these settings go through them together, each row's sequence left-padded with its own first token, which the
penalty already counts), then the row's own seeded ``GumbelSampler``. A row's token depends on its own logits
and its own random draws only, so a seeded text equals a solo run's (the batched pass computes each row's
logits as the solo pass does, up to the rounding of sums taken in another order).

One decode thread per model, named ``generate``: the first request starts it; it ends when no row is left.
"""

import threading
import time
import weakref
from dataclasses import dataclass, field, replace

import torch
import torch.nn.functional as F
from transformers import DynamicCache

from explorer.generation.decoding import DecodingSettings, GenerationRun, TokenStreamer, request_processors

MAX_BATCH = 16  # the most generations the app runs at once (its concurrency limit): the rows of one batch
SHARED_UPDATE_S = 0.25  # while other rows stream too, a stream's reader gets an update at most 4 times a second


class BatchStreamer(TokenStreamer):
    """A ``TokenStreamer`` whose reader gets, with each piece, all the text queued up behind it. Alone in its
    batch, a row's reader sees every token as it comes; while ``crowded()`` (other rows stream too), the reader
    waits until ``SHARED_UPDATE_S`` has passed since its last update and gets all that came meanwhile: each update
    costs the app and its client a message, and sixteen streams a token each spent more of the 2 cores on
    messages than on decoding."""

    def __init__(self, tokenizer, crowded=lambda: False, **kwargs):
        super().__init__(tokenizer, **kwargs)
        self.crowded, self.last_update = crowded, 0.0

    def __next__(self) -> str:
        pieces = [super().__next__()]
        wait = self.last_update + SHARED_UPDATE_S - time.perf_counter()
        if wait > 0 and self.crowded():
            time.sleep(wait)
        self.last_update = time.perf_counter()
        while not self.text_queue.empty():  # one reader: what it saw queued is still there
            piece = self.text_queue.get_nowait()
            if piece is self.stop_signal:
                self.text_queue.put(piece)  # the end stays queued: the next read ends the iteration
                break
            pieces.append(piece)
        return "".join(pieces)


@dataclass(eq=False)
class Row:
    """One request in the batch: its sequence so far (1, prompt + new tokens; the repetition penalty reads
    it), its settings, its stop flag and streamer, and its error, if any."""

    ids: torch.Tensor
    settings: DecodingSettings
    stop: threading.Event
    streamer: TokenStreamer
    error: list = field(default_factory=list)
    n_new: int = 0

    def __post_init__(self):
        self.shaping = request_processors(self.settings)  # the shaping processors, then the sampler when sampling
        self.sampler = self.shaping.pop() if self.settings.do_sample else None
        self.shaped_alike = replace(self.settings, seed=0, max_new_tokens=0)  # rows with these settings shape together


class DecodeLoop:
    """The running batch of one model: its rows, their cache (B, heads, L, d_head per layer) and the mask
    (B, L: 1 for a token, 0 for left padding). The model is held weakly, and strongly only while the decode thread
    runs: a loop never keeps alive a model the registry let go."""

    def __init__(self, model):
        self._model = weakref.ref(model)
        eos = model.generation_config.eos_token_id
        self.eos = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
        self.rows: list[Row] = []
        self.pending: list[Row] = []
        self.cache: DynamicCache | None = None
        self.mask: torch.Tensor | None = None
        self.lock = threading.RLock()  # reentrant: a holder may submit (a test gathers requests this way)
        self.thread: threading.Thread | None = None
        self.largest_batch = 0  # the most rows one step has fed (a record for tests and benchmarks)

    @property
    def model(self):
        return self._model()

    def submit(self, row: Row) -> threading.Thread:
        """Queue ``row`` to join at the next step; start the decode thread if none runs. Returns the thread."""
        with self.lock:
            self.pending.append(row)
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, args=(self.model,), daemon=True, name="generate")
                self.thread.start()
            return self.thread

    def _run(self, model) -> None:
        """Decode until no row is left; ``model``: held for as long as the thread runs."""
        while True:
            with self.lock:
                joining, self.pending = self.pending, []
                if not joining and not self.rows:
                    self.thread = None
                    return
            with torch.inference_mode():
                for row in joining:
                    self._guarded([row], self._join, row)
                if self.rows:
                    self._guarded(self.rows, self._step)

    def _guarded(self, rows: list[Row], work, *args) -> None:
        """Run ``work``; on failure end ``rows`` with the error (their consumers raise it) and drop the batch
        if it was the batch's step that failed."""
        try:
            work(*args)
        except Exception as error:  # noqa: BLE001 - reported to each consumer, who shows it
            for row in rows:
                row.error.append(error)
                row.streamer.on_finalized_text("", stream_end=True)
            if rows is self.rows:
                self.rows, self.cache, self.mask = [], None, None

    @staticmethod
    def _pick(rows: list[Row], logits: torch.Tensor) -> torch.Tensor:
        """The rows' next tokens (B,) from their (B, vocab) logits, through each row's processors."""
        logits, tokens = logits.to(dtype=torch.float32), torch.empty(len(rows), dtype=torch.long)
        alike: dict[DecodingSettings, list[int]] = {}
        for b, row in enumerate(rows):
            alike.setdefault(row.shaped_alike, []).append(b)
        for members in alike.values():
            width = max(rows[b].ids.shape[1] for b in members)
            ids = torch.cat([F.pad(rows[b].ids, (width - rows[b].ids.shape[1], 0), value=int(rows[b].ids[0, 0]))
                             for b in members])
            scores = rows[members[0]].shaping(ids, logits[members])
            for j, b in enumerate(members):
                sampler = rows[b].sampler
                tokens[b] = (sampler(None, scores[j:j + 1]) if sampler else scores[j:j + 1]).argmax(-1)[0]
        return tokens

    def _emit(self, row: Row, token: torch.Tensor) -> bool:
        """Append and stream the row's next token (a 0-d tensor); True when the row has ended."""
        row.ids = torch.cat([row.ids, token.view(1, 1)], dim=1)
        row.n_new += 1
        row.streamer.put(token.view(1))
        ended = int(token) in self.eos or row.n_new >= row.settings.max_new_tokens or row.stop.is_set()
        if ended:
            row.streamer.end()
        return ended

    def _join(self, row: Row) -> None:
        """The prefill: the prompt read alone, its first token chosen; the row joins the batch unless it ended."""
        row.streamer.put(row.ids)  # the prompt (the streamer skips it)
        length = row.ids.shape[1]
        cache = DynamicCache(config=self.model.config)
        out = self.model(input_ids=row.ids, attention_mask=torch.ones_like(row.ids), position_ids=torch.arange(length)[None],
                         past_key_values=cache, use_cache=True, logits_to_keep=1)
        if self._emit(row, self._pick([row], out.logits[:, -1])[0]):
            return
        if self.cache is None:
            self.rows, self.cache, self.mask = [row], cache, torch.ones(1, length, dtype=torch.long)
            return
        width = self.mask.shape[1]
        mine, theirs = max(width - length, 0), max(length - width, 0)  # left padding for the newcomer, the batch
        layers = [(torch.cat([F.pad(old.keys, (0, 0, theirs, 0)), F.pad(new.keys, (0, 0, mine, 0))]),
                   torch.cat([F.pad(old.values, (0, 0, theirs, 0)), F.pad(new.values, (0, 0, mine, 0))]))
                  for old, new in zip(self.cache.layers, cache.layers)]
        self.cache = DynamicCache(layers, config=self.model.config)
        self.mask = torch.cat([F.pad(self.mask, (theirs, 0)), F.pad(torch.ones(1, length, dtype=torch.long), (mine, 0))])
        self.rows.append(row)

    def _step(self) -> None:
        """One token for every row; the rows that ended leave, and all-padding leading columns are cut."""
        tokens = torch.cat([row.ids[:, -1:] for row in self.rows])
        mask = torch.cat([self.mask, torch.ones(len(self.rows), 1, dtype=torch.long)], dim=1)
        positions = mask.sum(-1, keepdim=True) - 1
        self.largest_batch = max(self.largest_batch, len(self.rows))
        out = self.model(input_ids=tokens, attention_mask=mask, position_ids=positions, past_key_values=self.cache,
                         use_cache=True)
        self.mask = mask
        ended = [self._emit(row, token) for row, token in zip(self.rows, self._pick(self.rows, out.logits[:, -1]))]
        if not any(ended):
            return
        keep = torch.tensor([b for b, done in enumerate(ended) if not done], dtype=torch.long)
        self.rows = [row for row, done in zip(self.rows, ended) if not done]
        if not self.rows:
            self.cache, self.mask = None, None
            return
        self.cache.batch_select_indices(keep)
        self.mask = self.mask[keep]
        cut = int((self.mask.sum(0) == 0).cumprod(0).sum())  # leading columns that are padding in every row
        if cut:
            self.mask = self.mask[:, cut:]
            for layer in self.cache.layers:
                layer.keys, layer.values = layer.keys[:, :, cut:], layer.values[:, :, cut:]


_loops: "weakref.WeakKeyDictionary[torch.nn.Module, DecodeLoop]" = weakref.WeakKeyDictionary()
_loops_lock = threading.Lock()


def decode_loop(model) -> DecodeLoop:
    """The model's decode loop (one per model object, made on first use)."""
    with _loops_lock:
        if model not in _loops:
            _loops[model] = DecodeLoop(model)
        return _loops[model]


def start_batched(model, tokenizer, input_ids: torch.Tensor, settings: DecodingSettings,
                  stop: threading.Event | None = None) -> GenerationRun:
    """``generation.start_generation`` for a decoder-only model, decoded in the model's running batch: the
    returned run streams this request's new text token by token and ends early once ``stop`` is set."""
    loop = decode_loop(model)
    streamer = BatchStreamer(tokenizer, crowded=lambda: len(loop.rows) > 1, skip_prompt=True, timeout=120)
    row = Row(input_ids, settings, stop or threading.Event(), streamer)
    thread = loop.submit(row)
    return GenerationRun(streamer, thread, row.stop, row.error)
