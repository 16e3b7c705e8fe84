"""Bits per character of a text under a causal language model.

Bits per character does not depend on the tokenizer: total negative log-likelihood in bits / number of
characters scored. The text is read in non-overlapping windows of L tokens, as in the ALiBi paper, each window
beginning with the last token of the one before: window k covers tokens [k(L-1), k(L-1)+L) and scores its last
L-1 tokens, so every token but the very first is scored exactly once, with 1..L-1 tokens of context.
The characters of the scored tokens come from the tokenizer's offsets, so a character split over
several byte tokens (any non-ASCII one, e.g. a curly quote) counts once.
The extrapolation experiment reads the same text at L = 1x, 2x, 4x and 8x the training context.
"""

import math

import torch

EXTRAPOLATION_FACTORS = (1, 2, 4, 8)


def extrapolation_lengths(model) -> list[int]:
    """The window lengths the extrapolation experiment scores at: each factor times the training context."""
    return [factor * model.config.context_length for factor in EXTRAPOLATION_FACTORS]


def window_losses(model, tokenizer, text: str, context_length: int, batch_size: int = 8, progress=None,
                  max_windows: int | None = None) -> dict:
    """Per-token losses of ``text`` read in windows of ``context_length`` tokens (see the module docstring);
    ``max_windows``: only the first that many windows.

    Returns {"nll": (windows, L-1) tensor of nats (0 where a short last window has no token),
    "scored": bool mask of the same shape, "chars": characters scored}."""
    if context_length < 2:
        raise ValueError(f"context_length must be at least 2, got {context_length}")
    encoding = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    ids = torch.tensor(encoding["input_ids"])
    # end offset of each token; tokens of one multi-byte character share its (start, end), so the
    # characters of tokens i+1..j are ends[j] - ends[i], each character counted once
    ends = [end for _, end in encoding["offset_mapping"]]
    if len(ids) < 2:
        raise ValueError("the text is too short to score: it needs at least two tokens")
    stride = context_length - 1
    starts = list(range(0, len(ids) - 1, stride))[:max_windows]
    nll = torch.zeros(len(starts), stride)
    scored = torch.zeros(len(starts), stride, dtype=torch.bool)
    chars = 0
    with torch.inference_mode():
        for b in range(0, len(starts), batch_size):
            windows = [ids[s:s + context_length] for s in starts[b:b + batch_size]]
            batch = torch.zeros(len(windows), context_length, dtype=torch.long)
            mask = torch.zeros(len(windows), context_length, dtype=torch.long)
            for row, w in enumerate(windows):  # right padding: causal, so real positions are unaffected
                batch[row, :len(w)], mask[row, :len(w)] = w, 1
            logits = model(batch, attention_mask=mask, use_cache=False).logits.float()
            losses = torch.nn.functional.cross_entropy(
                logits[:, :-1].flatten(0, 1), batch[:, 1:].flatten(), reduction="none").view(len(windows), stride)
            real = mask[:, 1:].bool()
            nll[b:b + len(windows)] = losses * real
            scored[b:b + len(windows)] = real
            for row, s in enumerate(starts[b:b + batch_size]):
                chars += ends[s + len(windows[row]) - 1] - ends[s]
            if progress is not None:
                progress(min(1.0, (b + batch_size) / len(starts)))
    return {"nll": nll, "scored": scored, "chars": chars}


def bits_per_character(model, tokenizer, text: str, context_length: int, batch_size: int = 8, progress=None) -> dict:
    """{"bits_per_char", "loss" (nats/token), "tokens", "chars"} of ``text`` in windows of ``context_length``
    tokens; ``progress(fraction)`` is called per batch."""
    w = window_losses(model, tokenizer, text, context_length, batch_size, progress)
    nats, tokens = float(w["nll"].sum()), int(w["scored"].sum())
    return {"bits_per_char": nats / math.log(2) / w["chars"], "loss": nats / tokens, "tokens": tokens, "chars": w["chars"]}
