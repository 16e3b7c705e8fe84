"""The teaching views through the app's API (gradio_client against tests/conftest.py's server of tiny checkpoints):
good input gives the computed view, bad input a message that says what was wrong and what is allowed."""

import re

import pytest

from support.app_client import figure, plotly_array

TEXT = "To be, or not to be, that is the question"





def test_the_teaching_endpoints_are_public_and_share_the_cores(client, app):
    public = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    for name in ("attention_steps", "attention_steps_query", "worked_example", "logit_lens", "logit_lens_position",
                 "ablate_heads", "rank_heads", "next_token_distribution"):
        assert f"/{name}" in public, name
    views = {"attention_steps", "attention_steps_query", "logit_lens", "logit_lens_position", "ablate_heads",
             "next_token_distribution"}
    for dep in app.demo.config["dependencies"]:
        if dep["api_name"] in views:
            assert app.demo.fns[dep["id"]].concurrency_id == "model"
        if dep["api_name"] == "rank_heads":  # a pass per head: the exact answers' slot
            assert app.demo.fns[dep["id"]].concurrency_id == "exact"


def test_worked_example_is_there_before_any_model(client):
    where_wrong, steps = client.predict(api_name="/worked_example")
    assert "pair index" in where_wrong and "[0.84147, 0.5403, 0.0099998, 0.99995]" in where_wrong
    assert "Sinusoidal position encoding PE" in steps and "Both heads concatenated" in steps
    assert "<td>0.841</td><td>0.540</td><td>0.010</td><td>1.000</td>" in steps  # position 1, rounded


@pytest.mark.parametrize("model, kind", [("shakespeare-rope", "self"), ("shakespeare-alibi", "self"),
                                         ("folio-to-modern", "encoder"), ("folio-to-modern", "cross")])
def test_attention_steps_show_the_models_numbers(client, model, kind):
    tokens, body, note = client.predict(TEXT, model, kind, 1, 2, -1, False, api_name="/attention_steps")
    difference = float(re.search(r"matches it within ([0-9.]+e[+-][0-9]+)", note).group(1))
    assert difference <= 1e-5 and "layer 1, head 2" in note
    assert "Scores, mask and softmax" in body and "✗" not in body and body.count("✓ matches") >= 7
    assert 'data-index="0"' in tokens and 'class="selected"' in tokens
    _, full, _ = client.predict(TEXT, model, kind, 1, 2, -1, True, api_name="/attention_steps")
    assert len(full) > len(body)  # every digit


def test_clicking_a_token_follows_that_query(client):
    tokens, body, note = client.predict(TEXT, "shakespeare-none", "self", 0, 0, 2, False, api_name="/attention_steps_query")
    assert 'data-index="2" class="selected"' in tokens and "query token `2:" in note


@pytest.mark.parametrize("args, message", [
    (("", "shakespeare-rope", "self", 0, 0, 0, False), "Type some text first"),
    ((TEXT, "shakespeare-rope", "cross", 0, 0, 0, False), "Attention must be one of self for this model; got `cross`."),
    ((TEXT, "folio-to-modern", "self", 0, 0, 0, False), "Attention must be one of encoder, decoder, cross for this model"),
    ((TEXT, "shakespeare-rope", "self", "two", 0, 0, False), "Layer (−1 for the last) must be a whole number from -1 to 1; got `two`."),
    ((TEXT, "shakespeare-rope", "self", 0, 9, 0, False), "Head (−1 for the last) must be a whole number from -1 to 3; got `9`."),
    ((TEXT, "shakespeare-rope", "self", 0, 0, None, False), "Query token (−1 for the last) must be a whole number"),
    ((TEXT, "shakespeare-rope", "self", 0, "<img src=x>", 0, False), "got `<img src=x>`"),
    ((TEXT, "no-such-model", "self", 0, 0, 0, False), "Unknown model `no-such-model`"),
    ((TEXT, ["shakespeare-rope"], "self", 0, 0, 0, False), "Pick a model"),
])
def test_attention_steps_bad_input_says_what_is_allowed(client, args, message):
    *_, note = client.predict(*args, api_name="/attention_steps")
    assert note.startswith("⚠️") and message in note and "Something went wrong" not in note, note


def test_logit_lens_rows_and_heatmap(client):
    tokens, table, heat, note = client.predict(TEXT, "shakespeare-learned", 3, api_name="/logit_lens")
    heat = figure(heat)["data"][0]
    assert heat["y"] == ["embeddings", "layer 0", "layer 1"] and "position 3" in table and "3 read-outs" in note
    assert 'data-index="3" class="selected"' in tokens
    *_, note = client.predict(TEXT, "shakespeare-learned", 99, api_name="/logit_lens")
    assert note.startswith("⚠️ Position (−1 for the last) must be a whole number from -1 to")


@pytest.mark.parametrize("endpoint, args, decoder_only_args", [
    ("/logit_lens", (-1,), (-1,)), ("/attention_steps", ("cross", 0, 0, -1, False), ("self", 0, 0, -1, False))])
def test_the_encoder_decoders_views_say_the_decoder_read_its_own_rewrite(client, endpoint, args, decoder_only_args):
    """The token strip under a text with commas shows the rewrite's tokens: the status line says what the decoder
    read (the one sentence every view of an encoder-decoder gives), and a decoder-only model's says nothing of it."""
    tokens, *_, note = client.predict(TEXT, "folio-to-modern", *args, api_name=endpoint)
    assert "The decoder read the model's own rewrite (" in note and "set on the Generate tab): «`" in note, note
    assert "after its start token (position 0)" in note and not note.startswith("⚠️")
    rewrite = note.split("«`")[1].split("`»")[0]
    assert rewrite and 'data-index="0"' in tokens
    *_, note = client.predict(TEXT, "shakespeare-learned", *decoder_only_args, api_name=endpoint)
    assert "rewrite" not in note and not note.startswith("⚠️"), note


def test_ablation_and_ranking(client):
    next_plot, loss_plot, note = client.predict(TEXT, "shakespeare-rope", "self", "0.1, 1", api_name="/ablate_heads")
    assert "heads removed: L0.H1, L1.H0, L1.H1, L1.H2, L1.H3" in note and "nats" in note
    assert "On 5 other passages (lines of the held-out test plays) removing these heads changes the loss by" in note
    assert figure(next_plot)["data"][0]["name"] == "all heads"
    rank, estimate, note = client.predict(TEXT, "shakespeare-rope", "self", api_name="/rank_heads")
    assert "8 heads, each removed alone" in note and figure(rank)["data"][0]["type"] == "heatmap"
    assert figure(estimate)["data"][0]["type"] == "heatmap" and "Estimate against exact: correlation" in note
    assert re.search(r"The estimate (dis)?agrees with the exact answer here.{0,3} \(correlation -?\d\.\d\d", note)
    assert figure(estimate)["data"][0]["zmax"] == figure(rank)["data"][0]["zmax"]  # one colour scale on both maps
    *_, note = client.predict(TEXT, "shakespeare-rope", "self", "2.0", api_name="/ablate_heads")
    assert note.startswith("⚠️ Heads to remove: heads as layer.head (layer 0–1, head 0–3)") and "layer 2 does not exist" in note
    _, _, note = client.predict(TEXT, "folio-to-modern", "cross", api_name="/rank_heads")
    assert "folio-to-modern" in note and not note.startswith("⚠️") and "The decoder read the model's own rewrite" in note
    *_, note = client.predict(TEXT, "folio-to-modern", "cross", "0.1", api_name="/ablate_heads")
    assert "Loss on the model's own rewrite of the text (the decoder's input)" in note
    assert "The decoder read the model's own rewrite" in note  # which sequence was scored, as the other views say


def test_next_token_distribution_redraws_with_the_settings(client):
    plot, note = client.predict("Shall I compare", "shakespeare-rope", 0.7, 5, 1.0, 1.0, api_name="/next_token_distribution")
    bars = figure(plot)["data"][0]
    assert "drawn from 5 of 384 tokens" in note
    for text, p in zip(bars["text"], plotly_array(bars["y"])):  # its height: 3 decimals, 2 significant digits under 0.01
        assert text == f"{p:.3f}" if p >= 0.01 else float(text) == pytest.approx(p, rel=0.05)
    assert bars["marker"]["color"][4] != bars["marker"]["color"][5]  # kept, then cut
    for args, message in [((0, 0, 1.0, 1.0), "Temperature must be above 0"), (("hot", 0, 1.0, 1.0), "Temperature must be a number"),
                          ((1.0, -3, 1.0, 1.0), "Top-k (0 = off) must be a whole number"), ((1.0, 0, 2, 1.0), "Top-p must be above 0")]:
        _, note = client.predict("Shall I compare", "shakespeare-rope", *args, api_name="/next_token_distribution")
        assert note.startswith("⚠️") and message in note, note


def test_token_centred_view_has_a_row_per_head_of_the_layer(client):
    strip, plot, note = client.predict(TEXT, "shakespeare-rope", "self", "1", 3, api_name="/attention_token")
    heat = figure(plot)["data"][0]
    assert [row.split(" ")[0] for row in heat["y"]] == ["H0", "H1", "H2", "H3"] and "Layer 1: what `3:" in note
    assert 'data-index="3" class="selected"' in strip
    strip, plot, note = client.predict(TEXT, "shakespeare-rope", "self", "0", 999, api_name="/attention_token")
    assert "does not exist" in note and not note.startswith("⚠️")  # kept in range, as the tab's other pickers are
    strip, plot, note = client.predict("Thou art more louely", "folio-to-modern", "cross", "1", -1, api_name="/attention_token")
    assert figure(plot)["data"][0]["y"] == ["H0", "H1", "H2", "H3"] and not note.startswith("⚠️")


def test_a_grid_click_enlarges_that_head_with_its_types(client):
    plot, note = client.predict(TEXT, "shakespeare-alibi", "self", "1", "3", api_name="/attention_grid_head")
    assert "layer 1, head 3" in figure(plot)["layout"]["title"]["text"] and "Layer 1, head 3:" in note
    assert "(threshold 0.4)" in note
