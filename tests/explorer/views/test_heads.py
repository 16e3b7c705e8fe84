"""explorer.views.heads: head types are scored from the attention weights as their definitions say."""

import numpy as np
import pytest
import torch

from checkpointing.in_context import induction_probe
from explorer.views.heads import THRESHOLD, head_types, cached_induction_scores, pattern_scores, visible_keys
from support.fixtures_checkpoints import SEQ2SEQ_NAME
from explorer.views.attention import attention_maps
from support.shipped import GREEDY, load, shipped

T = 12


def causal_pattern(pick) -> np.ndarray:
    """(1, 1, T, T) causal weights with all of each query's weight on key pick(t) (t itself for t = 0)."""
    w = np.zeros((1, 1, T, T), dtype=np.float32)
    for t in range(T):
        w[0, 0, t, pick(t) if t else 0] = 1.0
    return w


@pytest.mark.parametrize("kind, pick", [("previous token", lambda t: t - 1), ("first-token sink", lambda t: 0),
                                        ("same token", lambda t: t)])
def test_a_pure_pattern_scores_one_for_its_type_and_zero_for_the_others(kind, pick):
    scores, _ = pattern_scores(causal_pattern(pick), causal=True)
    for other, s in scores.items():
        assert s[0, 0] == pytest.approx(1.0 if other == kind else 0.0)


def test_uniform_attention_scores_its_baseline_and_is_not_labelled():
    visible = visible_keys(T, T, causal=True)
    uniform = (visible / visible.sum(1, keepdims=True))[None, None].astype(np.float32)
    scores, baseline = pattern_scores(uniform, causal=True)
    for kind, s in scores.items():
        assert s[0, 0] == pytest.approx(baseline[kind]) and s[0, 0] < THRESHOLD
    assert baseline["previous token"] == pytest.approx(np.mean([1 / (t + 1) for t in range(2, T)]))


@pytest.fixture(scope="module")
def rope(tiny_checkpoints):
    return load(tiny_checkpoints, "shakespeare-rope")


def test_scores_of_a_real_model_are_read_from_its_own_attention(rope):
    model, tokenizer = rope
    maps = attention_maps(model, tokenizer, "Shall I compare thee to a summer's day?", GREEDY)
    types = head_types(model, maps.weights["self"], "self")
    w = maps.weights["self"]
    t = np.arange(2, w.shape[-1])
    np.testing.assert_array_equal(types.scores["previous token"], w[:, :, t, t - 1].mean(-1))
    ids = induction_probe(model.config.vocab_size)
    with torch.inference_mode():
        attentions = model(ids, output_attentions=True).attentions
    n = ids.shape[1] // 2
    expected = np.array([[float(a[0, h, n:, 1:n + 1].diagonal().mean()) for h in range(a.shape[1])] for a in attentions])
    np.testing.assert_allclose(types.scores["induction"], expected, rtol=1e-6)
    for layer in range(w.shape[0]):
        for head in range(w.shape[1]):
            for kind, score in types.labels(layer, head):
                assert score >= THRESHOLD and types.scores[kind][layer, head] == score


def test_learned_positions_keep_the_induction_sequence_inside_the_table(tiny_checkpoints):
    model, _ = load(tiny_checkpoints, "shakespeare-learned")
    scores, _ = cached_induction_scores(model, length=1000)
    assert scores.shape == (model.config.n_layers, model.config.n_heads)


def test_cross_attention_has_no_types_and_the_encoder_no_induction(tiny_checkpoints):
    model, tokenizer = load(tiny_checkpoints, SEQ2SEQ_NAME)
    maps = attention_maps(model, tokenizer, "Shall I compare thee to a Summers day?", GREEDY)
    with pytest.raises(ValueError, match="defined for self-attention"):
        head_types(model, maps.weights["cross"], "cross")
    types = head_types(model, maps.weights["encoder"], "encoder")
    assert "induction" not in types.scores and "induction" in types.unmeasured
    assert types.baseline["previous token"] == pytest.approx(1 / maps.weights["encoder"].shape[-1])


def test_a_text_too_short_for_head_types_says_so():
    types = head_types(None, np.full((1, 2, 2, 2), 0.5, dtype=np.float32), "self")
    assert types.scores == {} and "at least 3 tokens" in types.unmeasured["previous token"]


def test_the_induction_probe_runs_once_per_model_whatever_the_text(rope):
    """The probe (random tokens, repeated) does not depend on the user's text: head types of a second and third
    text cost no forward pass of their own, and return the first scores, unchanged by a caller's edits."""
    model, tokenizer = rope
    texts = ["Shall I compare thee to a summer's day?", "To be, or not to be, that is the question", "Once more unto the breach"]
    maps = [attention_maps(model, tokenizer, text, GREEDY) for text in texts]
    calls = []
    hook = model.register_forward_pre_hook(lambda module, args: calls.append(1))
    try:
        first = head_types(model, maps[0].weights["self"], "self").scores["induction"]
        first[0, 0] = -1.0  # a caller's edit must not reach the next caller
        later = [head_types(model, m.weights["self"], "self").scores["induction"] for m in maps[1:]]
    finally:
        hook.remove()
    assert len(calls) <= 1
    for scores in later:
        assert scores[0, 0] != -1.0
        np.testing.assert_array_equal(scores, later[0])


def test_the_app_labels_the_shipped_main_models_induction_circuit_and_no_other_models():
    """What the Attention heads tab's text says: shakespeare-main has an induction head in layer 4 fed by a
    previous-token head in the layer below (labelled on a repeated line), and a position-encoding model has none."""
    text = "If music be the food of love, play on. If music be the food of love, play on."
    model, tokenizer = shipped("shakespeare-main")
    types = head_types(model, attention_maps(model, tokenizer, text, GREEDY).weights["self"], "self")
    layer, head, score = types.strongest("induction")
    assert layer == 4 and score >= THRESHOLD and types.labels(layer, head)[0][0] == "induction"
    below = types.scores["previous token"][layer - 1]
    assert below.max() >= THRESHOLD and "previous token" in dict(types.labels(layer - 1, int(below.argmax())))
    model, tokenizer = shipped("shakespeare-rope")
    types = head_types(model, attention_maps(model, tokenizer, text, GREEDY).weights["self"], "self")
    assert types.strongest("induction")[2] < THRESHOLD
