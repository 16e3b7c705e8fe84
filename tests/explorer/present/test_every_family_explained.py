"""Every view explains the model in front of it: for ours as shipped, the paper's post-norm encoder-decoder,
GPT-2, Llama (grouped-query), Qwen2 (q/k/v biases), Mistral (one key/value head), GPT-NeoX (parallel residual, a quarter
of each head rotated) and an attention-only model, the text of Attention step by step, Inside the forward pass, the
Logit lens and the head types names what the model has and nothing it lacks; and every value a formula shows is
recomputed here by hand from the weights (float32, 1e-5)."""

import re

import numpy as np
import pytest
import torch

from explorer.present.attention import head_types_html
from explorer.present.lens import lens_table_html
from explorer.present.patching import TEACHING
from explorer.present.steps import steps_html
from explorer.present.trace import trace_table
from explorer.views.architecture import describe
from explorer.views.attention import attention_maps
from explorer.views.heads import head_types
from explorer.views.lens import logit_lens
from explorer.views.steps import attention_steps
from explorer.views.trace import forward_trace
from support.families import FAMILIES, family
from support.shipped import GREEDY, inputs_of

TEXT = "Shall I compare thee to a summer's day? Thou art more lovely"
TOLERANCE = 1e-5  # float32


def kind_of(model) -> str:
    return "encoder" if model.config.is_encoder_decoder else "self"


@pytest.fixture(scope="module", params=FAMILIES)
def explained(request):
    """(name, model, tokenizer, its steps view of the last head at the last token of layer 0, and every view's text)."""
    model, tokenizer = family(request.param)
    kind = kind_of(model)
    steps = attention_steps(model, tokenizer, TEXT, kind, 0, model.config.n_heads - 1, -1, GREEDY)
    maps = attention_maps(model, tokenizer, TEXT, GREEDY)
    texts = {
        "steps": "\n".join([f"{s.title}\n{s.formula}\n{s.note}" for s in steps.steps] + steps.architecture.summary()),
        "steps html": steps_html(steps.steps, architecture=steps.architecture),
        "trace": "\n".join(" | ".join(row) for row in trace_table(forward_trace(model, tokenizer, TEXT, GREEDY))),
        "lens": lens_table_html(logit_lens(model, tokenizer, TEXT, None, GREEDY)),
        "heads": head_types_html(head_types(model, maps.weights[kind], kind)),
    }
    return request.param, model, tokenizer, steps, texts


def by_title(steps) -> dict:
    return {re.sub(r" of head \d+.*", "", s.title): s for s in steps.steps}


def test_the_norm_is_named_as_it_is_and_rmsnorm_is_not_said_to_centre(explained):
    name, model, _, _, texts = explained
    arch = describe(model)
    other = {"LayerNorm": "RMSNorm", "RMSNorm": "LayerNorm"}[arch.norm]
    for view in ("steps", "trace"):
        assert arch.norm in texts[view] and other not in texts[view], (name, view)
    if arch.final_norm:
        assert f"{arch.norm}_final" in texts["lens"] and other not in texts["lens"]
    if not arch.centres:
        assert "to mean 0" not in texts["steps"] and "does not subtract the mean" in texts["steps"]
    if not arch.pre_norm:
        assert "Add & Norm" in texts["steps"] and f"{arch.norm}(x_t + attention(x_t))" in texts["steps"]


def test_biases_appear_only_where_the_model_has_them(explained):
    name, model, _, _, texts = explained
    arch = describe(model)
    for symbol, part in (("b_Q", "q"), ("b_K", "k"), ("b_V", "v"), ("b_O", "o")):
        for view in ("steps", "trace"):
            assert (symbol in texts[view]) == arch.has_bias(part), (name, view, symbol)
    if arch.feed_forward == "mlp":
        assert ("b_1" in texts["trace"]) == arch.has_bias("ffn")


def test_the_feed_forward_is_the_models_own(explained):
    name, model, _, _, texts = explained
    arch, trace = describe(model), texts["trace"]
    assert ("feed-forward hidden" in trace) == (arch.feed_forward != "none")
    assert ("no feed-forward" in trace) == ("FFN" not in texts["steps"]) == (arch.feed_forward == "none")
    assert ("W_gate" in trace) == (arch.feed_forward == "gated") and ("W_1" in trace) == (arch.feed_forward == "mlp")
    if arch.feed_forward == "gated":
        assert f"{arch.activation}(x W_gate) ⊙ (x W_up)" in trace
    if arch.feed_forward == "mlp":
        assert f"{arch.activation}(x W_1" in trace
    assert ("parallel" in trace) == arch.parallel_residual and ("parallel" in texts["steps"]) == arch.parallel_residual


def test_a_parallel_residuals_first_norm_and_its_partial_sum_are_named_as_they_are(explained):
    """GPT-NeoX's attention reads Norm_1(x) and its feed-forward Norm_2(x) of the same x: the stream once attention
    is added is a partial sum the feed-forward never reads, not "the residual stream"; every other model has one norm
    before each sublayer, or none (post-norm)."""
    name, model, _, steps, texts = explained
    arch, shown = describe(model), by_title(steps)
    parallel = arch.parallel_residual
    assert ("LayerNorm_1(x): parallel residual, attention reads the layer's input x" in texts["trace"]) == parallel
    assert ("x + attention(LayerNorm_1(x)): attention's part of the parallel residual; the feed-forward reads x itself"
            in texts["trace"]) == parallel
    assert ("the residual stream: x + attention(" in texts["trace"]) == (arch.pre_norm and not parallel)
    assert shown["Add (residual)" if arch.pre_norm else "Add & Norm"].formula == (
        "x_t + attention(LayerNorm_1(x_t))" if parallel else f"x_t + attention({arch.norm}(x_t))" if arch.pre_norm
        else f"{arch.norm}(x_t + attention(x_t))")
    if parallel:
        normed = shown["LayerNorm_1, then attention (parallel residual)"]
        assert normed.formula.startswith("LayerNorm_1(x_t) = (x_t − mean)") and "LayerNorm_2(x_t)" in normed.note
    assert ("_1(" in texts["steps"] + texts["trace"]) == ("_2(" in texts["steps"] + texts["trace"]) == parallel


QUERIES_READ = {"ours": "LayerNorm(x) W_Q + b_Q", "paper": "x W_Q + b_Q", "gpt2": "LayerNorm(x) W_Q + b_Q",
                "llama": "RMSNorm(x) W_Q,", "qwen2": "RMSNorm(x) W_Q + b_Q", "mistral": "RMSNorm(x) W_Q,",
                "gpt_neox": "LayerNorm_1(x) W_Q + b_Q", "attention-only": "LayerNorm(x) W_Q + b_Q"}


def test_the_trace_projects_what_the_sublayer_reads(explained):
    """Queries, keys and values are products of what the row above them holds: the normed stream (pre-norm), the
    first of a parallel residual's two norms, or x itself (post-norm), not the stream x a pre-norm layer adds to."""
    name, model, _, _, texts = explained
    assert f"queries: {QUERIES_READ[name]}" in texts["trace"]
    if not model.config.is_encoder_decoder:
        assert f"keys: {QUERIES_READ[name].replace('Q', 'K')}" in texts["trace"]


def test_shared_key_value_heads_are_said_and_their_rows_are_the_real_ones(explained):
    """The query step's row ranges of W_K and W_V in qkv_proj are the module's own slices; grouped heads are named
    in the steps, the trace and the head types, and never where every head has its own."""
    name, model, _, steps, texts = explained
    arch, attention = describe(model), steps.architecture
    module = model.model.encoder.stack.layers[0].self_attn if model.config.is_encoder_decoder else \
        model.model.decoder.stack.layers[0].self_attn
    q_rows, kv_rows = module.projection("q")[0].shape[0], module.projection("k")[0].shape[0]
    note = by_title(steps)["Query"].note
    assert f"whose rows {q_rows}–{q_rows + kv_rows - 1} hold W_K and {q_rows + kv_rows}–{q_rows + 2 * kv_rows - 1} W_V" in note
    grouped = "grouped-query" in texts["steps"] or "multi-query" in texts["steps"]
    assert grouped == attention.grouped == (model.config.n_kv_heads < model.config.n_heads)
    assert ("key/value head" in texts["steps"]) == arch.grouped and ("key/value head" in texts["trace"]) == arch.grouped
    assert ("Grouped key/value heads" in texts["heads"]) == arch.grouped
    assert ("its own W_Q, W_K, W_V" in texts["steps"]) == (not arch.grouped)
    if name == "mistral":
        assert "multi-query" in texts["steps"] and "one W_K and one W_V" in texts["heads"]


def test_embedding_scale_rotary_share_and_head_are_said_as_they_are(explained):
    name, model, _, steps, texts = explained
    arch = describe(model)
    assert by_title(steps)["Token embedding"].formula == ("E[x_t] · √d_model" if arch.scaled_embeddings else "E[x_t]")
    assert ("E[x]·√d_model" in texts["trace"] or "E[x] · √d_model" in texts["trace"]) == arch.scaled_embeddings
    assert ("untied" in texts["lens"]) == (not arch.tied_head) and ("untied" in texts["trace"]) == (not arch.tied_head)
    assert ("tied: the LM head is the embedding matrix E" in texts["lens"]) == arch.tied_head
    assert ("unrotated" in texts["trace"]) == arch.partial_rotary and ("unrotated" in texts["steps"]) == arch.partial_rotary
    if name == "gpt_neox":
        assert "RoPE turns the first d_rotary = 2 of each head's d_head = 8 dimensions" in texts["trace"]
        assert "d_rotary/2 pairs=1" in texts["trace"]


def test_every_value_a_step_shows_recomputes_by_hand_from_the_weights(explained):
    """The token embedding, the norm, the query, key and value of the followed head (rows of qkv_proj as the notes
    name them) and the output projection, each from the weights by its formula, against the values shown."""
    name, model, tokenizer, steps, _ = explained
    arch, shown = describe(model), by_title(steps)
    stack = model.model.encoder if model.config.is_encoder_decoder else model.model.decoder
    layer = stack.stack.layers[0]
    ids = inputs_of(model, tokenizer, TEXT)["input_ids"][0]
    t, h = steps.query, steps.head
    token = torch.tensor(shown["Token embedding"].values).flatten()
    scale = model.config.d_model ** 0.5 if arch.scaled_embeddings else 1.0
    np.testing.assert_allclose(token, stack.embed.token.weight[ids[t]].detach() * scale, atol=TOLERANCE)
    x = torch.tensor(shown["Residual stream going in"].values).flatten()
    norm = layer.self_attn_norm.norm
    norm_weight, norm_bias = norm.weight.detach(), None if getattr(norm, "bias", None) is None else norm.bias.detach()
    if arch.pre_norm:
        title = (f"{arch.norm}_1, then attention (parallel residual)" if arch.parallel_residual
                 else f"{arch.norm}, then the sublayer (pre-norm)")
        if arch.centres:
            by_hand = (x - x.mean()) / torch.sqrt(x.var(unbiased=False) + norm.eps) * norm_weight
            by_hand = by_hand if norm_bias is None else by_hand + norm_bias
        else:
            by_hand = x / torch.sqrt(x.pow(2).mean() + norm.eps) * norm_weight
            assert f"the output's mean is {float(by_hand.mean()):.4g}" in shown[title].note
        normed = torch.tensor(shown[title].values).flatten()
        np.testing.assert_allclose(normed, by_hand, atol=TOLERANCE)
    else:
        normed = x
    weight, bias = layer.self_attn.qkv_proj.weight.detach(), layer.self_attn.qkv_proj.bias
    for part, label, head in (("q", "Query", h), ("k", "Keys", arch.kv_head_of(h)), ("v", "Values", arch.kv_head_of(h))):
        rows = arch.head_rows(part, head)
        if part != "q":
            assert f"W_{part.upper()}^{head if arch.grouped else 'h'} is rows {rows.start}–{rows.stop - 1}" in shown[label].note
        by_hand = normed @ weight[rows.start:rows.stop].T + (0 if bias is None else bias.detach()[rows.start:rows.stop])
        row = shown[label].values[0 if part == "q" else t]
        np.testing.assert_allclose(row, by_hand, atol=TOLERANCE, err_msg=f"{name} {label}")
    concatenated = torch.tensor(shown["All heads concatenated"].values).flatten()
    out = layer.self_attn.out_proj
    by_hand = concatenated @ out.weight.detach().T + (0 if out.bias is None else out.bias.detach())
    np.testing.assert_allclose(torch.tensor(shown["Output projection"].values).flatten(), by_hand, atol=TOLERANCE)


@pytest.mark.parametrize("name", [f for f in FAMILIES if f != "paper"])
def test_the_lens_reads_out_through_the_models_own_norm_and_head(name):
    """Row "embeddings" recomputed by hand: the final norm by its formula (LayerNorm or RMSNorm), then the model's own
    head matrix (E when tied, W_U when not)."""
    model, tokenizer = family(name)
    lens = logit_lens(model, tokenizer, TEXT, None, GREEDY)
    ids = inputs_of(model, tokenizer, TEXT)["input_ids"]
    with torch.inference_mode():
        h = model(ids, output_hidden_states=True, use_cache=False).hidden_states[0][0].float()
        norm, arch = model.model.decoder.stack.norm, describe(model)
        if arch.centres:
            h = (h - h.mean(-1, keepdim=True)) / torch.sqrt(h.var(-1, unbiased=False, keepdim=True) + norm.eps) * norm.weight
            h = h if norm.bias is None else h + norm.bias
        else:
            h = h / torch.sqrt(h.pow(2).mean(-1, keepdim=True) + norm.eps) * norm.weight
        head = model.get_input_embeddings().weight if arch.tied_head else model.lm_head.weight
        by_hand = h @ head.T
    probs = by_hand.softmax(-1)  # the lens keeps, of the embeddings' row, what it shows: p(next token), the top at the end
    next_ids = ids[0, 1:]
    np.testing.assert_allclose(lens.next_token_probs[0], probs[:-1].gather(-1, next_ids[:, None])[:, 0],
                               atol=1e-5, rtol=1e-4)
    np.testing.assert_allclose(lens.top_probs[0], probs[lens.position].topk(lens.top_probs.shape[1]).values,
                               atol=1e-5, rtol=1e-4)


def test_patching_says_how_each_kind_of_layer_adds_a_sublayer():
    """Not "our layers are pre-norm" for every model: the sentence names pre-norm, post-norm and the parallel residual."""
    assert "our layers are pre-norm" not in TEACHING
    assert "pre-norm" in TEACHING and "post-norm" in TEACHING and "parallel-residual" in TEACHING


def test_the_routes_say_this_models_layer_and_their_teaching_no_other(explained):
    """How the prediction was made: the line above the graph gives the model's own layer (its norm, pre- or post-norm
    or parallel) and what of it is split; the fixed teaching text names no norm of its own."""
    from explorer.present.routes import TEACHING as ROUTES_TEACHING
    from explorer.views.routes.graph import prediction_routes
    from explorer.views.routes.split import steps_of

    name, model, tokenizer, _, _ = explained
    arch = describe(model)
    note = prediction_routes(model, tokenizer, TEXT, decoding=GREEDY).notices[0]
    assert note.startswith("This model's layer: ") and arch.residual_formula() in note, (name, note)
    rows = [step.sublayers for step in steps_of(model.config) if step.layer == 0]  # the graph's rows of one layer
    assert len(arch.residual_formula().split("; then ")) == len(rows)
    assert ("CrossAttn(" in note) == (("cross",) in rows), (name, note)
    assert {"LayerNorm": "RMSNorm", "RMSNorm": "LayerNorm"}[arch.norm] not in note
    assert ("split into its parts before it is added" in note) == (arch.pre_norm and not arch.parallel_residual)
    assert ("the sum before each" in note) == (not arch.pre_norm and not arch.parallel_residual)
    assert "LN(" not in ROUTES_TEACHING and "Our models" not in ROUTES_TEACHING
