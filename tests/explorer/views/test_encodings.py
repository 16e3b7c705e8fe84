"""explorer.views.encodings: the encodings as numbers, and the extrapolation experiment within its budget."""

import math
import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from checkpointing import scoring
from explorer.models import catalog, registry
from explorer.views import encodings
from support.fixtures_checkpoints import ENCODINGS, causal_lm, checkpoint_config
from modeling import ScratchTransformerForSeq2SeqLM
from modeling.modeling_scratch_transformer import alibi_slopes

TEXT = "Shall I compare thee to a summer's day? Thou art more lovely and more temperate."


def test_sinusoidal_table_is_the_papers_formula_with_the_pair_index():
    table = encodings.sinusoidal_table(3, 4)
    assert np.allclose(table[1], [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)], atol=1e-6)
    assert table.shape == (3, 4)


def test_learned_table_is_the_checkpoints_weights(tokenizer):
    model = causal_lm(tokenizer, "learned")
    assert np.array_equal(encodings.learned_table(model), model.model.decoder.embed.position.weight.detach().numpy())
    with pytest.raises(ValueError, match="not a learned table"):
        encodings.learned_table(causal_lm(tokenizer, "rope"))


def test_rope_angles_turn_pair_i_by_m_theta_i():
    table = encodings.rope_angle_table(50, 8, theta=10000.0)
    m, i = 7, 1
    angle = m * 10000.0 ** (-2 * i / 8)
    assert table.shape == (50, 4)
    assert math.isclose(table[m, i], math.atan2(math.sin(angle), math.cos(angle)), abs_tol=1e-5)


def test_alibi_biases_are_minus_slope_times_distance():
    table = encodings.alibi_bias_table(10, 4)
    assert table.shape == (4, 10) and np.all(table[:, 0] == 0)
    assert np.allclose(table[:, 3], -3 * alibi_slopes(4).numpy())


def test_similarity_is_one_at_distance_zero_and_falls_away():
    sinusoidal = encodings.table_similarity_by_distance(encodings.sinusoidal_table(64, 32), 40)
    rope = encodings.rope_similarity_by_distance(40, 8)
    alibi = encodings.alibi_weight_by_distance(40, 4)
    for curve in (sinusoidal, rope, alibi):
        assert curve.shape == (41,) and math.isclose(curve[0], 1.0, rel_tol=1e-5)
        assert curve[1:].max() < 1.0
    assert np.all(np.diff(alibi) < 0)


@pytest.mark.parametrize("context", [2, 5, 16])
def test_bits_per_character_is_the_evaluations_measure(tokenizer, context):
    """Windows of L tokens overlapping by one: every token but the first scored once, per character scored."""
    model = causal_lm(tokenizer, "rope")
    ids = tokenizer(TEXT, add_special_tokens=False).input_ids
    windows = [ids[s: s + context] for s in range(0, len(ids) - 1, context - 1)]
    with torch.no_grad():
        nll = sum(float(F.cross_entropy(model(torch.tensor([w])).logits[0, :-1], torch.tensor(w[1:]), reduction="sum"))
                  for w in windows)
    scored_chars = len(TEXT) - len(tokenizer.decode(ids[:1]))
    assert math.isclose(encodings.bits_per_character(model, tokenizer, TEXT, context), nll / (math.log(2) * scored_chars),
                        rel_tol=1e-4)
    assert encodings.bits_per_character(model, tokenizer, TEXT, context) == scoring.bits_per_character(
        model, tokenizer, TEXT, context)["bits_per_char"]


def test_bits_per_character_is_none_where_it_cannot_be_measured(tokenizer):
    learned = causal_lm(tokenizer, "learned")
    assert encodings.bits_per_character(learned, tokenizer, TEXT * 3, 65) is None  # past the 64-row table
    assert encodings.bits_per_character(learned, tokenizer, TEXT * 3, 64) is not None
    assert encodings.bits_per_character(learned, tokenizer, "Hi there", 32) is None  # text shorter than a window
    with pytest.raises(ValueError, match="at least 2"):
        encodings.bits_per_character(learned, tokenizer, TEXT, 1)
    torch.manual_seed(0)
    seq2seq = ScratchTransformerForSeq2SeqLM(checkpoint_config(tokenizer, "sinusoidal", seq2seq=True)).eval()
    with pytest.raises(ValueError, match="encoder-decoder"):
        encodings.bits_per_character(seq2seq, tokenizer, TEXT, 16)


def test_bits_per_character_stops_at_its_deadline(tokenizer):
    with pytest.raises(encodings.TimeLimit):
        encodings.bits_per_character(causal_lm(tokenizer), tokenizer, TEXT * 20, 8, batch_size=1, deadline=time.monotonic())


def test_within_tokens_cuts_after_a_whole_token(tokenizer):
    text = "天地玄黄 宇宙洪荒 " * 50  # CJK: several byte tokens per character
    cut, n_tokens = encodings.within_tokens(tokenizer, text, 100)
    assert n_tokens == len(tokenizer(text, add_special_tokens=False).input_ids) > len(text)
    assert text.startswith(cut) and len(tokenizer(cut, add_special_tokens=False).input_ids) <= 100
    assert encodings.within_tokens(tokenizer, "short", 100) == ("short", len(tokenizer("short", add_special_tokens=False).input_ids))


def test_extrapolation_lengths_are_the_evaluations_factors_of_the_training_context_and_two_shorter(tiny_checkpoints):
    found = catalog.discover_checkpoints(tiny_checkpoints)
    assert encodings.extrapolation_lengths(found) == [16, 32] + [64 * f for f in scoring.EXTRAPOLATION_FACTORS]
    assert "context lengths of 16, 32, 64, 128, 256, 512 tokens" in encodings.length_needs(found)


def test_recompute_extrapolation_yields_after_each_job_and_blanks_what_it_cannot_measure(tiny_checkpoints):
    found = catalog.discover_checkpoints(tiny_checkpoints)
    states = []
    for state in encodings.recompute_extrapolation(found, TEXT * 3, [8, 32, 128]):
        states.append((state.done, state.finished))
    assert states[0] == (0, False) and states[-1] == (15, True)
    assert [done for done, _ in states[1:-1]] == list(range(1, 16))  # one step per (length, model) job
    assert set(state.curves) == {f"shakespeare-{e}" for e in ENCODINGS} and state.encodings["shakespeare-alibi"] == "alibi"
    assert all(curve[8] > 0 and curve[128] is None for curve in state.curves.values())
    assert "Lengths 128 need a text longer than" in state.notices[0]


def test_recompute_extrapolation_scores_at_most_its_token_budget(tiny_checkpoints):
    found = catalog.discover_checkpoints(tiny_checkpoints)
    text = "天地玄黄 宇宙洪荒 日月盈昃 " * 400
    *_, state = encodings.recompute_extrapolation(found, text, [16], max_tokens=200)
    model, tokenizer = registry.shipped_model(found["shakespeare-rope"])
    cut, n_tokens = encodings.within_tokens(tokenizer, text, 200)
    assert state.curves["shakespeare-rope"][16] == encodings.bits_per_character(model, tokenizer, cut, 16)
    assert state.notices[0] == f"Your text is {n_tokens:,} tokens: scoring its first 200 to keep the job short."


@pytest.mark.parametrize("how", ["argument", "operator"])
def test_recompute_extrapolation_stops_at_its_time_limit(tiny_checkpoints, monkeypatch, how):
    """The limit is the caller's, or by default the operator's time for one request's exact runs."""
    found = catalog.discover_checkpoints(tiny_checkpoints)
    if how == "operator":
        monkeypatch.setenv("SCRATCH_EXACT_SECONDS", "0")
        *_, state = encodings.recompute_extrapolation(found, TEXT * 3, [8, 16])
    else:
        *_, state = encodings.recompute_extrapolation(found, TEXT * 3, [8, 16], time_limit=0)
    assert state.finished and state.done == 0 and all(curve == {} for curve in state.curves.values())
    assert state.notices[-1].startswith("Stopped after the time limit of 0 s: 0 of 10 scores computed")


def test_closing_the_recomputation_stops_its_work(tiny_checkpoints):
    found = catalog.discover_checkpoints(tiny_checkpoints)
    jobs = encodings.recompute_extrapolation(found, TEXT * 3, [8, 16])
    next(jobs)
    state = next(jobs)
    jobs.close()  # what gradio does when the client goes
    assert state.done == 1 and sum(len(curve) for curve in state.curves.values()) == 1


SONNET = """Shall I compare thee to a summer's day?
Thou art more lovely and more temperate:
Rough winds do shake the darling buds of May,
And summer's lease hath all too short a date;
Sometime too hot the eye of heaven shines,
And often is his gold complexion dimm'd;
And every fair from fair sometime declin'd,
By chance or nature's changing course untrimm'd;
But thy eternal summer shall not fade,
Nor lose possession of that fair thou ow'st;
Nor shall death brag thou wander'st in his shade,
When in eternal lines to time thou grow'st:
So long as men can breathe or eyes can see,
So long lives this, and this gives life to thee."""


def test_a_sonnet_gives_a_curve_of_several_points_with_the_shipped_models():
    """A whole sonnet is shorter than the training context (128 tokens): it is still scored at several lengths
    by every shipped encoding model, each length at most the sonnet's tokens, as the box says beforehand."""
    from checkpointing.paths import checkpoints_dir

    found = catalog.discover_checkpoints(checkpoints_dir())
    *_, state = encodings.recompute_extrapolation(found, SONNET)
    assert state.finished and len(state.curves) == 5
    _, tokenizer = registry.shipped_model(found[next(iter(state.curves))])
    n_tokens = len(tokenizer(SONNET, add_special_tokens=False).input_ids)
    for curve in state.curves.values():
        measured = [n for n, bits in curve.items() if bits is not None]
        assert len(measured) >= 3 and measured == [n for n in state.lengths if n <= n_tokens], (n_tokens, curve)
        assert all(0.5 < curve[n] < 6 for n in measured)
    needs = encodings.length_needs(found)
    assert all(f"{n:,}" in needs for n in state.lengths) and "a sonnet reaches the first few" in needs
