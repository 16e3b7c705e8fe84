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
from explorer.views.architecture import describe
from explorer.views.forward_pass import recorded_pass
from explorer.generation.tokens import FORWARD_MAX_TOKENS, token_labels

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
    logits: torch.Tensor = field(repr=False)  # (rows, positions, vocab) float32
    notices: list[str] = field(default_factory=list)
    readout: str = ""  # how this model turns a stream into logits: its final norm and its head (tied or not)


def read_out(model, stream: torch.Tensor) -> torch.Tensor:
    """logits = LayerNorm_final(h) W_E^T: a residual stream h (..., D) read as the model reads its last one."""
    final_norm = model.model.decoder.stack.norm
    return model.lm_head(final_norm(stream) if final_norm is not None else stream)


def logit_lens(model, tokenizer, text: str, position=None, decoding: DecodingSettings = DecodingSettings(False),
               max_tokens: int = FORWARD_MAX_TOKENS) -> LogitLens:
    """Every layer's stream in the text's recorded run through the final norm and the LM head. An
    encoder-decoder's decoder reads its own rewrite, decoded with ``decoding``."""
    run = recorded_pass(model, tokenizer, text, decoding, max_tokens)
    read, notices = run.read, list(run.read.notices)
    with torch.inference_mode():
        hidden = run.hidden_states()
        logits = torch.stack([read_out(model, h)[0] for h in hidden[:-1]] + [model.lm_head(hidden[-1])[0]]).float()
    ids = read.target_ids
    position = len(ids) - 1 if position is None else pick(position, len(ids), "position")
    probs = logits.softmax(-1)
    top = probs[:, position].topk(min(TOP_K, probs.shape[-1]))
    next_ids = ids[1:]
    next_probs = probs[:, :-1].gather(-1, next_ids[None, :, None].expand(len(hidden), -1, 1))[..., 0]
    return LogitLens(
        rows=["embeddings"] + [f"layer {i}" for i in range(len(hidden) - 1)],
        tokens=token_labels(tokenizer, ids), position=position,
        top_labels=[token_labels(tokenizer, row) for row in top.indices], top_ids=top.indices.numpy(),
        top_probs=top.values.numpy(), next_token_probs=next_probs.numpy(), logits=logits, notices=notices,
        readout=describe(model).readout(),
    )
