"""One gradient step and Head ablation explain the model in front of it: for every decoder-only family
(ours as shipped, GPT-2, Llama with grouped-query attention, Qwen2 with q/k/v biases, Mistral with one key/value head,
GPT-NeoX and an attention-only model) One gradient step's text names each parameter the model has, by state_dict name
and true shape, with the role it plays, and no symbol of a part the model lacks; its per-head maps are each head's own
rows of the gradient, recomputed here from autograd on the modules' own row counts (float32, 1e-5); and Head ablation
says that a removed query head leaves its shared key/value head exactly where the model shares them."""

import copy

import numpy as np
import pytest
import torch

from explorer.learning.gradient_step import gradient_step
from explorer.present.ablation import ABLATION
from explorer.present.gradient_step import GRADIENT_STEP, head_norms_figure, parameters_text
from explorer.views.ablation import ablate_heads, rank_heads
from support.families import FAMILIES, family

TEXT, TARGET, RATE = "Shall I compare thee to a summer", " the", 0.001
TOLERANCE = 1e-5  # float32
DECODERS = [name for name in FAMILIES if name != "paper"]  # One gradient step refuses an encoder-decoder


@pytest.fixture(scope="module", params=DECODERS)
def stepped(request):
    model, tokenizer = family(request.param)
    return request.param, model, tokenizer, gradient_step(TEXT, model, tokenizer, -1, TARGET, RATE)


def shape_text(shape) -> str:
    return " × ".join(map(str, shape))


def test_every_parameter_is_listed_with_its_true_shape_and_nothing_else(stepped):
    """Each layer's tensors once (under their name within the layer), the others by their full state_dict name, each
    with the shape named_parameters gives; a tied LM head is listed as the embedding it is."""
    _, model, _, step = stepped
    text = parameters_text(step)
    listed = set()
    for name, parameter in model.named_parameters():
        label = name.split(".layers.", 1)[1].split(".", 1)[1] if ".layers." in name else name
        assert f"`{label}` ({shape_text(parameter.shape)})" in text, name
        listed.add(label)
    tied = model.get_output_embeddings().weight is model.get_input_embeddings().weight
    if tied:
        assert "`lm_head.weight` = `model.decoder.embed.token.weight`" in text and "E itself (tied)" in text
    assert text.count("`") // 2 == len(listed) + 2 * tied  # no tensor the model lacks (a tied one: two names)


def test_the_roles_named_are_the_models_own(stepped):
    """W_gate and W_up only in a gated feed-forward (at the rows linear1 splits them), W_1 only in the paper's, no
    feed-forward in an attention-only model; each bias symbol, β and P only where the model holds that tensor; W_U
    only for an untied head; the norm's own name."""
    name, model, _, step = stepped
    text, layer, config = parameters_text(step), model.model.decoder.stack.layers[0], model.config
    has = {n.split(".layers.0.", 1)[-1] for n, _ in model.named_parameters() if ".layers.1." not in n}
    gated, plain = config.feed_forward == "gated", config.feed_forward == "mlp"
    assert ("W_gate" in text) == ("W_up" in text) == gated and ("W_1" in text) == plain
    assert ("W_2" in text) == (layer.feed_forward is not None)
    if gated:  # linear1 holds [gate; up]: the split the model's forward makes with chunk(2)
        d_ff = layer.feed_forward.linear2.weight.shape[1]
        assert layer.feed_forward.linear1.weight.shape[0] == 2 * d_ff
        assert f"W_gate (rows 0–{d_ff - 1}) and W_up (rows {d_ff}–{2 * d_ff - 1})" in text
    qkv_bias, out_bias = "self_attn.qkv_proj.bias" in has, "self_attn.out_proj.bias" in has
    ffn_bias = "feed_forward.linear1.bias" in has
    assert ("b_Q, b_K, b_V" in text) == qkv_bias and ("b_O" in text) == out_bias
    assert ("b_1" in text) == ("b_2" in text) == ffn_bias
    assert ("β" in text) == ("model.decoder.stack.norm.bias" in has)
    assert ("P, the learned position table" in text) == ("model.decoder.embed.position.weight" in has)
    norm, other = ("RMSNorm", "LayerNorm") if config.norm == "rmsnorm" else ("LayerNorm", "RMSNorm")
    assert f"γ of the final {norm}" in text and other not in text
    parallel = config.parallel_residual  # GPT-NeoX: two norms of the same input, one for each block
    assert (f"`self_attn_norm.norm.weight` ({config.d_model}): γ of {norm}_1, which attention reads from the layer's "
            "input x" in text) == parallel
    assert (f"γ of {norm}_2, which the feed-forward reads from the layer's input x" in text) == parallel
    assert (f"γ of the {norm} attention reads" in text) == (config.norm_first and not parallel)
    untied = "lm_head.weight" in has
    assert ("W_U" in text) == untied and ("untied" in text) == untied and ("(tied)" in text) == (not untied)
    if name == "qwen2":
        assert qkv_bias and not out_bias and not ffn_bias


def test_the_stacked_rows_named_are_the_modules_own(stepped):
    """The rows of W_Q, W_K, W_V in qkv_proj that the text names are those the attention module slices."""
    _, model, _, step = stepped
    attention = model.model.decoder.stack.layers[0].self_attn
    q, k = attention.rows["q"], attention.rows["k"]
    rows = f"rows 0–{q - 1}, {q}–{q + k - 1}, {q + k}–{q + 2 * k - 1}"
    assert f"W_Q, W_K, W_V stacked: {rows}" in parameters_text(step)
    assert attention.qkv_proj.weight.shape[0] == q + 2 * k


def test_grouped_key_value_heads_are_said_and_only_then(stepped):
    name, model, _, step = stepped
    grouped = model.config.n_kv_heads < model.config.n_heads
    text = parameters_text(step)
    assert ("one column per key/value head" in text) == grouped
    titles = [a.text for a in head_norms_figure(step).layout.annotations]
    assert ("W_K (per KV head)" in titles) == grouped and ("W_K" in titles) == (not grouped)
    if name == "mistral":
        assert "all 4 query heads share one key/value head" in text
    assert "key/value head" in GRADIENT_STEP  # the fixed text is true of grouped models too


def test_every_head_map_is_that_heads_rows_of_the_gradient(stepped):
    """Autograd on a float32 copy, the gradient of qkv_proj cut at the module's own row counts (q: n_heads blocks,
    k and v: n_kv_heads blocks of d_head), out_proj by columns; "all" of query head h adds the k and v of the
    key/value head it reads (the model repeats each key/value head over n_heads / n_kv_heads query heads)."""
    name, model, tokenizer, step = stepped
    learner = copy.deepcopy(model).float().eval().requires_grad_(True)
    ids = tokenizer(TEXT, return_tensors="pt", add_special_tokens=False).input_ids
    target = tokenizer(TARGET, add_special_tokens=False).input_ids
    with torch.enable_grad():
        logits = learner(ids, use_cache=False).logits[:, -1].float()
        torch.nn.functional.cross_entropy(logits, torch.tensor(target)).backward()
    config = model.config
    H, G, dh = config.n_heads, config.n_kv_heads, config.d_head
    for index, layer in enumerate(learner.model.decoder.stack.layers):
        attention = layer.self_attn
        weight, bias = attention.qkv_proj.weight.grad, attention.qkv_proj.bias
        bias = torch.zeros(weight.shape[0]) if bias is None else bias.grad
        starts = {"q": 0, "k": attention.rows["q"], "v": attention.rows["q"] + attention.rows["k"]}
        squares = {}
        for part, heads in (("q", H), ("k", G), ("v", G)):
            squares[part] = torch.tensor([weight[starts[part] + h * dh:starts[part] + (h + 1) * dh].pow(2).sum()
                                          + bias[starts[part] + h * dh:starts[part] + (h + 1) * dh].pow(2).sum()
                                          for h in range(heads)])
        out = attention.out_proj.weight.grad
        squares["o"] = torch.tensor([out[:, h * dh:(h + 1) * dh].pow(2).sum() for h in range(H)])
        for part, grid in squares.items():
            np.testing.assert_allclose(step.head_grad_norms[part][index], grid.sqrt(), rtol=TOLERANCE, atol=TOLERANCE,
                                       err_msg=f"{name} layer {index} {part}")
        reads = [h * G // H for h in range(H)]
        everything = squares["q"] + squares["o"] + squares["k"][reads] + squares["v"][reads]
        np.testing.assert_allclose(step.head_grad_norms["all"][index], everything.sqrt(), rtol=TOLERANCE,
                                   atol=TOLERANCE, err_msg=f"{name} layer {index} all")


def test_head_ablation_says_a_shared_key_value_head_stays_only_where_heads_share_one(stepped):
    """The removed head's status says which query heads share each key/value head, for a grouped model only."""
    name, model, tokenizer, _ = stepped
    grouped = model.config.n_kv_heads < model.config.n_heads
    removed = ablate_heads(model, tokenizer, TEXT, "0.0")
    said = " ".join(removed.notices)
    assert ("key/value head it reads stays" in said) == grouped and ("key/value head" in said) == grouped
    if name == "mistral":
        assert "all 4 query heads share one key/value head" in said
    assert "key/value head" in ABLATION  # the fixed text is true of grouped models too
    assert not [n for n in ablate_heads(model, tokenizer, TEXT, "").notices if "key/value" in n]


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_ranking_every_head_names_the_sharing_too(name):
    model, tokenizer = family(name)
    notices = " ".join(rank_heads(model, tokenizer, TEXT, workers=1).notices)
    assert ("grouped-query attention" in notices) == (name == "llama")
