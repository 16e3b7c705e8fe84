"""Generation speed: our ScratchTransformerForCausalLM against transformers' GPT2LMHeadModel holding the same weights
(converted with modeling.convert.causal_lm_from_gpt2), at the dimensions of the shipped ``shakespeare-main``
(read from its config.json; GPT-2 gets a learned position table long enough for prompt + new tokens).

    python -m benchmarks.generation                       # all measures below, CPU, 256 new tokens, best of 3
    python -m benchmarks.generation --only greedy --repeats 5
    python -m benchmarks.generation --device cuda --dtype bfloat16 --compile
    python -m benchmarks.generation --count-ops           # operators one decode step issues, no timing
    python -m benchmarks.generation --size gpt2-small --threads 1 --only greedy forward --new-tokens 64

Measures (tokens/s, greedy, eos off so every run makes exactly --new-tokens tokens):
- greedy: batch 1, a 16-token prompt, dynamic cache, both models eager; with --compile both models decode through
  the static cache with the step compiled by generate (torch.compile, fullgraph);
- batched: 8 left-padded prompts of 4..32 tokens, the cache as for greedy;
- forward: the decode step alone, without generate (a 16-token prefill, then each step one token through the
  cache), so the model's own cost is told apart from generate's per-step bookkeeping; with it, the same step
  written as bare torch functions (``functional_decode``), the floor any eager implementation of these weights
  stands on, with Q, K and V in one product as the model projects them, and apart. Always eager.
--count-ops counts the aten operators one decode step of each model issues (one token through the cache after a
16-token prompt, eager; ``benchmarks.op_count.count_issued``) instead of timing.
--dtype casts both models' weights (after checking in float32 that they generate the same tokens). Each figure is
the best of --repeats runs after a warm-up, the models alternating so that neither gets a quieter machine; on CUDA
each run is timed between two synchronisations; the load average is printed with it (timings on a shared machine are
noisy: compare ratios from one run).
"""

import argparse
import os
import time

import torch
import torch.nn.functional as F
from transformers import CompileConfig, DynamicCache

from benchmarks.device import DTYPES, add_device_arguments, describe, device_from, synchronize
from benchmarks.gpt2_reference import SHIPPED_MAIN, SIZES, gpt2_like, sized_config
from modeling import ScratchTransformerForCausalLM
from modeling.convert import causal_lm_from_gpt2
from modeling.modeling_scratch_transformer import ACTIVATION_FUNCTIONS

MEASURES = ("greedy", "batched", "forward")


def prompts(batch: int, lengths: list[int], vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded random prompts (pad id 0) and their attention mask."""
    generator = torch.Generator().manual_seed(0)
    ids = torch.zeros(batch, max(lengths), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, length in enumerate(lengths):
        ids[row, -length:] = torch.randint(1, vocab_size, (length,), generator=generator)
        mask[row, -length:] = 1
    return ids, mask


def tokens_per_second(model, ids, mask, new_tokens: int, **kwargs) -> float:
    synchronize(ids.device)
    start = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=mask, max_new_tokens=new_tokens, do_sample=False, eos_token_id=None,
                             pad_token_id=0, **kwargs)
    synchronize(ids.device)
    elapsed = time.perf_counter() - start
    if out.shape[1] != ids.shape[1] + new_tokens:
        raise RuntimeError(f"expected {new_tokens} new tokens, got {out.shape[1] - ids.shape[1]}")
    return ids.shape[0] * new_tokens / elapsed


def decode_steps_per_second(model, ids, new_tokens: int) -> float:
    """Decode steps per second of the forward pass alone: prefill, then one greedy token at a time through the cache."""
    with torch.inference_mode():
        cache = DynamicCache(config=model.config)
        token = model(ids, past_key_values=cache, use_cache=True).logits[:, -1:].argmax(-1)
        synchronize(ids.device)
        start = time.perf_counter()
        for _ in range(new_tokens):
            token = model(token, past_key_values=cache, use_cache=True).logits[:, -1:].argmax(-1)
        synchronize(ids.device)
        return new_tokens / (time.perf_counter() - start)


def functional_decode(model, fused_qkv: bool = True):
    """The least eager PyTorch does for one decode step with ``model``'s weights (a GPT-2-shaped model: learned
    positions, pre-norm, final LayerNorm, GELU, tied head): the same arithmetic as torch functions on plain
    tensors, Q, K and V in one product, no modules, no cache object, no output classes. What is left is the
    matrix products and about 75 tensor operations a step: a floor for any eager implementation of this model.
    ``fused_qkv=False`` projects Q, K and V apart (three products): the two floors' gap is what fusing them buys.
    Returns step(token (1, 1), position, cache list) -> logits (1, 1, vocab)."""
    c = model.config
    if (c.position_encoding, c.norm_first, c.final_layer_norm, c.scale_embeddings, c.feed_forward) != (
            "learned", True, True, False, "mlp"):
        raise ValueError("the functional floor is written for a GPT-2-shaped model (see causal_lm_from_gpt2)")
    d, h = c.d_model, c.n_heads
    decoder = model.model.decoder
    token_table, position_table = decoder.embed.token.weight, decoder.embed.position.weight
    act = ACTIVATION_FUNCTIONS[c.activation]
    layers = [(layer.self_attn_norm.norm, layer.self_attn.qkv_proj.weight, layer.self_attn.qkv_proj.bias,
               layer.self_attn.out_proj, layer.feed_forward_norm.norm, layer.feed_forward.linear1,
               layer.feed_forward.linear2) for layer in decoder.stack.layers]
    final = decoder.stack.norm

    def step(token: torch.Tensor, position: int, cache: list) -> torch.Tensor:
        x = F.embedding(token, token_table) + position_table[position]
        for i, (norm1, qkv_w, qkv_b, out, norm2, up, down) in enumerate(layers):
            normed = F.layer_norm(x, (d,), norm1.weight, norm1.bias, norm1.eps)
            if fused_qkv:
                q, k, v = F.linear(normed, qkv_w, qkv_b).view(1, 1, 3, h, d // h).transpose(1, 3).unbind(2)
            else:
                q, k, v = (F.linear(normed, w, b).view(1, 1, h, d // h).transpose(1, 2)
                           for w, b in zip(qkv_w.chunk(3), qkv_b.chunk(3)))
            k, v = torch.cat((cache[i][0], k), 2), torch.cat((cache[i][1], v), 2)
            cache[i] = (k, v)
            heads = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(1, 1, d)
            x = x + F.linear(heads, out.weight, out.bias)
            hidden = act(F.linear(F.layer_norm(x, (d,), norm2.weight, norm2.bias, norm2.eps), up.weight, up.bias))
            x = x + F.linear(hidden, down.weight, down.bias)
        return F.linear(F.layer_norm(x, (d,), final.weight, final.bias, final.eps), token_table)
    return step


def check_functional_floor(model, ids, steps: int = 8, fused_qkv: bool = True) -> None:
    """Raise unless ``functional_decode``'s logits equal the model's (within 1e-4) on ``steps`` greedy decode steps
    after the prefill ``ids``. Run it on float32 weights: in bfloat16 the two summation orders round apart."""
    step, n_layers = functional_decode(model, fused_qkv), model.config.n_layers
    with torch.inference_mode():
        cache = DynamicCache(config=model.config)
        token = model(ids, past_key_values=cache, use_cache=True).logits[:, -1:].argmax(-1)
        mine = [(cache.layers[i].keys, cache.layers[i].values) for i in range(n_layers)]
        for position in range(ids.shape[1], ids.shape[1] + steps):
            expected, got = model(token, past_key_values=cache, use_cache=True).logits, step(token, position, mine)
            if not torch.allclose(got, expected, atol=1e-4, rtol=0):
                raise RuntimeError(f"the functional floor differs from the model by {(got - expected).abs().max():.2e}")
            token = expected[:, -1:].argmax(-1)


def functional_steps_per_second(model, ids, new_tokens: int, fused_qkv: bool = True) -> float:
    """``decode_steps_per_second`` for ``functional_decode`` (the model's own prefill fills the cache it reads)."""
    step, n_layers = functional_decode(model, fused_qkv), model.config.n_layers
    with torch.inference_mode():
        cache = DynamicCache(config=model.config)
        token = model(ids, past_key_values=cache, use_cache=True).logits[:, -1:].argmax(-1)
        mine = [(cache.layers[i].keys, cache.layers[i].values) for i in range(n_layers)]
        synchronize(ids.device)
        start = time.perf_counter()
        for position in range(ids.shape[1], ids.shape[1] + new_tokens):
            token = step(token, position, mine)[:, -1:].argmax(-1)
        synchronize(ids.device)
        return new_tokens / (time.perf_counter() - start)


def matrix_products(model, stored_as: str = "(out, in)", seed: int = 0):
    """The step's matrix products alone: every linear layer and the head of ``model``, each on one token (a fixed
    random input per width). Returns a function that computes them all and returns their outputs, in
    ``model.modules()`` order: the arithmetic every implementation of these weights must do, nothing around it.

    ``stored_as``: "(out, in)" is how ``nn.Linear`` keeps W, multiplied as x W^T + b (what our model does);
    "(in, out)" keeps each weight transposed and contiguous, multiplied as x W + b (what GPT-2's Conv1D does). Same
    numbers, same bytes, another order in memory: a one-token step reads every weight once, so the order can
    decide how fast the CPU's matrix-vector kernel streams them."""
    if stored_as not in ("(out, in)", "(in, out)"):
        raise ValueError(f'stored_as must be "(out, in)" or "(in, out)"; got {stored_as!r}')
    generator = torch.Generator().manual_seed(seed)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    weight = linears[0].weight
    inputs = {width: torch.randn(1, width, generator=generator).to(weight.device, weight.dtype)
              for width in sorted({m.in_features for m in linears})}
    if stored_as == "(out, in)":
        products = [(inputs[m.in_features], m.weight.detach(), m.bias) for m in linears]
        return lambda: [F.linear(x, weight, bias) for x, weight, bias in products]
    products = [(inputs[m.in_features], m.weight.detach().t().contiguous(), m.bias) for m in linears]
    return lambda: [x @ weight if bias is None else torch.addmm(bias, x, weight) for x, weight, bias in products]


def matrix_products_per_second(model, new_tokens: int, stored_as: str = "(out, in)") -> float:
    """Decode steps per second of ``matrix_products`` (weights ``stored_as``)."""
    step = matrix_products(model, stored_as)
    device = next(model.parameters()).device
    with torch.inference_mode():
        synchronize(device)
        start = time.perf_counter()
        for _ in range(new_tokens):
            step()
        synchronize(device)
        return new_tokens / (time.perf_counter() - start)


def best_of(runs: dict, repeats: int) -> dict[str, float]:
    """{name: a function that times one run and returns its rate} -> {name: best rate}, one warm-up each, the
    models alternating so that neither gets a quieter machine."""
    for run in runs.values():
        run()
    best = dict.fromkeys(runs, 0.0)
    for _ in range(repeats):
        for name, run in runs.items():
            best[name] = max(best[name], run())
    return best


def generation_runs(runs: dict, ids, mask, new_tokens: int) -> dict:
    """{name: (model, generate kwargs)} -> {name: a function timing one generate call}."""
    return {name: (lambda m=model, k=kwargs: tokens_per_second(m, ids, mask, new_tokens, **k))
            for name, (model, kwargs) in runs.items()}


def report(title: str, best: dict[str, float], reference: str = "GPT2LMHeadModel") -> None:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{title}  [load average {load}]")
    for name, speed in best.items():
        ratio = "" if name == reference else f"   {speed / best[reference]:.2f}x GPT-2"
        print(f"  {name:<44} {speed:9.1f} tokens/s{ratio}")


def decode_step(model, ids):
    """A function that decodes one greedy token through ``model``'s cache (prefilled with ``ids``) per call."""
    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        token = [model(ids, past_key_values=cache, use_cache=True).logits[:, -1:].argmax(-1)]

    def step():
        with torch.inference_mode():
            token[0] = model(token[0], past_key_values=cache, use_cache=True).logits[:, -1:].argmax(-1)
    return step


def report_decode_ops(models: dict, ids, top: int = 8) -> None:
    """Print the aten operators one decode step of each model issues, in all and the most frequent kinds."""
    from benchmarks.op_count import count_issued

    counts = {name: count_issued(decode_step(model, ids)) for name, model in models.items()}
    print(f"issued aten ops in one decode step (1 token through the cache after {ids.shape[1]}, eager)")
    for name, count in counts.items():
        kinds = ", ".join(f"{op.removeprefix('aten::')} {n}" for op, n in count.most_common(top))
        print(f"  {name:<44} {sum(count.values()):5d}   ({kinds})")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=str(SHIPPED_MAIN), help="a folder whose config.json gives the sizes")
    parser.add_argument("--size", choices=SIZES, default="shipped", help="the checkpoint's sizes, or GPT-2 small's")
    parser.add_argument("--only", choices=MEASURES, nargs="*", default=list(MEASURES))
    add_device_arguments(parser, dtype_help="the weights' dtype (both models)")
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--count-ops", action="store_true")
    args = parser.parse_args(argv)
    for name in ("new_tokens", "repeats", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer, got {getattr(args, name)}")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    device, dtype = device_from(args.device), DTYPES[args.dtype]
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    torch.manual_seed(0)

    config = sized_config(args.size, args.checkpoint)
    gpt2 = gpt2_like(config, positions=32 + args.new_tokens).eval()
    ours = causal_lm_from_gpt2(gpt2).eval()
    gpt2, ours = gpt2.to(device), ours.to(device)
    params = sum(p.numel() for p in ours.parameters()) / 1e6
    cache = f"static cache compiled by generate ({args.compile_backend})" if args.compile else "dynamic cache"
    name = args.size if args.size != "shipped" else os.path.basename(os.path.normpath(args.checkpoint))
    print(f"{name} dimensions: d_model {config.d_model}, "
          f"{config.n_heads} heads, {config.n_layers} layers, d_ff {config.d_ff}, vocab {config.vocab_size} "
          f"({params:.2f}M parameters); {args.new_tokens} new tokens, greedy; {describe(device, args.threads)}, "
          f"{args.dtype}, best of {args.repeats}")
    ids, mask = prompts(1, [16], config.vocab_size)
    ids, mask = ids.to(device), mask.to(device)
    with torch.inference_mode():  # the same weights give the same tokens (checked in float32)
        if not torch.equal(gpt2.generate(ids, max_new_tokens=16, do_sample=False, pad_token_id=0),
                           ours.generate(ids, max_new_tokens=16, do_sample=False, pad_token_id=0)):
            raise RuntimeError("GPT-2 and the converted model generate different tokens")
    if args.count_ops:
        shipped = ScratchTransformerForCausalLM(config).eval().to(device, dtype)  # the sizes' own encoding; any weights
        report_decode_ops({"GPT2LMHeadModel": gpt2.to(dtype), "ScratchTransformer": ours.to(dtype),
                           f"ScratchTransformer ({config.position_encoding}, as shipped)": shipped}, ids)
        return
    if "forward" in args.only:
        for fused_qkv in (True, False):
            check_functional_floor(ours, ids, fused_qkv=fused_qkv)
    gpt2, ours = gpt2.to(dtype), ours.to(dtype)
    generate_kwargs = {}
    if args.compile:
        compile_config = CompileConfig(fullgraph=True, mode="default", backend=args.compile_backend)
        compile_config._compile_all_devices = True  # generate compiles on GPUs only unless told
        generate_kwargs = dict(cache_implementation="static", compile_config=compile_config)
    both = {"GPT2LMHeadModel": (gpt2, generate_kwargs), "ScratchTransformer": (ours, generate_kwargs)}

    if "greedy" in args.only:
        report(f"greedy, batch 1, {cache}", best_of(generation_runs(both, ids, mask, args.new_tokens), args.repeats))
    if "batched" in args.only:
        batch_ids, batch_mask = prompts(8, [4, 32, 9, 17, 25, 12, 6, 20], config.vocab_size)
        best = best_of(generation_runs(both, batch_ids.to(device), batch_mask.to(device), args.new_tokens), args.repeats)
        report(f"greedy, batch 8, left-padded prompts of 4..32 tokens, {cache}", best)
    if "forward" in args.only:
        runs = {name: (lambda m=model: decode_steps_per_second(m, ids, args.new_tokens))
                for name, model in (("GPT2LMHeadModel", gpt2), ("ScratchTransformer", ours))}
        runs["functional floor (no modules; fused QKV)"] = lambda: functional_steps_per_second(ours, ids, args.new_tokens)
        runs["the same, Q, K and V in three products"] = (
            lambda: functional_steps_per_second(ours, ids, args.new_tokens, fused_qkv=False))
        runs["its matrix products alone"] = lambda: matrix_products_per_second(ours, args.new_tokens)
        runs["the same, weights stored (in, out) as GPT-2's"] = (
            lambda: matrix_products_per_second(ours, args.new_tokens, stored_as="(in, out)"))
        best = best_of(runs, args.repeats)
        report("the decode step's forward pass alone (no generate), batch 1, dynamic cache, eager", best)


if __name__ == "__main__":
    main()
