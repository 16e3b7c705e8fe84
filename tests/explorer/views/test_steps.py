"""explorer.views.steps: attention recomputed step by step equals the model's own numbers (float32, within 1e-5)."""

import numpy as np
import pytest
import torch

from explorer.generation.decoding import DecodingSettings
from explorer.core.inputs import InputProblem
from explorer.present.steps import steps_html
from explorer.generation.tokens import forward_inputs
from explorer.views.steps import MASKED_BELOW, attention_steps, recompute_attention
from modeling import record
from modeling.modeling_scratch_transformer import alibi_slopes
from support.families import family
from support.tiny_models import random_ids, tiny_causal_lm, tiny_seq2seq
from support.shipped import inputs_of, shipped

TOLERANCE = dict(rtol=0, atol=1e-5)
TEXT = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer"
SHIPPED = ["shakespeare-sinusoidal", "shakespeare-learned", "shakespeare-rope", "shakespeare-alibi", "shakespeare-none",
           "shakespeare-main", "folio-to-modern"]


def check_every_layer(model, inputs):
    """Every attention sublayer of every stack, recomputed from the stream going in, against the model's own
    attention weights (output_attentions) and its recorded W_O output and residual after Add & Norm."""
    with torch.inference_mode(), record() as recording:
        out = model(**inputs, use_cache=False, output_attentions=True)
    if model.config.is_encoder_decoder:
        kinds = {"encoder": (recording.encoder, out.encoder_attentions), "decoder": (recording.decoder, out.decoder_attentions),
                 "cross": (recording.decoder, out.cross_attentions)}
    else:
        kinds = {"self": (recording.decoder, out.attentions)}
    for kind, (stack, weights) in kinds.items():
        for layer, block in enumerate(stack.layers):
            cross = kind == "cross"
            with torch.inference_mode():
                r = recompute_attention(model, kind, layer, block.after_self_attention if cross else block.input,
                                        recording.encoder.output if cross else None)
            own = block.cross_attention if cross else block.self_attention
            torch.testing.assert_close(r.weights, weights[layer], **TOLERANCE)
            torch.testing.assert_close(r.output, own.output, **TOLERANCE)
            torch.testing.assert_close(r.residual_out, block.after_cross_attention if cross else block.after_self_attention,
                                       **TOLERANCE)
    return kinds


@pytest.mark.parametrize("name", SHIPPED)
def test_recomputation_reproduces_every_shipped_model(name):
    """All five position encodings (shakespeare-<encoding>, and main: RoPE) and the encoder-decoder (encoder self,
    decoder self, cross), every layer and head, on a real text."""
    model, tokenizer = shipped(name)
    inputs = inputs_of(model, tokenizer, TEXT)
    kinds = check_every_layer(model, inputs)
    assert set(kinds) == ({"encoder", "decoder", "cross"} if model.config.is_encoder_decoder else {"self"})


@pytest.mark.parametrize("build", [lambda: tiny_causal_lm("alibi", norm_first=False, final_layer_norm=False),
                                   lambda: tiny_seq2seq("rope", norm_first=False)], ids=["post-norm causal", "post-norm seq2seq"])
def test_recomputation_follows_post_norm_models_too(build):
    model, ids = build(), random_ids(1, 11)
    inputs = {"input_ids": ids}
    if model.config.is_encoder_decoder:
        inputs["decoder_input_ids"] = ids[:, :6]
    check_every_layer(model, inputs)


@pytest.mark.parametrize("name, kind", [("shakespeare-main", "self"), ("shakespeare-alibi", "self"),
                                        ("shakespeare-sinusoidal", "self"), ("shakespeare-learned", "self"),
                                        ("shakespeare-none", "self"), ("folio-to-modern", "encoder"),
                                        ("folio-to-modern", "decoder"), ("folio-to-modern", "cross")])
def test_every_step_shown_matches_the_models_own_number(name, kind):
    model, tokenizer = shipped(name)
    for layer, head, query in ((0, 0, 3), (model.config.n_layers - 1, model.config.n_heads - 1, -1)):
        view = attention_steps(model, tokenizer, TEXT, kind, layer, head, query)
        checked = [s for s in view.steps if s.model_parity is not None]
        assert len(checked) >= 7 and view.parity.gap <= 1e-5, [(s.title, s.model_parity) for s in checked]
        titles = [s.title for s in view.steps]
        rope = model.config.position_encoding == "rope" and kind != "cross"
        assert ("Query after RoPE" in titles) == rope
        added = model.config.position_encoding in ("sinusoidal", "learned") and layer == 0 and kind != "cross"
        assert any(t.startswith("Position encoding") for t in titles) == added


def test_a_llama_with_llama_3_2s_slowed_rope_is_recomputed_and_told_as_it_turns():
    """RoPE's frequencies slowed by Llama 3.1's rule (three of the head's four pairs turn up to 32 times slower):
    every layer recomputed, every step equal to the model's own number, and the rule named where RoPE acts."""
    model, tokenizer = family("llama")
    assert model.config.rope_frequency_scaling["rope_type"] == "llama3"
    check_every_layer(model, inputs_of(model, tokenizer, TEXT))
    view = attention_steps(model, tokenizer, TEXT, "self", 1, 3, -1)
    assert view.parity.gap <= 1e-5, [(s.title, s.model_parity) for s in view.steps]
    rotated = next(s for s in view.steps if s.title == "Query after RoPE")
    assert rotated.model_parity is not None and "θ_i = θ^(−2i/d_rotary), slowed by Llama 3.1's rule" in rotated.formula
    assert "over 64 tokens turns 32× slower; one under 8 tokens turns as θ^(−2i/d_rotary) says" in rotated.note


def test_the_scores_table_is_the_models_row_with_masked_keys_at_zero():
    model, tokenizer = shipped("shakespeare-alibi")
    view = attention_steps(model, tokenizer, TEXT, "self", 2, 3, 5)
    table = next(s for s in view.steps if s.title == "Scores, mask and softmax")
    ids = tokenizer(TEXT, return_tensors="pt").input_ids
    with torch.inference_mode():
        weights = model(ids, output_attentions=True).attentions[2][0, 3, 5]
    np.testing.assert_allclose(table.values[:, 3], weights.numpy(), atol=1e-6)
    assert (table.values[6:, 1] < MASKED_BELOW).all() and (table.values[6:, 3] == 0).all()
    slope = float(alibi_slopes(model.config.n_heads)[3])
    np.testing.assert_allclose(table.values[:6, 1], [-slope * (5 - j) for j in range(6)], rtol=1e-6)
    assert f"{slope:.4g}" in table.note and table.rows[5] == view.query_tokens[5] and table.highlight == 5


@pytest.mark.parametrize("kind, layer, head, query, message", [
    ("cross", 0, 0, 0, "Attention must be one of self for this model; got `cross`."),
    ("self", 6, 0, 0, "Layer (−1 for the last) must be a whole number from -1 to 5; got `6`."),
    ("self", 0, "x", 0, "Head (−1 for the last) must be a whole number from -1 to 7; got `x`."),
    ("self", 0, 0, 500, "Query token (−1 for the last) must be a whole number from -1 to"),
    ("self", 0, 0, float("nan"), "Query token (−1 for the last) must be a whole number"),
])
def test_bad_picks_say_what_is_allowed(kind, layer, head, query, message):
    model, tokenizer = shipped("shakespeare-main")
    with pytest.raises(InputProblem) as error:
        attention_steps(model, tokenizer, TEXT, kind, layer, head, query)
    assert message in str(error.value)


@pytest.mark.parametrize("name, kind", [("shakespeare-main", "self"), ("shakespeare-sinusoidal", "self"),
                                        ("folio-to-modern", "cross")])
def test_the_shape_shown_is_the_shape_of_the_models_own_tensor(name, kind):
    """Every step's shape, and the shape its HTML names, is the shape of the model's own tensor for that step
    (a 256-wide vector is (256,), wrapped into rows of d_k only for display)."""
    model, tokenizer = shipped(name)
    layer, head, t = 0, 1, 4
    view = attention_steps(model, tokenizer, TEXT, kind, layer, head, t)
    inputs = forward_inputs(model, tokenizer, TEXT, DecodingSettings(False)).inputs  # what the view itself read
    with torch.inference_mode(), record() as recording:
        model(**inputs, use_cache=False)
    block = recording.decoder.layers[layer]
    own = block.cross_attention if kind == "cross" else block.self_attention
    expected = {
        "Token embedding": recording.decoder.embeddings.token[0, t],
        "Residual stream going in": (block.after_self_attention if kind == "cross" else block.input)[0, t],
        "LayerNorm, then the sublayer (pre-norm)": own.input[0, t],
        f"Query of head {head}": own.query[0, head, t], f"Keys of head {head}": own.key[0, head],
        f"Values of head {head}": own.value[0, head], "Query after RoPE": own.query[0, head, t],
        "Keys after RoPE": own.key[0, head], "Scores, mask and softmax": own.scores[0, head, t],
        f"Output of head {head}": own.heads[0, head, t], "All heads concatenated": own.concatenated[0, t],
        "Output projection": own.output[0, t],
        "Add (residual)": (block.after_cross_attention if kind == "cross" else block.after_self_attention)[0, t],
    }
    if recording.decoder.embeddings.position is not None:
        expected[f"Position encoding ({model.config.position_encoding})"] = recording.decoder.embeddings.position[0, t]
    page = steps_html(view.steps)
    for step in view.steps:
        assert step.shape == tuple(expected[step.title].shape), step.title
        written = "(" + ", ".join(map(str, step.shape)) + ("," if len(step.shape) == 1 else "") + ")"
        assert f"shape {written}" in page
    d = model.config.d_model
    vectors = [s for s in view.steps if s.shape == (d,)]
    assert len(vectors) >= 4 and all(s.layout == f"shown in rows of {model.config.d_head}" for s in vectors)
    assert "shape 8 × 32" not in page and "×" not in "".join(s.layout for s in view.steps)


def test_a_pre_norm_model_adds_without_a_norm_and_a_post_norm_one_is_named_add_and_norm():
    """The step after W_O is named for what the model computes: x + attention(LN(x)) in a pre-norm model (no
    LayerNorm after the add: the shown numbers equal the plain sum), LN(x + attention(x)) in a post-norm one."""
    model, tokenizer = shipped("shakespeare-main")
    assert model.config.norm_first
    view = attention_steps(model, tokenizer, TEXT, "self", 2, 0, 6)
    by_title = {s.title: s for s in view.steps}
    assert "Add & Norm" not in by_title and "Add (residual)" in by_title
    added = by_title["Residual stream going in"].values + by_title["Output projection"].values
    np.testing.assert_allclose(by_title["Add (residual)"].values, added, atol=1e-5)
    assert "LayerNorm(x + Sublayer(x))" in by_title["Add (residual)"].note
    post = tiny_causal_lm("alibi", norm_first=False, final_layer_norm=False, vocab_size=model.config.vocab_size)
    titles = [s.title for s in attention_steps(post, tokenizer, "To be, or not", "self", 0, 0, -1).steps]
    assert titles[-1] == "Add & Norm" and not any(t.startswith("LayerNorm") for t in titles)


def test_large_numbers_match_to_their_own_rounding():
    """A GPT-2 whose weights are 20 times their initial size: the recomputed steps differ from the model's own numbers
    by up to 3.7e-5 where those reach 19 (2e-6 of their size), which is float32 rounding and is shown as matching
    (it read "✗ differs": the bound was 1e-5 whatever the numbers' size)."""
    from modeling import convert
    from support import hub_repos

    theirs, tok = hub_repos.scaled_gpt2(20, n_embd=256, n_layer=1, n_head=4, n_positions=128)
    view = attention_steps(convert.from_transformers(theirs).eval(), tok, TEXT, "self", 0, 0, -1)
    assert view.parity.size > 10 and view.parity.relative <= 2e-5, view.parity  # measured 2.0e-6
    body = steps_html(view.steps)
    assert "✗" not in body and body.count("✓ matches") == sum(s.model_parity is not None for s in view.steps) >= 7
