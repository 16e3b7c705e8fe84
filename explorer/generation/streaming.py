"""Streaming a generation to the app, token by token: a decoder-only model continues the text in the running batch
(``batching``), an encoder-decoder rewrites it line by line (``generation.start_generation``). It sits above both,
so that ``generation`` (decoding settings, one generate() call) does not import ``batching``, which builds on it."""

import threading
import time
from dataclasses import dataclass, replace

from explorer.generation import batching
from explorer.generation.decoding import DecodingSettings, GenerationStats, encode_prompt, rewrite_lines, start_generation


@dataclass
class StreamState:
    """One update of ``stream_generation``: the text so far (a continuation after its prompt; a rewrite alone),
    which source line is being generated (0-based, of ``n_lines``) and its prompt's length in tokens, the new
    tokens so far over all lines, the current line's tokens/s, and the notices so far. ``starting`` marks the
    update before a line's first token; the last update has ``stats`` (the whole generation) and ``stopped``
    (ended by the stop flag)."""

    text: str
    line: int
    n_lines: int
    prompt_tokens: int
    n_tokens: int
    tokens_per_second: float
    notices: list[str]
    starting: bool = False
    stats: GenerationStats | None = None
    stopped: bool = False


def stream_generation(model, tokenizer, text: str, settings: DecodingSettings, stop: threading.Event):
    """Generate from ``text`` token by token, yielding a ``StreamState`` when each line starts, after every token,
    and once at the end. A decoder-only model continues the text in its running batch (``batching``); an
    encoder-decoder rewrites it line by line (``rewrite_lines``), one ``generate`` call a line. Setting ``stop``
    ends the current call after its token and skips the lines left; a consumer that closes this generator early
    sets ``stop`` too, so the background work ends with it. A failed call raises its error here."""
    rewrite = model.config.is_encoder_decoder
    sources, notices = rewrite_lines(text) if rewrite else ([text], [])
    output = "" if rewrite else text
    stats, stopped = GenerationStats(), False
    for k, source in enumerate(sources):
        ids, max_new, cut = encode_prompt(model, tokenizer, source, settings.max_new_tokens)
        notices += [note for note in cut if note not in notices]
        run = (start_generation if rewrite else batching.start_batched)(model, tokenizer, ids, replace(settings, max_new_tokens=max_new), stop)
        output += "\n" if k else ""
        state = StreamState(output, k, len(sources), ids.shape[1], stats.n_tokens, 0.0, notices)
        finished = False
        try:
            yield replace(state, starting=True)
            for piece in run.streamer:
                output += piece
                yield replace(state, text=output, n_tokens=stats.n_tokens + run.streamer.n_tokens,
                              tokens_per_second=run.tokens_per_second())
            finished = True
        finally:
            if not finished:
                stop.set()  # the consumer went away or failed: end generate() too
        if run.error:
            raise run.error[0]
        stopped = stop.is_set()
        stats.add(run.streamer, time.perf_counter())
        if stopped:
            break
    if stats.unreadable:
        notices.append(f"{stats.unreadable} of the {stats.n_tokens} new tokens are ids the tokenizer has no entry for "
                       f"(its ids end at {len(tokenizer) - 1:,}, the model scores {model.config.vocab_size:,}): they "
                       "decode to no text.")
    elif not output.strip() or output == ("" if rewrite else text):
        notices.append("The model produced no visible text (it may have ended at once, or produced only special tokens).")
    yield StreamState(output, k, len(sources), 0, stats.n_tokens, stats.tokens_per_second, notices, stats=stats,
                      stopped=stopped)
