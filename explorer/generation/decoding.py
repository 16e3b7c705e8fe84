"""The generation service: decoding settings checked against each other, prompts kept inside what the model
can read, generation streamed token by token from a background thread (a decoder-only model's in its running
batch: ``batching``), sampling with a per-request random generator, and a stop flag per browser session.
"""

import threading
import time
from dataclasses import dataclass, field, replace

import torch
from transformers import LogitsProcessor, LogitsProcessorList, RepetitionPenaltyLogitsProcessor, StoppingCriteria, \
    StoppingCriteriaList, TemperatureLogitsWarper, TextIteratorStreamer, TopKLogitsWarper, TopPLogitsWarper

from explorer.core.inputs import SEED_RANGE, InputProblem, count, echo, number, whole_number
from explorer.core.machine import CORES
from explorer.generation.labels import text_after
from explorer.generation.model_ids import model_ids

MAX_NEW_TOKENS = 512
MAX_TEMPERATURE = 5.0
SOLO_TURNS = threading.Semaphore(CORES)  # ``generate`` calls outside a batch (an encoder-decoder's): one a core


@dataclass(frozen=True)
class DecodingSettings:
    do_sample: bool
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    repetition_penalty: float = 1.0
    max_new_tokens: int = 64
    seed: int = 0

    def describe(self) -> str:
        """'greedy' or 'sampling (temperature 0.8, top-k 40, top-p 0.95, seed 0)', with the repetition penalty."""
        if self.do_sample:
            shaping = [f"temperature {self.temperature:g}"] + ([f"top-k {self.top_k}"] if self.top_k else []) \
                + ([f"top-p {self.top_p:g}"] if self.top_p < 1 else []) + [f"seed {self.seed}"]
            text = f"sampling ({', '.join(shaping)})"
        else:
            text = "greedy"
        return text + (f", repetition penalty {self.repetition_penalty:g}" if self.repetition_penalty != 1 else "")


def sanitize_decoding(mode, temperature, top_k, top_p, repetition_penalty, max_new_tokens, seed,
                      limit: int = MAX_NEW_TOKENS) -> tuple[DecodingSettings, list[str]]:
    """Settings from what the UI or an API client sent. Values that cannot be read raise InputProblem;
    readable ones out of range are moved into range with a notice: sampling at temperature 0 is greedy,
    temperature at most 5, top-k 0 (off) or more, top-p in (0, 1], repetition penalty in (0, 10], max new
    tokens in [1, limit]. Temperature, top-k and top-p only shape sampling: greedy decoding ignores them."""
    notices = []
    label = mode.strip().lower() if isinstance(mode, str) else ""
    if not (label.startswith("sampl") or label.startswith("greedy")):
        raise InputProblem(f"Decoding must be 'Sampling' or 'Greedy'; got {echo(mode)}.")
    do_sample = label.startswith("sampl")
    seed = whole_number(seed, "Seed", *SEED_RANGE)
    max_new, more = count(max_new_tokens, "Max new tokens", 1, limit)
    notices += more
    penalty = number(repetition_penalty, "Repetition penalty", "1 = off; allowed: above 0, at most 10")
    if not 0 < penalty <= 10:
        notices.append(f"Repetition penalty must be above 0 and at most 10; got {penalty:g}, using 1 (off).")
        penalty = 1.0
    if not do_sample:
        return DecodingSettings(False, repetition_penalty=penalty, max_new_tokens=max_new, seed=seed), notices
    temperature = number(temperature, "Temperature", f"0 to {MAX_TEMPERATURE:g}; 0 is greedy")
    top_k = number(top_k, "Top-k", "0 = off, or a whole number of tokens")
    top_p = number(top_p, "Top-p", "above 0, at most 1; 1 = off")
    if temperature <= 0:
        notices.append("Temperature 0 means always taking the most likely token: decoding greedily instead of sampling.")
        return DecodingSettings(False, repetition_penalty=penalty, max_new_tokens=max_new, seed=seed), notices
    if temperature > MAX_TEMPERATURE:
        notices.append(f"Temperature {temperature:g} is above the maximum {MAX_TEMPERATURE:g}; using {MAX_TEMPERATURE:g}.")
        temperature = MAX_TEMPERATURE
    if top_k < 0 or not top_k.is_integer():
        notices.append(f"Top-k must be 0 (off) or a whole number of tokens; got {top_k:g}, turning it off.")
        top_k = 0
    if not 0 < top_p <= 1:
        notices.append(f"Top-p must be above 0 and at most 1; got {top_p:g}, using 1 (off).")
        top_p = 1.0
    return DecodingSettings(True, temperature, int(top_k), top_p, penalty, max_new, seed), notices


@dataclass(frozen=True)
class GenerateLabels:
    """What the Generate view calls its boxes for a model: a decoder-only model continues a prompt, an
    encoder-decoder (folio-to-modern) rewrites First Folio lines; the rewrite's note shows for it alone."""

    prompt: str
    output: str
    rewrite_note: bool

    @classmethod
    def of(cls, is_encoder_decoder: bool) -> "GenerateLabels":
        if is_encoder_decoder:
            return cls("First Folio lines to rewrite, one per line", "Rewrite in modern spelling (streamed token by token)", True)
        return cls("Prompt", "Prompt and continuation (streamed token by token)", False)


MAX_REWRITE_LINES = 24  # lines of a passage an encoder-decoder rewrites in one request (each up to max new tokens)


def rewrite_lines(text: str) -> tuple[list[str], list[str]]:
    """The lines an encoder-decoder rewrites, one at a time, and notices. folio-to-modern was trained on single
    lines: fed a whole passage it loses the thread ("...lend me your eares:\\nI come to bury Caesar" came out as
    "...lend me your ears. Welcome to bury,"), fed line by line it rewrites each. Blank lines are skipped; at
    most MAX_REWRITE_LINES."""
    lines = [line.strip() for line in text.splitlines() if line.strip()] or [text]
    if len(lines) > MAX_REWRITE_LINES:
        return lines[:MAX_REWRITE_LINES], [f"The text has {len(lines)} lines; rewriting the first {MAX_REWRITE_LINES}."]
    return lines, []


def first_line(text: str) -> tuple[str, list[str]]:
    """The line an encoder-decoder's one-pass views (attention, the forward pass, sampling) read: the first of
    ``rewrite_lines``, with a notice when the text has more."""
    lines = rewrite_lines(text)[0]
    more = [] if len(lines) == 1 else [f"This model rewrites one line at a time: showing the first of your {len(lines)} lines."]
    return lines[0], more


def encode_prompt(model, tokenizer, text: str, max_new_tokens: int) -> tuple[torch.Tensor, int, list[str]]:
    """Token ids (1, T) for the prompt, kept inside what the model can attend to, and the max new tokens that
    still fit. A decoder-only model keeps the END of a long prompt (the text it continues); a seq2seq model
    keeps the beginning of its source. Notices say what was cut."""
    notices = []
    ids = model_ids(tokenizer, text, model.config.vocab_size, "The text")
    context, hard_limit = model.config.context_length, model.config.position_limit
    if model.config.is_encoder_decoder:
        budget = hard_limit or context
        if ids.shape[1] > budget:
            notices.append(f"The text is {ids.shape[1]} tokens; the encoder reads at most {budget}: rewriting the first {budget}.")
            ids = ids[:, :budget]
        if hard_limit and max_new_tokens > hard_limit - 1:
            notices.append(f"The decoder has {hard_limit} positions: generating at most {hard_limit - 1} tokens.")
            max_new_tokens = hard_limit - 1
        return ids, max_new_tokens, notices
    if hard_limit and max_new_tokens > hard_limit - 1:
        notices.append(f"This model has {hard_limit} positions: generating at most {hard_limit - 1} new tokens.")
        max_new_tokens = hard_limit - 1
    budget = hard_limit - max_new_tokens if hard_limit else context
    if ids.shape[1] > budget:
        notices.append(f"The prompt is {ids.shape[1]} tokens, longer than the {budget} this model reads here: "
                       f"keeping its last {budget} tokens.")
        ids = ids[:, -budget:]
    return ids, max_new_tokens, notices


class TokenStreamer(TextIteratorStreamer):
    """A ``TextIteratorStreamer`` that releases text after EVERY token (the stock one waits for a space),
    holding back only an incomplete UTF-8 sequence (an emoji split over byte tokens). Counts tokens and
    records when the first one arrived, and how many are ids past the tokenizer's entries (``unreadable``: a model
    may score more ids than its tokenizer has, a vocabulary padded to a round size; those decode to no text)."""

    def __init__(self, tokenizer, skip_prompt: bool = True, timeout: float | None = None):
        super().__init__(tokenizer, skip_prompt=skip_prompt, timeout=timeout, skip_special_tokens=True)
        self.n_tokens = 0
        self.entries = len(tokenizer)  # its ids are 0 .. entries - 1, added tokens included
        self.unreadable = 0
        self.held = 0  # tokens held back because their text ends inside a character
        self.started = time.perf_counter()
        self.first_token_at: float | None = None
        self.previous: int | None = None  # the prompt's last token: the text is decoded after it (``text_after``)

    def put(self, value: torch.Tensor) -> None:
        value = value[0] if value.dim() > 1 else value
        if self.skip_prompt and self.next_tokens_are_prompt:
            self.next_tokens_are_prompt = False
            self.previous = int(value[-1]) if value.numel() else None
            return
        self.n_tokens += value.numel()
        self.unreadable += int((value >= self.entries).sum())
        self.first_token_at = self.first_token_at or time.perf_counter()
        self.token_cache.extend(value.tolist())
        text = (self.tokenizer.decode(self.token_cache, **self.decode_kwargs) if self.previous is None
                else text_after(self.tokenizer, self.previous, self.token_cache, **self.decode_kwargs))
        if text.endswith("\ufffd") and self.held < 3:  # a UTF-8 character spans at most 4 byte tokens
            self.held += 1
            return
        self.held = 0
        self.on_finalized_text(text[self.print_len:])
        self.print_len = len(text)


class GumbelSampler(LogitsProcessor):
    """Sampling by the Gumbel-max trick: argmax(log p + G), G ~ Gumbel(0, 1), is a draw from p.

    Used with greedy ``generate`` so that each request draws from its OWN ``torch.Generator``: the seed
    reproduces the text even while other requests sample at the same time (torch's global RNG is shared)."""

    def __init__(self, seed: int):
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        uniform = torch.rand(scores.shape, generator=self.generator).clamp_(1e-20, 1.0)
        return scores.float().log_softmax(-1) - torch.log(-torch.log(uniform))


@dataclass
class StopFlag(StoppingCriteria):
    """Ends generation as soon as ``event`` is set (the Stop button, or a client that went away)."""
    event: threading.Event

    def __call__(self, input_ids: torch.Tensor, scores, **kwargs) -> torch.Tensor:
        return torch.full((input_ids.shape[0],), self.event.is_set(), dtype=torch.bool)


def sampling_processors(settings: DecodingSettings) -> LogitsProcessorList:
    """transformers' own temperature, top-k and top-p processors for ``settings``, in the order
    ``generate(do_sample=True)`` applies them (after the repetition penalty); none for greedy decoding."""
    processors = LogitsProcessorList()
    if settings.do_sample:
        if settings.temperature != 1.0:
            processors.append(TemperatureLogitsWarper(settings.temperature))
        if settings.top_k > 0:
            processors.append(TopKLogitsWarper(settings.top_k))
        if settings.top_p < 1.0:
            processors.append(TopPLogitsWarper(settings.top_p))
    return processors


def all_processors(settings: DecodingSettings) -> LogitsProcessorList:
    """transformers' repetition penalty (first, where ``generate`` puts it), then ``sampling_processors``."""
    penalty = [RepetitionPenaltyLogitsProcessor(settings.repetition_penalty)] if settings.repetition_penalty != 1.0 else []
    return LogitsProcessorList([*penalty, *sampling_processors(settings)])


def request_processors(settings: DecodingSettings) -> LogitsProcessorList:
    """One request's: ``all_processors``, then a GumbelSampler with its seed when sampling; argmax picks its token."""
    return LogitsProcessorList([*all_processors(settings), *([GumbelSampler(settings.seed)] if settings.do_sample else [])])


def generation_kwargs(model, settings: DecodingSettings, stop: threading.Event | None = None) -> dict:
    """Keyword arguments for ``model.generate``: always the greedy loop over ``request_processors``."""
    config = model.generation_config
    return dict(
        max_new_tokens=settings.max_new_tokens, do_sample=False, num_beams=1, temperature=None, top_k=None, top_p=None,
        use_cache=True,  # whatever the checkpoint's config says (training may have saved use_cache=false)
        repetition_penalty=None, logits_processor=request_processors(settings),
        stopping_criteria=StoppingCriteriaList([StopFlag(stop or threading.Event())]),
        pad_token_id=padding_id(config),
    )


def padding_id(config) -> int | None:
    """The id ``generate`` writes after a row has ended: the pad token, else the end-of-text token, the first where a
    model has several (Llama 3's chat models end on any of three; generate takes one id here)."""
    if config.pad_token_id is not None:
        return config.pad_token_id
    eos = config.eos_token_id
    if isinstance(eos, list):
        return eos[0] if eos else None
    return eos


@dataclass
class GenerationRun:
    """A ``generate`` call running in its own thread; iterate ``streamer`` for text, set ``stop`` to end it."""

    streamer: TokenStreamer
    thread: threading.Thread
    stop: threading.Event
    error: list = field(default_factory=list)

    def tokens_per_second(self) -> float:
        n, first = self.streamer.n_tokens, self.streamer.first_token_at
        return n / max(time.perf_counter() - self.streamer.started, 1e-9) if n and first is not None else 0.0


def start_generation(model, tokenizer, input_ids: torch.Tensor, settings: DecodingSettings,
                     stop: threading.Event | None = None) -> GenerationRun:
    """Start generating in a background thread (once one of the ``SOLO_TURNS`` is free); the returned run streams
    the new text token by token and ends early once ``stop`` (a new flag when not given) is set."""
    streamer = TokenStreamer(tokenizer, skip_prompt=True, timeout=120)  # seq2seq: skips the decoder start token
    run = GenerationRun(streamer, None, stop or threading.Event())  # type: ignore[arg-type]
    kwargs = generation_kwargs(model, settings, run.stop)

    def work():
        try:
            with SOLO_TURNS, torch.inference_mode():
                model.generate(input_ids, attention_mask=torch.ones_like(input_ids), streamer=streamer, **kwargs)
        except Exception as error:  # noqa: BLE001 - reported to the consumer, who shows it
            run.error.append(error)
            streamer.on_finalized_text("", stream_end=True)

    run.thread = threading.Thread(target=work, daemon=True, name="generate")
    run.thread.start()
    return run


def token_count(n: int) -> str:
    """'1 token', '12 tokens'."""
    return f"{n} token" + ("" if n == 1 else "s")


@dataclass
class GenerationStats:
    """What a generation took, over all its ``generate`` calls: new tokens, the seconds spent generating (from
    each call's start to its last token), and the latency of the first call's first token.
    tokens/s = n_tokens / seconds."""

    n_tokens: int = 0
    seconds: float = 0.0
    first_token_latency: float | None = None
    unreadable: int = 0  # new tokens the tokenizer has no entry for (``TokenStreamer.unreadable``)

    def add(self, streamer: TokenStreamer, ended_at: float) -> None:
        """Count one finished call, streamed through ``streamer`` and ended at ``ended_at`` (perf_counter)."""
        self.n_tokens += streamer.n_tokens
        self.unreadable += streamer.unreadable
        self.seconds += ended_at - streamer.started
        if self.first_token_latency is None and streamer.first_token_at is not None:
            self.first_token_latency = streamer.first_token_at - streamer.started

    @property
    def tokens_per_second(self) -> float:
        return self.n_tokens / max(self.seconds, 1e-9) if self.n_tokens else 0.0

    def describe(self) -> str:
        """'**40 tokens** · **61.2 tokens/s** · first token after 35 ms' (markdown)."""
        latency = (f" · first token after {1000 * self.first_token_latency:.0f} ms"
                   if self.first_token_latency is not None else "")
        return f"**{token_count(self.n_tokens)}** · **{self.tokens_per_second:.1f} tokens/s**{latency}"


def generate_ids(model, input_ids: torch.Tensor, settings: DecodingSettings) -> torch.Tensor:
    """``model.generate`` with these settings, all at once: (1, T) ids (a seq2seq model's start with the
    decoder start token; a decoder-only model's with the prompt)."""
    with torch.inference_mode():
        return model.generate(input_ids, attention_mask=torch.ones_like(input_ids), **generation_kwargs(model, settings))


def generate_text(model, tokenizer, text: str, settings: DecodingSettings) -> tuple[str, list[str]]:
    """The whole continuation (or rewrite) at once; for the side-by-side comparison."""
    ids, max_new, notices = encode_prompt(model, tokenizer, text, settings.max_new_tokens)
    out = generate_ids(model, ids, replace(settings, max_new_tokens=max_new))
    if model.config.is_encoder_decoder:
        return tokenizer.decode(out[0], skip_special_tokens=True), notices
    return text_after(tokenizer, ids[0, -1], out[0, ids.shape[1]:], skip_special_tokens=True), notices


class StopRegistry:
    """Browser session -> the stop flag of its running generation, so the Stop button ends only its own."""

    def __init__(self):
        self._flags: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def register(self, session: str | None, flag: threading.Event) -> None:
        if session:
            with self._lock:
                self._flags[session] = flag

    def release(self, session: str | None, flag: threading.Event) -> None:
        with self._lock:
            if session and self._flags.get(session) is flag:
                del self._flags[session]

    def stop(self, session: str | None) -> bool:
        """Set the session's flag; False when it has no generation running."""
        with self._lock:
            flag = self._flags.get(session) if session else None
        if flag is not None:
            flag.set()
        return flag is not None
