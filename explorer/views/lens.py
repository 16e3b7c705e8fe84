"""The logit lens: what the model would predict if it stopped after each layer.

The residual stream h_l after layer l is read out the way the model reads its last one:

    logits_l = Norm_final(h_l) W_U          (the model's own final norm, LayerNorm or RMSNorm, where it has one, and
    p_l = softmax(logits_l)                   its own LM head W_U: E^T when tied, a matrix of its own when not)

Row "embeddings" reads the stream before any layer (the token embedding, times sqrt(d_model) where the model scales
it, plus the input position encoding where there is one). The last row is the model's own output:
``hidden_states[-1]`` already went through the final norm inside the model, so it is used as it is, and its logits
equal the model's, bit for bit. ``readout`` says in words which norm and head this model has
(``explorer.views.architecture``).
"""

from dataclasses import dataclass, field

import numpy as np
import torch

from explorer.generation.decoding import DecodingSettings
from explorer.core.inputs import pick
from explorer.core.machine import CORES
from explorer.views.architecture import describe
from explorer.views.forward_pass import recorded_pass
from explorer.generation.labels import token_labels
from explorer.generation.tokens import FORWARD_MAX_TOKENS
from explorer.views.vocabulary import next_token_log_probs

TOP_K = 5


@dataclass
class LogitLens:
    """``rows``: "embeddings", "layer 0", ... One entry per row in the arrays (rows, ...)."""

    rows: list[str]
    tokens: list[str]  # the tokens the lens reads (decoder tokens for an encoder-decoder model)
    position: int  # the position whose top predictions are listed
    top_labels: list[list[str]]  # (rows, TOP_K)
    top_ids: np.ndarray  # (rows, TOP_K)
    top_probs: np.ndarray  # (rows, TOP_K)
    next_token_probs: np.ndarray  # (rows, positions - 1): p_l(token t+1 | position t), the token that came next
    model_logits: torch.Tensor = field(repr=False)  # (positions, vocab) float32: the last row's, the recorded pass's own
    notices: list[str] = field(default_factory=list)
    readout: str = ""  # how this model turns a stream into logits: its final norm and its head (tied or not)
    rewrite: str = ""  # encoder-decoder: the model's own rewrite its decoder read, as text
    decoded_with: str = ""  # encoder-decoder: how that rewrite was decoded


def final_normed(model, stream: torch.Tensor) -> torch.Tensor:
    """norm_final(h): a residual stream h (..., D) as the LM head reads the last one (h itself without a final norm)."""
    final_norm = model.model.decoder.stack.norm
    return final_norm(stream) if final_norm is not None else stream


def read_out(model, stream: torch.Tensor) -> torch.Tensor:
    """logits = norm_final(h) W_U (W_U = E^T where the head is tied): a residual stream h (..., D) read as the model
    reads its last one."""
    return model.lm_head(final_normed(model, stream))


def _layer_rows(streams: torch.Tensor, head: torch.nn.Linear, position: int, next_ids: torch.Tensor):
    """The lens rows of the layers' normed streams (rows, T, d_model): the softmax at ``position`` (rows, vocab),
    and p(token t+1 | position t) (rows, T − 1) without the (rows, T, vocab) logits (``vocabulary``), the
    vocabulary read on every core."""
    at_position = head(streams[:, position]).float().softmax(-1)
    return at_position, next_token_log_probs(streams[:, :-1], head, next_ids, workers=CORES).exp()


def logit_lens(model, tokenizer, text: str, position=None, decoding: DecodingSettings = DecodingSettings(False),
               max_tokens: int = FORWARD_MAX_TOKENS) -> LogitLens:
    """Every layer's stream in the text's recorded run through the final norm and the LM head. An
    encoder-decoder's decoder reads its own rewrite, decoded with ``decoding``.

    The lens never holds the vocabulary projection of every layer (at GPT-2 small's size 25 MB per layer and 128
    tokens): it needs each row's softmax at one position, and at every position only the probability of the token
    that came next (``_layer_rows``). The last row is the recorded pass's own logits."""
    run = recorded_pass(model, tokenizer, text, decoding, max_tokens)
    read, notices = run.read, list(run.read.notices)
    ids = read.target_ids
    position = len(ids) - 1 if position is None else pick(position, len(ids), "position")
    next_ids = ids[1:]
    with torch.inference_mode():
        streams = final_normed(model, torch.cat(run.hidden_states()[:-1]))  # (layers + 1, T, d_model)
        at_position, next_probs = _layer_rows(streams, model.lm_head, position, next_ids)
        output = run.logits.softmax(-1)
        at_position = torch.cat([at_position, output[position][None]])
        next_probs = torch.cat([next_probs, output[:-1].gather(-1, next_ids[:, None]).T])
    top = at_position.topk(min(TOP_K, at_position.shape[-1]))
    return LogitLens(
        rows=["embeddings"] + [f"layer {i}" for i in range(len(streams))],
        tokens=token_labels(tokenizer, ids), position=position,
        top_labels=[token_labels(tokenizer, row) for row in top.indices], top_ids=top.indices.numpy(),
        top_probs=top.values.numpy(), next_token_probs=next_probs.numpy(), model_logits=run.logits,
        notices=notices, readout=describe(model).readout(), rewrite=read.rewrite, decoded_with=read.decoded_with,
    )
