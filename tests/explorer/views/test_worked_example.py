"""explorer.views.worked_example: the notes' example with the correct encoding, step by step."""

import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from explorer.views.worked_example import D_MODEL, EMBEDDINGS, HEADS, notes_positional_encoding, worked_example

NOTES_PRINTED_PE = [[0.0, 1.0, 0.0, 1.0], [0.84147098, 0.99995, 0.0001, 1.0]]  # what the notes printed


@pytest.fixture(scope="module")
def steps():
    steps, paragraph = worked_example()
    return {s.title: s for s in steps}, paragraph


def test_position_one_is_sin1_cos1_sin001_cos001(steps):
    pe = steps[0]["Sinusoidal position encoding PE"].values
    np.testing.assert_allclose(pe[1], [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)], atol=1e-7)
    np.testing.assert_allclose(pe[0], [0, 1, 0, 1], atol=0)


def test_the_notes_bug_is_reproduced_only_to_compare(steps):
    np.testing.assert_allclose(notes_positional_encoding(2, 4).numpy(), NOTES_PRINTED_PE, atol=1e-8)
    shown = steps[0]["What the notes printed instead"].values
    assert not np.allclose(shown, steps[0]["Sinusoidal position encoding PE"].values, atol=1e-3)


def test_each_head_is_softmax_qk_over_sqrt3_times_v(steps):
    by_title, _ = steps
    x = torch.tensor(EMBEDDINGS, dtype=torch.float64) + torch.from_numpy(by_title["Sinusoidal position encoding PE"].values)
    np.testing.assert_array_equal(by_title["Input X = E + PE"].values, x.numpy())
    outputs = []
    for h, weights in HEADS.items():
        q, k, v = (x @ torch.tensor(weights[n], dtype=torch.float64) for n in ("W_Q", "W_K", "W_V"))
        expected = F.scaled_dot_product_attention(q[None], k[None], v[None], scale=1 / math.sqrt(3))[0]
        np.testing.assert_allclose(by_title[f"Head {h}: scores"].values, (q @ k.T / math.sqrt(3)).numpy(), rtol=1e-12)
        np.testing.assert_allclose(by_title[f"Head {h}: weights"].values.sum(1), 1.0, rtol=1e-12)
        np.testing.assert_allclose(by_title[f"Head {h}: output"].values, expected.numpy(), rtol=1e-10)
        outputs.append(expected)
    concat = by_title["Both heads concatenated"]
    assert concat.shape == (2, 6)
    np.testing.assert_allclose(concat.values, torch.cat(outputs, -1).numpy(), rtol=1e-10)


def test_the_paragraph_quotes_the_right_and_the_wrong_numbers(steps):
    by_title, paragraph = steps
    assert "[0.84147, 0.99995, 0.0001, 1]" in paragraph and "[0.84147, 0.5403, 0.0099998, 0.99995]" in paragraph
    change = np.abs(by_title["Both heads concatenated"].values - by_title["With the notes' PE instead"].values).max()
    assert f"{change:.2f}" in paragraph and change > 0.1


def test_the_example_is_introduced_and_its_references_point_to_text_rendered_above_the_steps(steps):
    """The view (app.py's steps tab) renders present.WORKED_EXAMPLE, then the paragraph, then the steps: a
    step's note may only point up to a heading one of those two holds, and the notes are introduced before the
    text first speaks of 'the notes''."""
    from explorer.present import steps as present

    by_title, paragraph = steps
    intro = present.WORKED_EXAMPLE.split("\n", 1)[1]
    first_use = intro.index("the notes'")
    assert "teaching notes" in intro[:first_use] and '"Hello World"' in intro[:first_use]
    above = present.WORKED_EXAMPLE + paragraph
    pointers = [s.note for s in by_title.values() if "see " in s.note]
    assert len(pointers) == 2 and not any("below" in s.note for s in by_title.values())
    for note in pointers:
        heading = note.split("see '")[1].split("'")[0]
        assert f"**{heading}" in above and "above" in note, note


def test_the_worked_example_speaks_of_its_own_d_model_only(steps):
    """Its text (with the embedding concept it shows) gives no d_model but its own, and √d_model computed from it."""
    from explorer.present import steps as present

    by_title, _ = steps
    assert set(re.findall(r"d_model = (\d+)", present.WORKED_EXAMPLE)) == {str(D_MODEL)}
    assert f"(×{D_MODEL ** 0.5:g} here)" in by_title["Token embeddings E"].note
