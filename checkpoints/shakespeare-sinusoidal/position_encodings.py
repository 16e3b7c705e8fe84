# GENERATED from modeling/position_encodings.py by `python -m training.checkpoints`: edit modeling/, then run that command; never edit this copy.
"""The five ways our Transformer tells a token where it is, each beside its formula.

- sinusoidal (the paper): PE(pos) added to the token embedding, fixed, defined at every position;
- learned (GPT-2): a trained table P[pos] added to it, with no rows past its length;
- RoPE (RoFormer; Llama, GPT-NeoX): q and k of every self-attention turned by an angle that grows with the position,
  so a score depends on positions only through their offset; on a fraction of each head if asked (GPT-NeoX); its
  frequencies slowed for a longer context if asked (Llama 3.1's rule, or linear position interpolation);
- ALiBi: -slope_h * distance added to every score;
- none: nothing (a causal mask alone still tells order apart).

``modeling_scratch_transformer`` wires them in: the first two in ``InputEmbedding``, RoPE and ALiBi in attention.
"""

import math

import torch
from torch import nn

# RoPE's frequency scalings (``rope_frequencies``) and the numbers each reads, named as transformers' rope_parameters
ROPE_SCALINGS = {
    "linear": ("factor",),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
}


def sinusoidal_encoding(position_ids: torch.Tensor, d_model: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).

    i is the PAIR index (dims 2i and 2i+1 share one frequency). (..., T) positions -> (..., T, d)."""
    pair = torch.arange(0, d_model, 2, device=position_ids.device, dtype=torch.float32)  # 2i
    inv_freq = 10000.0 ** (-pair / d_model)
    angles = position_ids.to(torch.float32)[..., None] * inv_freq  # (..., T, d/2)
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # interleave sin, cos


class SinusoidalPositionalEncoding(nn.Module):
    """The paper's fixed encoding: no parameters, defined for every position (runs past training length)."""

    def __init__(self, d_model: int):
        super().__init__()
        self.d_model = d_model

    def forward(self, position_ids: torch.Tensor) -> torch.Tensor:
        return sinusoidal_encoding(position_ids, self.d_model)


class LearnedPositionalEncoding(nn.Embedding):
    """A trained table P[pos] (GPT-2); it has no rows past max_position_embeddings."""

    def forward(self, position_ids: torch.Tensor) -> torch.Tensor:
        try:  # as TokenEmbedding: the lookup itself checks the range
            return super().forward(position_ids)
        except IndexError:
            raise ValueError(
                f"position {int(position_ids.max())} is past the learned position table "
                f"(max_position_embeddings={self.num_embeddings}); use at most {self.num_embeddings} tokens "
                f"or a position encoding that extrapolates (sinusoidal, rope, alibi, none)"
            ) from None


def rope_frequencies(d_head: int, theta: float = 10000.0, scaling: dict | None = None,
                     device: torch.device | None = None) -> torch.Tensor:
    """theta_i = theta^(-2i/d_head), the angle pair i turns by per position, for i < d_head/2; ``scaling`` (the
    config's ``rope_frequency_scaling``) slows pairs down so a context trained at one length reads a longer one:
    - "linear" (position interpolation, Chen et al. 2023): theta_i / factor for every pair;
    - "llama3" (Llama 3.1): by each pair's wavelength lambda_i = 2 pi / theta_i against the trained context L
      (``original_max_position_embeddings``): pairs that turn many times within L (lambda_i < L / high_freq_factor)
      keep theta_i; pairs slower than L / low_freq_factor get theta_i / factor; between, the mix
      (1 - s) theta_i / factor + s theta_i with s = (L / lambda_i - low_freq_factor) / (high_freq_factor -
      low_freq_factor), which runs from 0 to 1 across the band."""
    # 1 / theta^(2i/d), rounded as transformers' RoPE rounds it: theta^(-2i/d) differs in the last bit for a third of
    # the pairs, and times a position in the thousands that bit moves the logits by 1e-3
    inv_freq = 1.0 / theta ** (torch.arange(0, d_head, 2, device=device, dtype=torch.float32) / d_head)
    kind = (scaling or {}).get("rope_type")
    if kind is None:
        return inv_freq
    if kind == "linear":
        return inv_freq / scaling["factor"]
    if kind == "llama3":
        factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
        trained = scaling["original_max_position_embeddings"]
        wavelength = 2 * math.pi / inv_freq
        smooth = ((trained / wavelength - low) / (high - low)).clamp(0.0, 1.0)  # 1: fast pairs, 0: slow ones
        return (1 - smooth) * inv_freq / factor + smooth * inv_freq
    raise ValueError(f"rope_frequency_scaling rope_type must be one of {', '.join(ROPE_SCALINGS)}, got {kind!r}")


def rope_angles(position_ids: torch.Tensor, d_head: int, theta: float = 10000.0,
                scaling: dict | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE: pair i of a head at position m turns by m * theta_i (``rope_frequencies``: theta^(-2i/d_head), slowed
    by ``scaling`` where the model has one). (B, T) positions -> (cos, sin), each (B, 1, T, d_head/2), broadcast over
    heads. With a rotary fraction ``d_head`` is the rotated width d_rotary (GPT-NeoX: a quarter of the head)."""
    inv_freq = rope_frequencies(d_head, theta, scaling, position_ids.device)
    angles = position_ids.to(torch.float32)[:, None, :, None] * inv_freq
    return angles.cos(), angles.sin()


def rope_tables(cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per pair (..., d_head/2) -> per dim (..., d_head), as ``rotate_pairs`` reads them (built once per forward pass):
    (c0, c0, c1, c1, ...) and (-s0, s0, -s1, s1, ...)."""
    return cos.repeat_interleave(2, dim=-1), torch.stack((-sin, sin), dim=-1).flatten(-2)


def rotate_pairs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x * (c, c) + (x1, x0) * (-s, s), pair by pair, = (x0 c - x1 s, x0 s + x1 c); cos, sin from ``rope_tables``."""
    swapped = x.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)  # (x1, x0) in each pair
    rotated = x * cos + swapped * sin  # float32 like the tables
    return rotated if rotated.dtype == x.dtype else rotated.to(x.dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``rotate_pairs`` on the first d_rotary = cos.shape[-1] dimensions of each head; the rest pass unturned."""
    width = cos.shape[-1]
    if width == x.shape[-1]:
        return rotate_pairs(x, cos, sin)
    return torch.cat((rotate_pairs(x[..., :width], cos, sin), x[..., width:]), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each pair (x_2i, x_2i+1) by its angle: [x0 cos - x1 sin, x0 sin + x1 cos], the complex product
    (x0 + i x1)(cos + i sin); cos, sin per pair (``rope_angles``). Since R(m)^T R(n) = R(n - m), the score
    q_m . k_n depends on positions only through n - m."""
    return rotate_pairs(x, *rope_tables(cos, sin))


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """ALiBi head slopes: the geometric sequence 2^(-8h/H), h = 1..H, for H a power of two.

    Otherwise (the paper's rule) the slopes of the closest smaller power of two n, then every other
    slope of 2n heads for the remaining H - n heads.
    """

    def geometric(n: int) -> list[float]:
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    n = 2 ** math.floor(math.log2(n_heads))
    slopes = geometric(n) + geometric(2 * n)[0::2][: n_heads - n]
    return torch.tensor(slopes, dtype=torch.float32)


def alibi_bias(query_positions: torch.Tensor, key_positions: torch.Tensor, n_heads: int) -> torch.Tensor:
    """ALiBi: score(i, j) gets -slope_h * |pos_i - pos_j|. (B, T), (B, S) -> (B, H, T, S).

    Only distances matter, so the model passes cache slots (0..S-1) for positions: padding sits at one
    end of a row, and within a row slot distance equals position distance for every real token pair."""
    slopes = alibi_slopes(n_heads).to(query_positions.device)
    distance = (query_positions[:, None, :, None] - key_positions[:, None, None, :]).abs().float()
    return -slopes[None, :, None, None] * distance
