"""One induction score: ``checkpointing.in_context.induction_scores`` is the standard score (Olsson et al. 2022: on a
random sequence repeated twice, the mean attention from each token of the second copy to the token after its first
occurrence). Every other score of the app calls it, and says in its name how it differs: the Attention heads tab's
``cached_induction_scores`` (measured once per model), the live tab's ``least_induction_score_over_offsets`` (the
least over three probe lengths). Where they measure the same thing on the same weights they agree to TOLERANCE."""

import ast

import numpy as np
import pytest

from checkpointing.in_context import SPECIAL_IDS, attention_weights, head_scores, induction_probe, induction_scores
from checkpointing.paths import REPO_ROOT
from explorer.learning.live_snapshots import least_induction_score_over_offsets, probe_lengths
from explorer.views.heads import cached_induction_scores
from support.tiny_models import tiny_causal_lm

TOLERANCE = 1e-6  # the same float32 weights through the same arithmetic: a larger gap is another rule, not rounding


@pytest.fixture(scope="module")
def model():
    return tiny_causal_lm("rope", seed=3, vocab_size=128, max_position_embeddings=128)


def test_the_standard_score_is_the_mean_attention_to_the_token_after_the_first_occurrence(model):
    length = 16
    weights = attention_weights(model, induction_probe(model.config.vocab_size, length))
    by_hand = np.array([[np.mean([weights[layer, head, length + i, i + 1] for i in range(length)])
                         for head in range(weights.shape[1])] for layer in range(weights.shape[0])])
    np.testing.assert_allclose(induction_scores(model, length), by_hand, atol=TOLERANCE, rtol=0)
    assert by_hand.std() > 1e-3  # the heads differ: agreement below means the same rule, not a flat model


def test_the_pipelines_head_scores_and_the_heads_tab_use_the_standard_score(model):
    np.testing.assert_allclose(head_scores(model)["induction"], induction_scores(model), atol=TOLERANCE, rtol=0)
    cached, _ = cached_induction_scores(model)
    np.testing.assert_allclose(cached, induction_scores(model), atol=TOLERANCE, rtol=0)


def test_the_heads_tab_measures_a_learned_table_on_the_longest_probe_that_fits():
    short = tiny_causal_lm("learned", seed=4, vocab_size=128, max_position_embeddings=40)
    cached, _ = cached_induction_scores(short)
    np.testing.assert_allclose(cached, induction_scores(short, 20), atol=TOLERANCE, rtol=0)


def test_the_live_tabs_score_at_one_offset_is_the_standard_score(model):
    assert probe_lengths(8) == (4,)  # a context of 8: one probe, L = 4, seed 0
    np.testing.assert_allclose(least_induction_score_over_offsets(model, 8), induction_scores(model, 4, seed=0),
                               atol=TOLERANCE, rtol=0)


def test_the_live_tabs_score_is_the_least_standard_score_over_its_offsets(model):
    lengths = probe_lengths(64)
    each = [induction_scores(model, length, seed=i, skip=SPECIAL_IDS) for i, length in enumerate(lengths)]
    least = least_induction_score_over_offsets(model, 64)
    np.testing.assert_allclose(least, np.min(each, axis=0), atol=TOLERANCE, rtol=0)
    assert all((least <= scores + TOLERANCE).all() for scores in each)


def test_no_other_module_defines_a_function_named_induction_scores():
    """Only checkpointing.in_context defines ``induction_scores``; a score measured otherwise is named for how."""
    defined = []
    for folder in ("checkpointing", "explorer", "ui", "training", "benchmarks"):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef) and node.name == "induction_scores":
                    defined.append(str(path.relative_to(REPO_ROOT)))
    assert defined == ["checkpointing/in_context.py"]
