"""Hidden states read against the whole vocabulary without ever holding their (rows, vocab) logits.

A view that scores the next token at every position (the logit lens' heat map, the loss with a head removed) needs,
for each row h (a final-normed stream, d_model wide), the log-normaliser of its logits under the LM head W_U (V x D):

    log p(x | h) = logit_x − log Z,   logit_x = h · W_U[x] (+ b_x),   log Z = log Σ_v exp(h · W_U[v] + b_v)

logit_x is one dot product; log Z needs every logit, taken ``VOCAB_CHUNK`` tokens at a time. At GPT-2 small's size
(V = 50,257) one chunk's (rows x 2048) logits stay in the processor's cache, and the product of many rows with a
chunk runs near the processor's peak: on one core of the project's machine 64 rows against all 50,257 at once ran at
50 GFLOP/s, against 77 in chunks of 2048. The
chunks split into ``workers`` parts run side by side (torch releases the GIL inside its kernels).
"""

from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn.functional as F

VOCAB_CHUNK = 2048  # tokens of the LM head at a time: (rows x 2048) logits stay in the cache at GPT-2's size


def _online_log_normalizers(streams: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, chunk: int
                            ) -> torch.Tensor:
    """log Σ_v exp(logit_v) over the rows of ``weight``, ``chunk`` at a time, online (m the running maximum, s the
    running Σ exp(logit − m)):

        m' = max(m, max_chunk logit),   s' = s·exp(m − m') + Σ_chunk exp(logit − m'),   log Z = m + log s

    Every chunk's logits are written into one buffer, and exponentiated in it: a new (rows x chunk) array per chunk,
    freed in one thread while another allocates, grew the heaps to 15 times one chunk (at SmolLM-135M's size, 492 MB
    for 32 MB chunks on two workers)."""
    peak = torch.full(streams.shape[:1], -torch.inf)
    total = torch.zeros(streams.shape[:1])
    buffer = torch.empty(streams.shape[0] * min(chunk, weight.shape[0]), dtype=streams.dtype)
    for start in range(0, weight.shape[0], chunk):
        part = slice(start, start + chunk)
        rows = weight[part]
        logits = buffer[: streams.shape[0] * rows.shape[0]].view(streams.shape[0], rows.shape[0])
        if bias is None:
            torch.mm(streams, rows.T, out=logits)
        else:
            torch.addmm(bias[part], streams, rows.T, out=logits)
        logits = logits.float()  # (itself where the model computes in float32)
        new_peak = torch.maximum(peak, logits.amax(-1))
        total = total * torch.exp(peak - new_peak) + logits.sub_(new_peak[:, None]).exp_().sum(-1)
        peak = new_peak
    return peak + total.log()


def logits(streams: torch.Tensor, head: torch.nn.Linear, chunk: int = VOCAB_CHUNK) -> torch.Tensor:
    """head(streams) (N, vocab), float32, computed ``chunk`` tokens of the vocabulary at a time: the same numbers as
    one product, faster where the rows are few and the vocabulary large."""
    out = torch.empty(streams.shape[0], head.weight.shape[0])
    for start in range(0, head.weight.shape[0], chunk):
        part = slice(start, start + chunk)
        out[:, part] = F.linear(streams, head.weight[part], None if head.bias is None else head.bias[part])
    return out


def log_normalizers(streams: torch.Tensor, head: torch.nn.Linear, chunk: int = VOCAB_CHUNK, workers: int = 1
                    ) -> torch.Tensor:
    """log Z = log Σ_v exp(logit_v) for every row of ``streams`` (N, d_model), the logits ``head(streams)``. The
    vocabulary splits into ``workers`` contiguous parts, each read online a chunk at a time; the parts' log Z_k
    combine as log Z = log Σ_k exp(log Z_k)."""
    size = head.weight.shape[0]
    step = -(-size // max(1, workers))
    step = -(-step // chunk) * chunk  # each part a whole number of chunks
    parts = [slice(start, start + step) for start in range(0, size, step)]

    def part_normalizers(part: slice) -> torch.Tensor:
        bias = None if head.bias is None else head.bias[part]
        with torch.inference_mode():  # (a thread's own mode: a worker does not inherit its caller's)
            return _online_log_normalizers(streams, head.weight[part], bias, chunk)

    if len(parts) == 1:
        return part_normalizers(parts[0])
    with ThreadPoolExecutor(len(parts)) as pool:
        return torch.logsumexp(torch.stack(list(pool.map(part_normalizers, parts))), 0)


def next_token_log_probs(streams: torch.Tensor, head: torch.nn.Linear, next_ids: torch.Tensor, workers: int = 1
                         ) -> torch.Tensor:
    """log p(token t+1 | stream t) = logit_{t+1} − log Z_t for streams (..., T − 1, d_model) already through the
    final norm and the tokens that came next ``next_ids`` (T − 1,): (..., T − 1), float32."""
    width = streams.shape[-1]
    log_z = log_normalizers(streams.reshape(-1, width), head, workers=workers).reshape(streams.shape[:-1])
    next_logits = (streams * head.weight[next_ids]).sum(-1).float()
    if head.bias is not None:
        next_logits = next_logits + head.bias[next_ids].float()
    return next_logits - log_z
