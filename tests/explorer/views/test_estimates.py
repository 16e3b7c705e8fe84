"""First-order estimates (explorer/views/first_order.py, patching/estimates.py, ablation_estimate.py): each equals
the derivative computed by hand (central finite differences of the model's own edited pass, in float64: 1e-5), equals
the exact answer where the metric is linear in the patched value, and its agreement numbers are what they say."""

import numpy as np
import pytest
import torch

from explorer.views.ablation import rank_heads, token_losses
from explorer.views.ablation_estimate import estimate_head_ranking
from explorer.views.first_order import agreement
from explorer.views.forward_pass import recorded_pass
from explorer.views.patching.analysis import activation_patching, logit_difference
from explorer.views.patching.estimates import attribution_patching
from explorer.views.patching.grids import GRIDS
from modeling import ScratchTransformerForCausalLM, Site, record
from support.fixtures_checkpoints import checkpoint_config, train_tokenizer

TOLERANCE = 1e-5
STEP = 1e-4  # central differences in float64: error about STEP^2 times the third derivative, far below 1e-5
CLEAN = "Shall I compare thee to a summer's day? Thou art more lovely and more temperate. Shall I compare"
CORRUPTED = "Shall I shall thee to a summer's day? Thou art more lovely and more temperate. Shall I compare"


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer()


def tiny(tokenizer, encoding="rope", **overrides):
    torch.manual_seed(0)
    config = checkpoint_config(tokenizer, encoding, initializer_range=0.2, **overrides)
    return ScratchTransformerForCausalLM(config).double().eval()


def metric_with(model, ids, site, change, metric):
    """The metric of the model's pass over ``ids`` with ``change`` added to ``site``'s value (an edit)."""
    with torch.inference_mode(), record(keep=lambda s: False, edits={site: lambda v: v + change}):
        return float(metric(model(input_ids=ids[None], use_cache=False).logits[0]))


def by_differences(model, ids, site, direction, metric) -> float:
    """d metric / d t at t = 0 of the pass with t * direction added at ``site``."""
    return (metric_with(model, ids, site, STEP * direction, metric)
            - metric_with(model, ids, site, -STEP * direction, metric)) / (2 * STEP)


@pytest.mark.parametrize("encoding", ["rope", "learned", "alibi"])
def test_each_patching_estimate_is_the_directional_derivative_by_hand(tokenizer, encoding):
    """A cell's estimate (a_c - a_r) · dLD/da equals d LD(a_r + t (a_c - a_r)) / dt at t = 0, by central differences
    of the corrupted pass with the change written at that cell's positions (a head's: its own slice)."""
    model = tiny(tokenizer, encoding)
    estimate = attribution_patching(model, tokenizer, CLEAN, CORRUPTED)
    runs = estimate.runs
    ids, length, scale = runs.corrupted_ids, runs.corrupted_ids.shape[0], runs.clean_ld - runs.corrupted_ld

    def ld(logits):
        return logit_difference(logits[-1], runs.answer_id, runs.wrong_id)

    first = runs.changed[0]
    cells = {"residual": [(0, first), (1, length - 1)], "attention": [(0, first + 1), (1, length - 1)],
             "feed_forward": [(0, first), (1, first + 2)], "heads": [(0, 0), (5, 1), (7, 0)]}
    for name, picked in cells.items():
        kind = GRIDS[name]
        for row, column in picked:
            layer = row // model.config.n_heads if kind.per_head else row
            site = kind.site(layer)
            delta = runs.clean.recording[site] - runs.corrupted.recording[site]
            mask = torch.zeros_like(delta)
            if kind.per_head:
                head = row % model.config.n_heads
                (mask[0, head] if column == 0 else mask[0, head, -1]).fill_(1)
            else:
                mask[0, column] = 1
            by_hand = by_differences(model, ids, site, delta * mask, ld) / scale
            assert estimate.grids[name].values[row, column] == pytest.approx(by_hand, abs=TOLERANCE), (name, row, column)


def test_the_estimate_is_exact_where_the_metric_is_linear_in_the_patched_value(tokenizer):
    """No final norm: the logits are the last position's residual stream times W_U, and the last layer's
    feed-forward output at the last position is added to it and read by nothing else. So LD is linear in it and
    (a_c - a_r) · dLD/da is the patched run's change, exactly."""
    model = tiny(tokenizer, "rope", final_layer_norm=False)
    corrupted = CLEAN[:-len("compare")] + "shall"  # the last token changed: its feed-forward output moves a lot
    estimate = attribution_patching(model, tokenizer, CLEAN, corrupted)
    exact = activation_patching(model, tokenizer, CLEAN, corrupted, grids=["feed_forward"])
    last_layer, last = model.config.n_layers - 1, len(exact.tokens) - 1
    value = exact.grids["feed_forward"].values[last_layer, last]
    assert abs(value) > 0.05  # the cell does something
    assert estimate.grids["feed_forward"].values[last_layer, last] == pytest.approx(value, abs=TOLERANCE)
    # and where it is not linear (an earlier layer), the two differ
    assert not np.allclose(estimate.grids["feed_forward"].values[0], exact.grids["feed_forward"].values[0], atol=1e-3)


@pytest.mark.parametrize("kind_overrides", [{}, {"n_kv_heads": 2}])
def test_each_head_cost_estimate_is_minus_the_mask_derivative_by_hand(tokenizer, kind_overrides):
    """-(o_h · dL/do_h) equals -dL/dm_h at m = 1, where m_h multiplies head h's output, by central differences."""
    model = tiny(tokenizer, "rope", **kind_overrides)
    ranking = estimate_head_ranking(model, tokenizer, CLEAN)
    run = recorded_pass(model, tokenizer, CLEAN)
    ids = run.read.target_ids

    def loss(logits):
        return token_losses(run, logits).mean()

    for layer, head in [(0, 0), (0, 3), (1, 2)]:
        site = Site("decoder", layer, "self", "heads")
        output = run.recording[site]
        direction = torch.zeros_like(output)
        direction[0, head] = output[0, head]  # d/dm of m * o_h at m = 1: adding t * o_h
        assert ranking.increase[layer, head] == pytest.approx(-by_differences(model, ids, site, direction, loss),
                                                              abs=TOLERANCE)


def test_the_head_cost_estimate_is_on_the_same_scale_as_the_exact_ranking(tokenizer):
    """Same shape, same base loss; the exact ranking is what removing each head does (rank_heads)."""
    model = tiny(tokenizer, "rope")
    estimate, exact = estimate_head_ranking(model, tokenizer, CLEAN), rank_heads(model, tokenizer, CLEAN)
    assert estimate.increase.shape == exact.increase.shape and estimate.loss == pytest.approx(exact.loss, abs=1e-9)
    assert np.isfinite(agreement(estimate.increase, exact.increase).correlation)


def test_agreement_counts_what_it_says():
    exact = np.array([[1.0, -0.5, 0.01], [0.2, 0.0, -2.0]])
    same = agreement(2 * exact + 0.0, exact, k=2)
    assert same.correlation == pytest.approx(1.0) and same.wrong_sign == [] and same.off_rank == []
    flipped = agreement(-exact, exact, k=2)
    assert flipped.correlation == pytest.approx(-1.0)
    # |exact| >= 5% of 2.0 = 0.1: every cell but (0, 2) (0.01) and (1, 1) (0) has a sign to get wrong
    assert flipped.wrong_sign == [(0, 0), (0, 1), (1, 0), (1, 2)]
    assert flipped.off_rank == []  # ranks by size: the same cells are the largest
    # the estimate's top 2 by size are (0, 2) and (1, 1); the exact top 2 are (1, 2) and (0, 0): both ranked outside
    shuffled = np.array([[0.1, 0.0, 5.0], [0.0, 4.0, -0.2]])
    result = agreement(shuffled, exact, k=2)
    assert result.off_rank == [(1, 2), (0, 0)]
    assert result.correlation == pytest.approx(float(np.corrcoef(shuffled.ravel(), exact.ravel())[0, 1]))
    assert np.isnan(agreement(np.zeros((2, 3)), exact).correlation)
    with pytest.raises(ValueError, match="cannot be compared"):
        agreement(np.zeros((3, 2)), exact)
