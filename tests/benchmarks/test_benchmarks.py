"""The speed benchmarks race fair peers (the functional floor is the model's own step, the minimal GPT computes
GPT-2's logits), count operators right, and run every flag's code path (tiny sizes, one repeat: not timed tests)."""

import re

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from transformers import DynamicCache

from benchmarks import generation, training_step
from benchmarks.generation import check_functional_floor, functional_decode, functional_steps_per_second, matrix_products
from benchmarks.gpt2_reference import gpt2_like
from benchmarks.minimal_gpt import MinimalGPT, MinimalGPTConfig
from benchmarks.op_count import count_issued, count_step, is_view, site_name
from modeling import ScratchTransformerConfig, ScratchTransformerForCausalLM
from modeling.convert import causal_lm_from_gpt2

SMALL = ScratchTransformerConfig(vocab_size=97, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.0,
                                 activation="gelu", norm_first=True)


@pytest.mark.parametrize("fused_qkv", [True, False])
def test_the_functional_floor_computes_the_models_own_logits_step_by_step(fused_qkv):
    torch.manual_seed(0)
    model = causal_lm_from_gpt2(gpt2_like(SMALL, positions=32)).eval()
    ids = torch.randint(1, SMALL.vocab_size, (1, 5))
    step = functional_decode(model, fused_qkv)
    with torch.inference_mode():
        cache = DynamicCache(config=model.config)
        token = model(ids, past_key_values=cache, use_cache=True).logits[:, -1:].argmax(-1)
        mine = [(layer.keys, layer.values) for layer in cache.layers]
        for position in range(5, 15):
            expected, got = model(token, past_key_values=cache, use_cache=True).logits, step(token, position, mine)
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)
            token = expected[:, -1:].argmax(-1)
    check_functional_floor(model, ids, fused_qkv=fused_qkv)
    assert functional_steps_per_second(model, ids, new_tokens=4, fused_qkv=fused_qkv) > 0


@pytest.mark.parametrize("change", [dict(position_encoding="rope"), dict(feed_forward="none")])
def test_the_functional_floor_refuses_a_model_it_does_not_describe(change):
    model = ScratchTransformerForCausalLM(ScratchTransformerConfig(**{**SMALL.to_dict(), **change}))
    with pytest.raises(ValueError, match="GPT-2-shaped"):
        functional_decode(model)


def test_the_matrix_products_are_the_models_own_in_either_memory_order():
    torch.manual_seed(0)
    model = causal_lm_from_gpt2(gpt2_like(SMALL, positions=32)).eval()
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 4 * SMALL.n_layers + 1  # Q, K and V stacked, out, two feed-forward layers a layer; the head
    with torch.inference_mode():
        as_linear, transposed = matrix_products(model, "(out, in)")(), matrix_products(model, "(in, out)")()
        assert len(as_linear) == len(transposed) == len(linears)
        for module, a, b in zip(linears, as_linear, transposed):
            assert a.shape == b.shape == (1, module.out_features)
            torch.testing.assert_close(b, a, atol=1e-5, rtol=0)  # the same arithmetic, another summation order
        x = torch.randn(1, SMALL.d_model, generator=torch.Generator().manual_seed(0))  # matrix_products' first input
        torch.testing.assert_close(as_linear[0], linears[0](x), atol=0, rtol=0)
    with pytest.raises(ValueError, match=r"stored_as must be"):
        matrix_products(model, "(in,out)")


def test_the_minimal_gpt_computes_gpt2s_logits_and_loss_from_gpt2s_weights():
    """The floor is a fair peer: with GPT-2's weights (Conv1D keeps W as (in, out)) it computes GPT-2's numbers."""
    torch.manual_seed(0)
    gpt2 = gpt2_like(SMALL, positions=16).eval()
    minimal = MinimalGPT(MinimalGPTConfig.like(SMALL, context=16)).eval()
    t = gpt2.transformer
    with torch.no_grad():
        minimal.token.weight.copy_(t.wte.weight), minimal.position.weight.copy_(t.wpe.weight)
        minimal.norm.load_state_dict(t.ln_f.state_dict())
        for block, h in zip(minimal.blocks, t.h):
            block.ln1.load_state_dict(h.ln_1.state_dict()), block.ln2.load_state_dict(h.ln_2.state_dict())
            for linear, conv in ((block.attn.qkv, h.attn.c_attn), (block.attn.out, h.attn.c_proj),
                                 (block.mlp[0], h.mlp.c_fc), (block.mlp[2], h.mlp.c_proj)):
                linear.weight.copy_(conv.weight.T), linear.bias.copy_(conv.bias)
        ids = torch.randint(0, SMALL.vocab_size, (2, 12))
        expected = gpt2(ids, labels=ids)
        logits, loss = minimal(ids, ids)
    torch.testing.assert_close(logits, expected.logits, atol=1e-5, rtol=0)
    torch.testing.assert_close(loss, expected.loss, atol=1e-5, rtol=0)


def test_site_names_put_a_star_for_layer_indices():
    assert site_name("model.decoder.stack.layers.3.self_attn.qkv_proj") == "model.decoder.stack.layers.*.self_attn.qkv_proj"
    assert site_name("blocks.11.mlp.0") == "blocks.*.mlp.*"
    assert site_name("0.weight_norm") == "*.weight_norm"
    assert site_name("") == "(root)"


def test_operator_counts_are_charged_to_modules_and_grow_with_the_layers():
    def count(n_layers: int):
        torch.manual_seed(0)
        model = MinimalGPT(MinimalGPTConfig(vocab_size=97, d_model=32, n_heads=4, n_layers=n_layers, d_ff=64, context=8))
        ids = torch.randint(0, 97, (2, 8))
        optimizer = torch.optim.AdamW(model.parameters(), fused=True)
        return count_step(model, lambda: model(ids, ids)[1], optimizer)

    two, again, four = count(2), count(2), count(4)
    assert two.issued == again.issued and two.calls == again.calls  # deterministic
    # forward of one block, by hand: the attention's own split, a view and a transpose for each of q, k and v, SDPA,
    # transpose, reshape (its qkv, out and dropout are modules of their own); one op in each of the MLP's four
    # modules (linear, gelu, linear, dropout)
    assert two.issued[("forward", "blocks.*.attn")] == 2 * 10
    # ops that compute (not views), forward, per block by hand: LayerNorm, qkv, SDPA, out, dropout, add; LayerNorm,
    # linear, GELU, linear, dropout, add: 12 (SDPA's CPU kernel writes its output as (B, T, H, Dh): the reshape of the
    # transposed heads is a view)
    assert four.computing("forward") - two.computing("forward") == 2 * 12
    assert two.computing() == sum(two.computing(phase) for phase in ("forward", "backward", "optimizer"))
    assert 0 < two.computing("backward") < two.phase_total("backward")
    assert two.issued[("forward", "blocks.*.attn.qkv")] == 2 * 1
    assert two.issued[("forward", "blocks.*.mlp.*")] == 2 * 4
    assert not [site for (_, site) in two.issued if "unmatched" in site or site == "(outside modules)"]
    for (phase, site), n in two.issued.items():
        if "*" in site:
            assert four.issued[(phase, site)] == 2 * n, (phase, site)  # twice the layers, twice the ops
        elif site != "(grad accumulation)":
            assert four.issued[(phase, site)] == n, (phase, site)
    # one gradient written per parameter tensor: a block has 12 (LayerNorms 2 x 2, qkv, out, MLP 2 each)
    grads = ("backward", "(grad accumulation)")
    assert four.issued[grads] - two.issued[grads] == 2 * 12
    assert two.issued_ops["aten::_fused_adamw_"] == 1 and two.phase_total("optimizer") == four.phase_total("optimizer")



class _Product(torch.nn.Module):
    """y = x W, then optionally y^T made contiguous (one copy of y) or y cast to bfloat16 and back (two casts)."""

    def __init__(self, extra: str = ""):
        super().__init__()
        self.weight, self.extra = torch.nn.Parameter(torch.randn(6, 5)), extra

    def forward(self, x):
        y = x @ self.weight
        if self.extra == "transpose":
            y = y.t().contiguous()
        elif self.extra == "casts":
            y = y.to(torch.bfloat16).float()
        return y.sum()


def test_the_bytes_a_step_copies_grow_by_exactly_what_a_copy_or_a_cast_moves():
    x = torch.randn(3, 6)

    def moved(extra: str):
        model = _Product(extra)
        return count_step(model, lambda: model(x), torch.optim.SGD(model.parameters(), lr=0.1)).moved

    plain, transpose, casts = moved(""), moved("transpose"), moved("casts")
    assert plain["forward"] > 0  # sum's output and the backward's seed are fills, the gradient's ones a clone
    # y^T.contiguous(): 15 float32 elements read and 15 written; its backward hands the gradient on as a view
    assert transpose["forward"] - plain["forward"] == 15 * (4 + 4)
    assert transpose["backward"] == plain["backward"]
    # float32 -> bfloat16 -> float32 forward: 15 x (2 + 4) bytes twice. The backward casts the gradient back the same
    # way, and the casts make it contiguous: the product's backward no longer clones the sum's expanded gradient
    # (15 float32 read and written), as it does without them
    assert casts["forward"] - plain["forward"] == 2 * 15 * (2 + 4)
    assert casts["backward"] - plain["backward"] == 2 * 15 * (2 + 4) - 15 * (4 + 4)

TINY = dict(vocab_size=97, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_position_embeddings=64, dropout=0.1)
MODELS = ["GPT2LMHeadModel", "ScratchTransformer (GPT-2's weights)", "ScratchTransformer (rope, as shipped)",
          "ScratchTransformer (learned, else as shipped)", "minimal GPT (benchmarks/minimal_gpt.py)"]


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    """A folder holding only config.json: the benchmarks read their sizes from it (RoPE, as shakespeare-main)."""
    folder = tmp_path_factory.mktemp("tiny")
    ScratchTransformerConfig(**TINY, position_encoding="rope").save_pretrained(folder)
    return str(folder)


@pytest.mark.parametrize("flags", [[], ["--dtype", "bfloat16"], ["--dtype", "float16"],
                                   ["--compile", "--compile-backend", "aot_eager"], ["--profile"]])
@pytest.mark.usefixtures("fresh_compiler")  # --compile: tests/conftest.py
def test_training_step_runs_each_flag_on_the_cpu(tiny_checkpoint, flags, capsys):
    training_step.main(["--checkpoint", tiny_checkpoint, "--batch", "2", "--length", "8", "--repeats", "1",
                        "--threads", "1", *flags])
    out = capsys.readouterr().out
    header = out.splitlines()[0]
    assert "d_model 32, 4 heads, 2 layers" in header and "batch 2 x 8" in header
    dtype = flags[1] if "--dtype" in flags else "float32"
    assert re.search(r"threads, (\w+)", header).group(1) == dtype and ("autocast" in header) == (dtype != "float32")
    assert ("compiled (aot_eager)" in header) == ("--compile" in flags)
    rows = re.findall(r"^  (.+?)\s+([\d.]+) ms/step\s+\d+ tokens/s\s+([\d.]+)x GPT-2\s+([\d.]+)x minimal GPT$", out, re.M)
    assert [row[0] for row in rows] == MODELS
    assert float(rows[0][2]) == 1.0 and float(rows[4][3]) == 1.0  # each reference against itself
    seconds = {name: float(ms) for name, ms, _, _ in rows}
    cost = float(re.search(r"^position encoding's cost: a rope step takes ([\d.]+)x the learned-position step", out,
                           re.M).group(1))
    assert cost == pytest.approx(seconds[MODELS[2]] / seconds[MODELS[3]], abs=0.01 + 0.01 * cost)
    assert ("Self CPU" in out) == ("--profile" in flags)
    if "--profile" in flags:  # 3 steps of ours, the minimal GPT and GPT-2, by kind: the kinds add up to the total
        table = out[out.index("where 3 eager steps spend their time"):out.index("operators where ours spends")]
        assert re.search(r"^  kind\s+ours\s+minimal GPT\s+GPT2LMHeadModel$", table, re.M)
        rows = {kind: [float(x) for x in values.split()]
                for kind, values in re.findall(r"^  (\D+?)\s+([\d.]+\s+[\d.]+\s+[\d.]+)$", table, re.M)}
        assert len(rows) == len(training_step.TIME_KINDS) + 2 and min(rows["matrix products"]) > 0
        for column in range(3):
            parts = sum(values[column] for kind, values in rows.items() if kind != "total")
            assert rows["total"][column] == pytest.approx(parts, abs=0.1 * len(rows))


def test_every_operator_of_a_step_is_charged_to_one_time_kind():
    assert training_step.time_kind("aten::addmm") == "matrix products"
    assert training_step.time_kind("aten::_scaled_dot_product_flash_attention_for_cpu") == "attention (SDPA)"
    assert training_step.time_kind("aten::_log_softmax_backward_data") == "softmax and loss"
    assert training_step.time_kind("aten::native_layer_norm_backward") == "norms (fused)"
    assert training_step.time_kind("aten::_to_copy") == "copies and casts"
    assert training_step.time_kind("aten::_fused_adamw_") == "optimizer (fused AdamW)"
    assert training_step.time_kind("aten::gelu_backward") == training_step.ELEMENT_WISE
    times = {"aten::mm": 2.0, "aten::addmm": 1.0, "aten::add": 0.5, "aten::copy_": 0.25}
    kinds = training_step.time_by_kind(times)
    assert kinds["matrix products"] == 3.0 and kinds[training_step.ELEMENT_WISE] == 0.5
    assert sum(kinds.values()) == sum(times.values()) and len(kinds) == len(training_step.TIME_KINDS) + 1


def test_training_step_races_the_llama_block_against_llama(tiny_checkpoint, capsys):
    """--llama adds LlamaForCausalLM and ours holding its weights, and the line comparing the two."""
    training_step.main(["--checkpoint", tiny_checkpoint, "--batch", "2", "--length", "8", "--repeats", "1",
                        "--threads", "1", "--llama"])
    out = capsys.readouterr().out
    rows = dict(re.findall(r"^  (.+?)\s+([\d.]+) ms/step", out, re.M))
    assert list(rows) == MODELS + ["LlamaForCausalLM", "ScratchTransformer (Llama's weights)"]
    ratio = float(re.search(r"^Llama block \(RMSNorm, SwiGLU, GQA\): ours with LlamaForCausalLM's weights runs "
                            r"([\d.]+)x LlamaForCausalLM's speed$", out, re.M).group(1))
    expected = float(rows["LlamaForCausalLM"]) / float(rows["ScratchTransformer (Llama's weights)"])
    assert ratio == pytest.approx(expected, abs=0.01 + 0.01 * ratio)


def test_training_step_counts_operators(tiny_checkpoint, capsys):
    training_step.main(["--checkpoint", tiny_checkpoint, "--batch", "2", "--length", "8", "--threads", "1", "--count-ops"])
    out = capsys.readouterr().out
    totals = dict((name.strip(), [float(n) for n in numbers.split()]) for name, numbers in re.findall(
        r"^(GPT2LMHeadModel|ScratchTransformer \(.+?\)|minimal GPT \(.+?\))\s+(\d+\s+\d+\s+\d+\s+\d+\s+[\d.]+\s+\d+\s+\d+\s+[\d.]+)$",
        out, re.M))
    assert list(totals) == MODELS
    for forward, backward, optimizer, total, per_layer, computing, calls, copied_mb in totals.values():
        assert forward + backward + optimizer == total and forward > 0 and backward > 0
        assert 0 < computing < total < calls  # views left out; nested calls counted in
        assert copied_mb > 0  # at least the loss's seed and the dropout masks' fills
    assert "ms/step" not in out and "sites of minimal GPT" in out


@pytest.mark.parametrize("flags", [[], ["--dtype", "bfloat16"], ["--compile", "--compile-backend", "eager"]])
@pytest.mark.usefixtures("fresh_compiler")  # --compile: tests/conftest.py
def test_generation_runs_each_flag_on_the_cpu(tiny_checkpoint, flags, capsys):
    generation.main(["--checkpoint", tiny_checkpoint, "--new-tokens", "3", "--repeats", "1", "--threads", "1", *flags])
    out = capsys.readouterr().out
    assert (", bfloat16," in out.splitlines()[0]) == ("bfloat16" in flags)
    titles = re.findall(r"^(\S.*?)  \[load average", out, re.M)
    cache = "static cache compiled by generate (eager)" if "--compile" in flags else "dynamic cache"
    assert titles == [f"greedy, batch 1, {cache}", f"greedy, batch 8, left-padded prompts of 4..32 tokens, {cache}",
                      "the decode step's forward pass alone (no generate), batch 1, dynamic cache, eager"]
    assert len(re.findall(r"tokens/s", out)) == 2 + 2 + 6


def test_a_view_is_told_from_a_reshape_that_copies():
    x = torch.ones(4, 3)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        x.reshape(12)
        x.t().reshape(12)  # a transposed tensor cannot be flattened in place: reshape clones
        x.relu()
    issued = [e for e in prof.events() if e.name.startswith("aten::")
              and not (e.cpu_parent is not None and e.cpu_parent.name.startswith("aten::"))]
    assert [(e.name, is_view(e)) for e in issued] == [("aten::reshape", True), ("aten::t", True),
                                                      ("aten::reshape", False), ("aten::relu", False)]


def test_count_issued_counts_the_ops_python_issues_not_the_ones_they_call():
    x = torch.ones(4, 3)
    weight = torch.ones(2, 3)
    issued = count_issued(lambda: F.linear(x, weight).relu() + 1)
    assert issued == {"aten::linear": 1, "aten::relu": 1, "aten::add": 1}  # linear's own t and mm are nested


def test_generation_counts_the_operators_of_one_decode_step(tiny_checkpoint, capsys):
    generation.main(["--checkpoint", tiny_checkpoint, "--threads", "1", "--count-ops"])
    out = capsys.readouterr().out
    rows = dict(re.findall(r"^  (\S.*?)\s+(\d+)   \(", out, re.M))
    assert list(rows) == ["GPT2LMHeadModel", "ScratchTransformer", "ScratchTransformer (rope, as shipped)"]
    ops = {name: int(n) for name, n in rows.items()}
    # per layer (2 here): one stacked Q/K/V product, out, two feed-forward products; and the head
    assert re.search(r"ScratchTransformer\s+\d+\s+\(linear 9,", out)
    assert ops["ScratchTransformer"] < ops["GPT2LMHeadModel"] and ops["ScratchTransformer"] < ops["ScratchTransformer (rope, as shipped)"]
    assert "tokens/s" not in out


def test_benchmarks_refuse_cuda_where_there_is_none(tiny_checkpoint, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for main in (training_step.main, generation.main):
        with pytest.raises(SystemExit, match="--device cuda: no CUDA device is visible"):
            main(["--checkpoint", tiny_checkpoint, "--device", "cuda"])


def test_the_app_benchmarks_training_job_is_the_tabs_default_job():
    """benchmarks.app_latency submits /train_live with every input the endpoint takes (it broke when the preset
    became the last), and they are the defaults: the job the tab runs with nothing changed."""
    import inspect

    from benchmarks.app_latency import default_job
    from explorer.learning.live_settings import DEFAULT, check_settings
    from ui.tabs.train_live import CHOICES, train_live

    inputs = default_job()
    assert list(inspect.signature(train_live).parameters)[:len(inputs)] == list(CHOICES)
    assert check_settings(**dict(zip(CHOICES, inputs))) == DEFAULT
