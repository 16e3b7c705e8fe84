"""Positional encodings: the formulas, the seed notes' bugs, and running past the training length."""

import math

import pytest
import torch
from transformers import GPTNeoXConfig, LlamaConfig
from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, rotate_half

from modeling import ScratchTransformerConfig, ScratchTransformerForCausalLM, record
from modeling.modeling_scratch_transformer import (
    alibi_bias,
    alibi_slopes,
    apply_rope,
    rope_angles,
    sinusoidal_encoding,
)
from modeling.position_encodings import rope_frequencies


def reference_sinusoidal(n_positions: int, d: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...), in float64, one entry at a time."""
    pe = torch.zeros(n_positions, d, dtype=torch.float64)
    for pos in range(n_positions):
        for dim in range(d):
            i = dim // 2
            angle = pos / 10000 ** (2 * i / d)
            pe[pos, dim] = math.sin(angle) if dim % 2 == 0 else math.cos(angle)
    return pe


def seed_000_slow(n_positions: int, d: int) -> torch.Tensor:
    """Seed 000's loop: sin/cos chosen by the POSITION's parity, 2*dim in the exponent."""
    return torch.tensor([[(math.sin if pos % 2 == 0 else math.cos)(pos / 10000 ** (2 * dim / d)) for dim in range(d)]
                         for pos in range(n_positions)], dtype=torch.float64)


def seed_2dim_exponent(n_positions: int, d: int) -> torch.Tensor:
    """Seeds 000 (fast) and 003: sin on even dims, cos on odd dims, but 2*dim (not 2*pair) in the exponent."""
    return torch.tensor([[(math.sin if dim % 2 == 0 else math.cos)(pos / 10000 ** (2 * dim / d)) for dim in range(d)]
                         for pos in range(n_positions)], dtype=torch.float64)


def test_sinusoidal_matches_formula_in_float64():
    ours = sinusoidal_encoding(torch.arange(64), 32).double()
    assert (ours - reference_sinusoidal(64, 32)).abs().max().item() <= 1e-5  # float32 sin/cos of angles <= 63


def test_sinusoidal_pos1_d4_is_sin1_cos1_sin001_cos001():
    expected = torch.tensor([math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)])
    assert torch.allclose(sinusoidal_encoding(torch.tensor([1]), 4)[0], expected, atol=1e-7)


@pytest.mark.parametrize("seed_variant", [seed_000_slow, seed_2dim_exponent])
def test_sinusoidal_differs_from_the_seed_notes_bugs(seed_variant):
    ours = sinusoidal_encoding(torch.arange(16), 8).double()
    assert (ours - seed_variant(16, 8)).abs().max().item() > 0.1


def test_rope_score_depends_only_on_offset():
    torch.manual_seed(0)
    d_head = 16
    q, k = torch.randn(1, 1, 1, d_head), torch.randn(1, 1, 1, d_head)

    def score(m: int, n: int) -> float:
        cos_m, sin_m = rope_angles(torch.tensor([[m]]), d_head)
        cos_n, sin_n = rope_angles(torch.tensor([[n]]), d_head)
        return (apply_rope(q, cos_m, sin_m) * apply_rope(k, cos_n, sin_n)).sum().item()

    for offset in (0, 1, 5, 17):
        scores = [score(m, m - offset) for m in (offset, offset + 3, offset + 40, offset + 200)]
        assert max(scores) - min(scores) <= 1e-4, (offset, scores)
    assert abs(score(10, 9) - score(10, 2)) > 1e-3  # and it does depend on the offset


def test_rope_preserves_norms_and_is_identity_at_position_zero():
    x = torch.randn(2, 3, 5, 8)
    cos, sin = rope_angles(torch.arange(5).expand(2, 5), 8)
    assert torch.allclose(apply_rope(x, cos, sin).norm(dim=-1), x.norm(dim=-1), atol=1e-5)
    cos0, sin0 = rope_angles(torch.zeros(2, 5, dtype=torch.long), 8)
    assert torch.equal(apply_rope(x, cos0, sin0), x)


def complex_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The reference: adjacent dims (x_2i, x_2i+1) as the complex number x_2i + i x_2i+1, times cos + i sin."""
    pairs = torch.view_as_complex(x.float().unflatten(-1, (-1, 2)).contiguous())
    return torch.view_as_real(pairs * torch.complex(cos, sin)).flatten(-2).to(x.dtype)


@pytest.mark.parametrize("dtype, rtol, atol", [(torch.float32, 0, 1e-6), (torch.bfloat16, 2**-7, 0)])
def test_rope_equals_the_complex_product_of_adjacent_pairs(dtype, rtol, atol):
    """float32 to 1e-6; bfloat16 (computed in float32, rounded once) to one bfloat16 step."""
    x = torch.randn(2, 4, 300, 32, generator=torch.Generator().manual_seed(0)).to(dtype)
    cos, sin = rope_angles(torch.arange(300).expand(2, -1), 32)  # angles up to 299 rad
    ours, reference = apply_rope(x, cos, sin), complex_rope(x, cos, sin)
    assert ours.dtype == dtype
    torch.testing.assert_close(ours, reference, rtol=rtol, atol=atol)
    # the other convention, pairs (i, i + Dh/2) as transformers' rotate_half, gives other numbers
    halves = x * torch.cat((cos, cos), -1) + rotate_half(x) * torch.cat((sin, sin), -1)
    assert (ours.float() - halves.float()).abs().max() > 0.5


LLAMA_3_1 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
             "original_max_position_embeddings": 8192}


def reference_llama3_frequency(i: int, d: int, theta: float, factor: float, low: float, high: float, trained: int) -> float:
    """Llama 3.1's rule for one pair, in float64, read from Meta's reference (apply_scaling): wavelengths shorter
    than trained / high keep their frequency, longer than trained / low divide it by factor, between blend."""
    frequency = theta ** (-2 * i / d)
    wavelength = 2 * math.pi / frequency
    if wavelength < trained / high:
        return frequency
    if wavelength > trained / low:
        return frequency / factor
    smooth = (trained / wavelength - low) / (high - low)
    return (1 - smooth) * frequency / factor + smooth * frequency


def test_llama3_frequencies_follow_the_rule_pair_by_pair_in_all_three_bands():
    d, theta = 128, 500000.0  # Llama 3.1 8B's head and base
    ours = rope_frequencies(d, theta, LLAMA_3_1).double()
    keys = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
    reference = torch.tensor([reference_llama3_frequency(i, d, theta, *(LLAMA_3_1[k] for k in keys)) for i in range(d // 2)],
                             dtype=torch.float64)
    torch.testing.assert_close(ours, reference, rtol=2e-6, atol=0)
    plain = rope_frequencies(d, theta).double()
    ratio = plain / ours  # 1 for the fast pairs, 8 for the slow, between for the blended band
    assert ratio[0] == 1 and ratio[-1] == pytest.approx(8.0)
    assert ((ratio > 1.01) & (ratio < 7.99)).sum() >= 3  # the blended band holds pairs here (Llama 3.1: 6 of 64)
    torch.testing.assert_close(rope_frequencies(d, theta, {"rope_type": "linear", "factor": 4.0}), plain.float() / 4)


@pytest.mark.parametrize("scaling", [None, LLAMA_3_1, {**LLAMA_3_1, "factor": 32.0, "original_max_position_embeddings": 64},
                                     {"rope_type": "linear", "factor": 2.5}],
                         ids=["default", "llama3.1", "llama3.2-short", "linear"])
@pytest.mark.parametrize("partial", [1.0, 0.25])
@pytest.mark.parametrize("theta", [10000.0, 500000.0])
def test_frequencies_equal_transformers_bit_for_bit(scaling, partial, theta):
    """Equal, not close: a frequency one bit off, times a position in the thousands, moved the logits by 1e-3."""
    config = LlamaConfig(hidden_size=512, num_attention_heads=4, max_position_embeddings=131072,
                         rope_parameters={**(scaling or {"rope_type": "default"}), "rope_theta": theta,
                                          "partial_rotary_factor": partial})
    # the frequencies attention turns by: Llama's, or (a default RoPE over part of the head) Pythia's, whose default
    # reads partial_rotary_factor where Llama's turns the whole head
    rotary = GPTNeoXRotaryEmbedding(GPTNeoXConfig(**config.to_dict())) if scaling is None and partial < 1 else (
        LlamaRotaryEmbedding(config))
    theirs = rotary.inv_freq
    assert rotary.attention_scaling == 1.0  # nothing scales the scores: frequencies alone change
    ours = rope_frequencies(int(128 * partial), theta, scaling)
    assert torch.equal(ours, theirs)


def test_rope_model_rotates_q_and_k_as_the_complex_product_and_issues_no_complex_op():
    model, ids = _model("rope"), torch.randint(0, 50, (2, 20))
    with record() as recording, torch.profiler.profile() as profiler, torch.no_grad():
        model(ids)
    cos, sin = recording.stack("decoder").rotary
    for layer in range(2):
        attention = recording.attention("decoder", layer)
        torch.testing.assert_close(attention.query_rotated, complex_rope(attention.query, cos, sin), rtol=0, atol=1e-6)
        torch.testing.assert_close(attention.key_rotated, complex_rope(attention.key, cos, sin), rtol=0, atol=1e-6)
    assert not {e.name for e in profiler.events()} & {"aten::complex", "aten::view_as_complex", "aten::view_as_real"}


def test_alibi_slopes_follow_the_paper():
    assert torch.allclose(alibi_slopes(8), torch.tensor([2.0 ** -h for h in range(1, 9)]))
    # 6 heads: the 4-head slopes 2^-2, 2^-4, 2^-6, 2^-8, then every other 8-head slope: 2^-1, 2^-3
    assert torch.allclose(alibi_slopes(6), torch.tensor([2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3]))


def test_alibi_bias_is_minus_slope_times_distance():
    pos = torch.arange(6)[None]
    bias = alibi_bias(pos, pos, 8)
    slopes = alibi_slopes(8)
    for h in (0, 7):
        for i, j in ((5, 0), (3, 3), (2, 4)):
            assert bias[0, h, i, j].item() == pytest.approx(-slopes[h].item() * abs(i - j))


def _model(position_encoding: str, max_positions: int = 16, n_layers: int = 2) -> ScratchTransformerForCausalLM:
    torch.manual_seed(0)
    # a wide init (0.3 instead of 0.02) so that position effects are far above float noise
    config = ScratchTransformerConfig(vocab_size=50, d_model=32, n_heads=4, n_layers=n_layers, d_ff=64, dropout=0.0,
                                      max_position_embeddings=max_positions, position_encoding=position_encoding,
                                      initializer_range=0.3)
    return ScratchTransformerForCausalLM(config).eval()


@pytest.mark.parametrize("position_encoding", ["sinusoidal", "rope", "alibi", "none"])
def test_runs_past_the_training_length(position_encoding):
    model = _model(position_encoding, max_positions=16)
    ids = torch.randint(0, 50, (1, 64))  # 4x max_position_embeddings
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape == (1, 64, 50) and torch.isfinite(logits).all()


def test_learned_table_refuses_positions_past_its_end():
    model = _model("learned", max_positions=16)
    with torch.no_grad():
        model(torch.randint(0, 50, (1, 16)))
        with pytest.raises(ValueError, match="max_position_embeddings=16"):
            model(torch.randint(0, 50, (1, 17)))


@pytest.mark.parametrize("position_encoding", ["sinusoidal", "learned", "rope", "alibi"])
def test_position_encoding_makes_order_matter(position_encoding):
    model = _model(position_encoding)
    ids = torch.tensor([[3, 7, 11, 13]])
    with torch.no_grad():
        a = model(ids).logits[0, -1]
        b = model(ids[:, [1, 0, 2, 3]]).logits[0, -1]
    assert (a - b).abs().max().item() > 1e-2


def test_one_layer_without_positions_sees_a_bag_of_words():
    """With no position encoding, one attention layer sees the prefix as a set: order is invisible."""
    ids = torch.tensor([[3, 7, 11, 13]])
    with torch.no_grad():
        one_layer = _model("none", n_layers=1)
        a, b = one_layer(ids).logits[0, -1], one_layer(ids[:, [1, 0, 2, 3]]).logits[0, -1]
        assert (a - b).abs().max().item() <= 1e-5
        # ...but a causal stack leaks order: earlier tokens saw different prefixes in layer 1
        two_layers = _model("none", n_layers=2)
        a, b = two_layers(ids).logits[0, -1], two_layers(ids[:, [1, 0, 2, 3]]).logits[0, -1]
        assert (a - b).abs().max().item() > 1e-3
