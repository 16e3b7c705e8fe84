"""explorer.present: what the teaching views draw (each view's figures and HTML, the clickable tokens) is the computed
numbers, escaped, and the explanations' facts (the shared concepts, the encodings' text) hold for every shipped
model."""

import base64
import io
import re

import numpy as np
import pytest
from PIL import Image

from explorer.core.parity import Parity
from explorer.present import concepts, encodings
from explorer.views.ablation import HeadRanking
from explorer.views.heads import HeadTypes
from explorer.views.sampling import next_token_distribution, sampling_settings
from explorer.views.steps import Step
from explorer.present.sampling import distribution_figure
from explorer.present.lens import lens_heatmap
from explorer.present.ablation import ranking_figure
from explorer.present.attention import token_centred_figure
from explorer.present.attention import head_grid_html, head_types_html
from explorer.present.figures import probability
from explorer.present.lens import lens_table_html
from explorer.present.steps import number, steps_html
from explorer.present.clickable_html import token_strip_html
from explorer.views.lens import logit_lens
from support.shipped import SHIPPED_ROOT, shipped

HOSTILE = "<img src=x onerror=alert(1)>"
SHIPPED = sorted(config.parent.name for config in SHIPPED_ROOT.glob("*/config.json"))


def test_steps_show_values_rounded_or_in_full_and_escape_labels():
    values = np.array([[0.123456789, -2.5], [np.finfo(np.float32).min, 0.00001234]], dtype=np.float32)
    step = Step("Scores", "s = q·k", values, [HOSTILE, "b"], ["x", "y"], "a <note>", Parity(3e-7, 2.5), highlight=1)
    rounded, full = steps_html([step]), steps_html([step], full=True)
    assert "<td>0.123</td>" in rounded and "<td>-2.500</td>" in rounded and "<td>1.2e-5</td>" in rounded
    assert "<td>0.12345679</td>" in full and "<td>0.00001234</td>" in full  # float32's every digit
    assert rounded.count(">masked<") == 1 and "<img" not in rounded and "&lt;img src=x" in rounded
    assert "a &lt;note&gt;" in rounded and "✓ matches the model's own number (max difference 3.0e-07)" in rounded
    assert "<tr class=hl><th>b</th>" in rounded
    assert "✗ differs" in steps_html([Step("t", "f", values, model_parity=Parity(2e-3, 2.5))])
    # float32 rounding grows with the numbers: a trained GPT-2's layer-0 attention, 2.8e-5 on numbers up to 11.5
    assert "✓ matches the model's own number (max difference 2.8e-05)" in steps_html(
        [Step("t", "f", values, model_parity=Parity(2.8e-5, 11.5))])
    assert number(float(np.finfo(np.float32).min), full=True) == "masked"


def test_head_grid_is_one_clickable_thumbnail_per_head_with_its_labels():
    rng = np.random.default_rng(0)
    weights = rng.random((2, 3, 5, 5)).astype(np.float32)
    weights[1, 2] = np.eye(5)
    scores = np.zeros((2, 3))
    scores[1, 2] = 0.93
    types = HeadTypes({"same token": scores}, {"same token": 0.2}, 0.4)
    page = head_grid_html(weights, types, selected=(1, 2))
    assert page.count("<button") == 6 and 'data-layer="1" data-head="2"' in page
    assert 'class="cell selected" data-layer="1" data-head="2"' in page
    assert "same token 0.93</span>" in page and "same token 0.93 (threshold 0.4)" in page
    uri = page.split('data-head="2"')[-1].split('src="')[1].split('"')[0]
    pixels = np.array(Image.open(io.BytesIO(base64.b64decode(uri.split(",")[1]))).convert("RGB"))
    assert pixels.shape == (5, 5, 3)
    assert (pixels[np.eye(5, dtype=bool)] == [8, 48, 107]).all() and (pixels[~np.eye(5, dtype=bool)] == 255).all()


def test_token_strip_escapes_and_marks_the_selected_token():
    strip = token_strip_html(["0:a", f"1:{HOSTILE}"], selected=1)
    assert '<span data-index="1" class="selected"' in strip and "<img" not in strip


@pytest.fixture(scope="module")
def main_model():
    return shipped("shakespeare-main")


def test_distribution_figure_greys_what_is_cut_and_a_bars_number_is_its_height(main_model):
    """The number written on a bar is the quantity its height shows (the probability after temperature, before
    the cut); the renormalised one it is drawn with is in its hover data."""
    model, tokenizer = main_model
    d = next_token_distribution(model, tokenizer, "Shall I compare thee to a summer's", sampling_settings(0.8, 5, 1.0))
    bars = distribution_figure(d).data[0]
    assert list(bars.marker.color[:5]) == ["#2b6cb0"] * 5 and set(bars.marker.color[5:]) == {"#cbd5e0"}
    np.testing.assert_array_equal(bars.y, d.tempered_probs)
    for text, p in zip(bars.text, bars.y):  # three decimals, or two significant digits under 0.01
        assert text == f"{p:.3f}" if p >= 0.01 else float(text) == pytest.approx(p, rel=0.05)


def test_a_flat_distributions_bars_read_their_own_values_not_0000(main_model):
    """At a high temperature over a 4096-token vocabulary every bar is under 0.001: three decimals would write
    0.001 or 0.000 on each; two significant digits tell them apart, never in exponent form."""
    model, tokenizer = main_model
    d = next_token_distribution(model, tokenizer, "Shall I compare thee to a summer's", sampling_settings(5.0, 0, 1.0))
    bars = distribution_figure(d).data[0]
    assert max(bars.y) < 0.001
    assert all(float(text) == pytest.approx(p, rel=0.05) and "e" not in text for text, p in zip(bars.text, bars.y))
    assert len(set(bars.text)) > 1
    np.testing.assert_array_equal(bars.customdata[:, 0], d.final_probs)
    np.testing.assert_allclose(d.final_probs[:5], d.tempered_probs[:5] / d.kept_mass, rtol=1e-5)


def test_the_cut_of_top_p_09_is_visible_on_the_default_prompt(main_model):
    """At top-p 0.9 the default prompt keeps hundreds of tokens, more than the bars: the summed-probability
    curve shows the kept tokens up to the cut (sum >= 0.9), the cut ones after it, and a line where it falls."""
    from ui.tabs.sampling import SAMPLING_EXAMPLE

    model, tokenizer = main_model
    d = next_token_distribution(model, tokenizer, SAMPLING_EXAMPLE, sampling_settings(1.0, 0, 0.9))
    assert d.n_kept > len(d.labels)  # every bar is kept: the bars alone cannot show this cut
    figure = distribution_figure(d)
    kept, cut = (next(t for t in figure.data if t.name == f"summed probability, {n}") for n in ("kept", "cut"))
    assert kept.x[-1] == d.n_kept and cut.x[0] == d.n_kept + 1 and cut.x[-1] == d.vocab_size
    assert kept.y[-1] >= 0.9 > kept.y[-2] and kept.y[-1] == pytest.approx(d.kept_mass, abs=1e-5)
    assert [shape.x0 for shape in figure.layout.shapes] == [d.n_kept + 0.5]
    assert f"cut after token #{d.n_kept:,}" in figure.layout.annotations[0].text


def test_lens_heatmap_and_table_show_the_lens_numbers(main_model):
    model, tokenizer = main_model
    lens = logit_lens(model, tokenizer, "To be, or not to be, <that> is the question")
    heat = lens_heatmap(lens).data[0]
    np.testing.assert_array_equal(heat.z, lens.next_token_probs)
    assert list(heat.y) == lens.rows and not any("<" in x for x in heat.x) and "9:&lt;" in heat.x
    table = lens_table_html(lens)
    assert table.split("<tbody>")[1].count("<tr><th>") == len(lens.rows) and probability(lens.top_probs[-1, 0]) in table


def test_ranking_figure_writes_each_heads_loss_rise():
    ranking = HeadRanking("self", 4.5, np.array([[0.01, -0.002], [0.3, 0.0]]))
    heat = ranking_figure(ranking).data[0]
    np.testing.assert_array_equal(heat.z, ranking.increase)
    assert heat.text[1][0] == "+0.300" and heat.zmid == 0


def test_token_centred_figure_has_a_row_per_head_with_its_type():
    """Each type named as the head grid names it ('same token', never 'self', which reads as self-attention)."""
    types = HeadTypes({"previous token": np.array([[0.1, 0.7]]), "same token": np.array([[0.9, 0.0]])},
                      {"previous token": 0.1, "same token": 0.1}, 0.4)
    fig = token_centred_figure(np.array([[0.5, 0.5], [1.0, 0.0]]), "1:<s>", ["0:a", "1:<s>"], 0, types)
    assert list(fig.data[0].y) == ["H0 · same token 0.90", "H1 · previous token 0.70"]
    assert list(fig.data[0].x) == ["0:a", "1:&lt;s&gt;"]
    assert "&lt;s&gt;" in fig.layout.title.text


@pytest.mark.parametrize("name", SHIPPED)
def test_what_the_explanations_say_about_our_models_is_true_of_every_shipped_one(name):
    """explorer.present.concepts says: pre-norm with a final LayerNorm, embeddings x sqrt(d_model) tied to the LM head and
    initialised with std 0.02, a GELU feed-forward (as wide as any "N × d_model" it gives), RoPE base 10000."""
    model, _ = shipped(name)
    c = model.config
    assert c.norm_first and c.final_layer_norm and c.scale_embeddings and c.tie_word_embeddings
    assert model.lm_head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    assert c.initializer_range == 0.02 and c.activation == "gelu" and c.rope_theta == 10000
    assert "pre-norm" in concepts.ADD_NORM and "GELU" in concepts.FEED_FORWARD and "0.02" in concepts.EMBEDDING
    for ratio in re.findall(r"(\d+) × d_model", " ".join(concepts.CONCEPTS)):
        assert c.d_ff == int(ratio) * c.d_model, (name, ratio)


@pytest.mark.parametrize("name", SHIPPED)
def test_the_concepts_give_no_size_of_one_shipped_model(name):
    """The concepts are one text for every model: no d_model, d_ff or √d_model of a checkpoint is typed into them (the
    steps of the model shown give its own)."""
    c = shipped(name)[0].config
    numbers = {float(n) for n in re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", " ".join(concepts.CONCEPTS))}
    sizes = {c.d_model, c.d_ff, round(c.d_model ** 0.5, 2)}
    assert not numbers & sizes, (name, numbers & sizes)


def test_the_papers_d_k_is_said_once_to_be_the_codes_d_head():
    """The teaching text writes a head's width as the paper's d_k; the concept of multi-head attention says that the
    code calls it d_head, and no other concept says so again."""
    assert "d_k = d_model / H" in concepts.ATTENTION and "call it d_head" in concepts.ATTENTION
    assert [c for c in concepts.CONCEPTS if "d_head" in c] == [concepts.ATTENTION]


def test_the_explanations_cover_every_concept_of_the_notes():
    text = " ".join(concepts.CONCEPTS).lower()
    for concept in ("√d_model", "pair index", "multi-head", "causal", "padding", "add & norm", "pre-norm", "post-norm",
                    "feed-forward", "shifted right", "cross-attention"):
        assert concept in text, concept


def test_head_types_summary_names_the_heads_over_the_threshold_or_the_strongest():
    types = HeadTypes({"previous token": np.array([[0.1, 0.7], [0.5, 0.2]]), "same token": np.array([[0.1, 0.3], [0.0, 0.2]])},
                      {"previous token": 0.08, "same token": 0.08}, 0.4, {"induction": "decoder-only models"})
    summary = head_types_html(types)
    assert "<b>previous token</b>: L0.H1 0.70, L1.H0 0.50" in summary
    assert "<b>same token</b>: none reaches it (strongest: L0.H1 0.30)" in summary
    assert "<b>induction</b>: not measured (decoder-only models)" in summary and "threshold 0.4" in summary


def test_what_the_experiment_text_says_holds_for_the_recorded_curves():
    """EXPERIMENT: inside the training context every curve falls (more context, easier tokens); the experiment's
    models are identical but for the encoding and trained with two seeds each."""
    import json

    from checkpointing.paths import checkpoints_dir

    results = json.loads((checkpoints_dir() / "results.json").read_text())
    assert "two seeds each" in encodings.EXPERIMENT and len(results["experiment"]["seeds"]) == 2
    for encoding in results["experiment"]["encodings"]:
        entry = results["models"][f"shakespeare-{encoding}"]
        curve, context = entry["position_loss"]["loss"], entry["training_context"]
        early, late = np.mean(curve[:8]), np.mean(curve[context // 2:context - 1])
        assert late < early - 0.2, encoding  # nats; the drops are 0.23-0.39, each mean over more than 1,000 tokens
