"""Training-step speed: forward, backward and AdamW on one batch, at the dimensions and dropout of the shipped
``shakespeare-main`` (read from its config.json), side by side in one process:

- GPT2LMHeadModel (transformers) with random weights;
- ScratchTransformer holding GPT-2's weights (modeling.convert.causal_lm_from_gpt2): the same arithmetic;
- ScratchTransformer with shakespeare-main's config exactly (e.g. RoPE), which GPT-2 cannot hold;
- where that config's positions are not learned: the same config with learned positions, so that the last line,
  "position encoding's cost", is that encoding's price alone (the shipped config differs from GPT-2's in more
  than positions: its feed-forward dropout, the exact GELU);
- the minimal GPT of benchmarks/minimal_gpt.py, the floor;
- with --llama, today's block at the same sizes: transformers' LlamaForCausalLM (RMSNorm, SwiGLU with d_ff hidden
  units, grouped-query attention with n_heads / 4 key/value heads, no biases, untied head, no dropout) with random
  weights, and ScratchTransformer holding its weights (modeling.convert.causal_lm_from_llama).

    python -m benchmarks.training_step                                  # CPU, float32, batch 16 x 256, best of 3
    python -m benchmarks.training_step --device cuda --dtype bfloat16 --compile --batch 64
    python -m benchmarks.training_step --count-ops                      # operators issued per step, no timing
    python -m benchmarks.training_step --llama                          # also the Llama block against Llama's
    python -m benchmarks.training_step --size gpt2-small --device cuda --dtype bfloat16 --batch 8 --length 1024
    python -m benchmarks.training_step --size llama-small --device cuda --dtype bfloat16 --batch 8 --length 1024
    python -m benchmarks.training_step --size gpt2-small --device cuda --dtype bfloat16 --batch 8 --length 1024 \
        --repeats 10 --profile                                          # and where 3 steps of each spend their time

--size gpt2-small races GPT2LMHeadModel, ours with its weights and the minimal GPT at GPT-2 small's sizes (124M
parameters, no dropout); --size llama-small races LlamaForCausalLM and ours with its weights (and the minimal GPT) at
the same sizes with the Llama block (12 x 768, 3 key/value heads).

--dtype bfloat16 or float16 runs the forward pass under autocast (float16 with a gradient scaler); the weights and
AdamW stay float32. AdamW is the fused one. --compile compiles each model (torch.compile) before the warm-up step.
Each figure is the best of --repeats steps after a warm-up step, the models alternating; on CUDA each step is timed
between two synchronisations. --profile prints where 3 steps of ours, the minimal GPT and the peer
spend their time (torch.profiler: by kind side by side, then ours by operator);
--count-ops counts the operators of one eager step of each model instead of timing (benchmarks/op_count.py; autocast
as --dtype says, no gradient scaler; --compile does not apply).
"""

import argparse
import contextlib
import os
import time

import torch

from benchmarks.device import DTYPES, add_device_arguments, describe, device_from, synchronize
from benchmarks.gpt2_reference import SHIPPED_MAIN, SIZES, gpt2_like, sized_config
from benchmarks.minimal_gpt import MinimalGPT, MinimalGPTConfig
from modeling import ScratchTransformerConfig, ScratchTransformerForCausalLM
from modeling.convert import causal_lm_from_gpt2, causal_lm_from_llama

OURS = "ScratchTransformer (GPT-2's weights)"
LEARNED_AS_SHIPPED = "ScratchTransformer (learned, else as shipped)"
MINIMAL = "minimal GPT (benchmarks/minimal_gpt.py)"
LLAMA, OURS_LLAMA = "LlamaForCausalLM", "ScratchTransformer (Llama's weights)"


class Trainer:
    """One model, its fused AdamW and its batch; ``step()`` runs forward (under autocast for bfloat16/float16),
    backward and the update, and returns the seconds it took."""

    def __init__(self, model, ids: torch.Tensor, dtype: torch.dtype = torch.float32, compile_backend: str | None = None):
        self.model, self.ids, self.dtype = model.train(), ids, dtype
        self.device = ids.device
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=dtype == torch.float16)
        self.minimal = isinstance(model, MinimalGPT)
        self.forward = torch.compile(model, backend=compile_backend) if compile_backend else model

    def loss(self) -> torch.Tensor:
        autocast = (torch.autocast(self.device.type, dtype=self.dtype) if self.dtype != torch.float32
                    else contextlib.nullcontext())
        with autocast:
            if self.minimal:
                return self.forward(self.ids, self.ids)[1]
            return self.forward(input_ids=self.ids, labels=self.ids).loss

    def step(self) -> float:
        synchronize(self.device)
        start = time.perf_counter()
        self.scaler.scale(self.loss()).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        synchronize(self.device)
        return time.perf_counter() - start


def llama_like(config: ScratchTransformerConfig, positions: int):
    """A randomly initialised LlamaForCausalLM with ``config``'s sizes: d_ff SwiGLU units, n_heads / 4 key/value heads
    (at least 1), RoPE with ``config.rope_theta``, no biases, untied head, no dropout."""
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(LlamaConfig(
        vocab_size=config.vocab_size, hidden_size=config.d_model, intermediate_size=config.d_ff,
        num_hidden_layers=config.n_layers, num_attention_heads=config.n_heads,
        num_key_value_heads=max(1, config.n_heads // 4), max_position_embeddings=positions,
        rms_norm_eps=config.layer_norm_eps, rope_parameters={"rope_type": "default", "rope_theta": config.rope_theta},
        bos_token_id=0, eos_token_id=0,
    ))


def build_models(config: ScratchTransformerConfig, length: int, llama: bool = False, size: str = "shipped") -> dict:
    """{name: model} at ``config``'s sizes: GPT-2, ours with its weights, ours as configured, ours as configured but
    with learned positions (unless they are already), the minimal GPT; with ``llama``, Llama and ours with its
    weights. At GPT-2 small's sizes ("gpt2-small") GPT-2, ours with its weights and the minimal GPT alone; at
    "llama-small" Llama, ours with its weights and the minimal GPT."""
    models = {}
    if size != "llama-small":
        gpt2 = gpt2_like(config, positions=length)
        models = {"GPT2LMHeadModel": gpt2, OURS: causal_lm_from_gpt2(gpt2)}
    if size == "shipped":
        models[as_shipped(config)] = ScratchTransformerForCausalLM(config)
        if config.position_encoding != "learned":
            learned = ScratchTransformerConfig.from_dict({**config.to_dict(), "position_encoding": "learned",
                                                          "max_position_embeddings": max(length, config.max_position_embeddings)})
            models[LEARNED_AS_SHIPPED] = ScratchTransformerForCausalLM(learned)
    models[MINIMAL] = MinimalGPT(MinimalGPTConfig.like(config, context=length))
    if llama or size == "llama-small":
        models[LLAMA] = llama_like(config, positions=length)
        models[OURS_LLAMA] = causal_lm_from_llama(models[LLAMA])
    return models


def as_shipped(config: ScratchTransformerConfig) -> str:
    return f"ScratchTransformer ({config.position_encoding}, as shipped)"


PROFILED_STEPS = 3
# where a step's time goes: (kind, substrings of the aten operators charged to it); the first kind that matches wins,
# and an operator no kind names is element-wise (additions, GELU, dropout, the norms' pieces in RMSNorm, ...)
TIME_KINDS = (
    ("matrix products", ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")),
    ("attention (SDPA)", ("attention",)),
    ("softmax and loss", ("softmax", "nll_loss")),
    ("norms (fused)", ("layer_norm", "rms_norm")),
    ("copies and casts", ("aten::copy_", "aten::_to_copy", "aten::clone", "aten::cat", "aten::stack", "aten::fill_",
                          "aten::zero_")),
    ("embedding lookups", ("embedding",)),
    ("optimizer (fused AdamW)", ("_fused_adam",)),
)
ELEMENT_WISE = "element-wise and other"


def time_kind(op: str) -> str:
    """The ``TIME_KINDS`` entry an aten operator's own time is charged to, else ``ELEMENT_WISE``."""
    return next((kind for kind, parts in TIME_KINDS if any(part in op for part in parts)), ELEMENT_WISE)


def profile_steps(trainer: Trainer, steps: int = PROFILED_STEPS):
    """torch.profiler over ``steps`` eager steps of ``trainer`` (the device's kernels on CUDA)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if trainer.device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(steps):
            trainer.step()
    return prof


def own_times(prof, device: torch.device) -> dict[str, float]:
    """{aten operator: milliseconds of its own time} in a profile (CUDA kernels' on a GPU, the CPU's on the CPU); only
    ``aten::`` operators, so a CPU profile's own ranges are not counted twice."""
    own = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    return {a.key: getattr(a, own) / 1e3 for a in prof.key_averages() if a.key.startswith("aten::")}


def time_by_kind(times: dict[str, float]) -> dict[str, float]:
    """{kind: milliseconds}: ``own_times`` charged by ``time_kind``, every kind listed."""
    kinds = dict.fromkeys([kind for kind, _ in TIME_KINDS] + [ELEMENT_WISE], 0.0)
    for op, ms in times.items():
        kinds[time_kind(op)] += ms
    return kinds


SHORT_NAMES = {OURS: "ours", OURS_LLAMA: "ours (Llama)", MINIMAL: "minimal GPT"}


def print_profiles(profiles: dict, device: torch.device, mode: str, rows: int = 20) -> None:
    """Each profiled model's time by kind side by side; the operators where the first (ours) spends the most more
    than the second (the minimal GPT); the operators the first spends most on. ``mode``: eager or compiled."""
    clock = "CUDA kernels'" if device.type == "cuda" else "the CPU's"
    times = {SHORT_NAMES.get(name, name): own_times(prof, device) for name, prof in profiles.items()}
    kinds = {name: time_by_kind(t) for name, t in times.items()}
    print(f"\nwhere {PROFILED_STEPS} {mode} steps spend their time: {clock} own time per aten operator, by kind, ms")
    print(f"  {'kind':<26}" + "".join(f"{name:>18}" for name in kinds))
    for kind in next(iter(kinds.values())):
        print(f"  {kind:<26}" + "".join(f"{k[kind]:>18.1f}" for k in kinds.values()))
    print(f"  {'total':<26}" + "".join(f"{sum(k.values()):>18.1f}" for k in kinds.values()))
    (ours, mine), (floor, theirs) = list(times.items())[:2]
    print(f"\noperators where {ours} spends the most more than the {floor}, ms over {PROFILED_STEPS} steps")
    gaps = sorted(set(mine) | set(theirs), key=lambda op: theirs.get(op, 0) - mine.get(op, 0))[:8]
    for op in gaps:
        print(f"  {op[:60]:<62} {mine.get(op, 0):9.1f} {theirs.get(op, 0):9.1f}  {mine.get(op, 0) - theirs.get(op, 0):+9.1f}")
    first, prof = next(iter(profiles.items()))
    print(f"\n{first}, by operator:")
    sort = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(prof.key_averages().table(sort_by=sort, row_limit=rows))


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=str(SHIPPED_MAIN), help="a folder whose config.json gives the sizes")
    parser.add_argument("--size", choices=(*SIZES, "llama-small"), default="shipped",
                        help="the checkpoint's sizes, GPT-2 small's, or GPT-2 small's with the Llama block")
    add_device_arguments(parser, dtype_help="bfloat16 and float16 as autocast; the weights stay float32")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--count-ops", action="store_true")
    parser.add_argument("--llama", action="store_true", help="also LlamaForCausalLM and ours holding its weights")
    args = parser.parse_args(argv)
    for name in ("batch", "length", "repeats", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be a positive integer, got {getattr(args, name)}")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    device, dtype = device_from(args.device), DTYPES[args.dtype]
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)  # denormal floats in the backward pass cost 20x on the CPU
    torch.manual_seed(0)

    config = sized_config("gpt2-small" if args.size == "llama-small" else args.size, args.checkpoint)
    if args.length > config.max_position_embeddings and config.position_encoding == "learned":
        raise SystemExit(f"--length {args.length} is past the learned table's {config.max_position_embeddings} rows")
    models = build_models(config, args.length, llama=args.llama, size=args.size)
    ids = torch.randint(0, config.vocab_size, (args.batch, args.length), generator=torch.Generator().manual_seed(0))
    ids = ids.to(device)
    mode = "eager" if args.count_ops or not args.compile else f"compiled ({args.compile_backend})"
    name = args.size if args.size != "shipped" else os.path.basename(os.path.normpath(args.checkpoint))
    print(f"{name} dimensions: d_model {config.d_model}, "
          f"{config.n_heads} heads, {config.n_layers} layers, d_ff {config.d_ff}, vocab {config.vocab_size}, "
          f"dropout {config.dropout}; batch {args.batch} x {args.length}, fused AdamW; {describe(device, args.threads)}, "
          f"{args.dtype}{' autocast' if dtype != torch.float32 else ''}, {mode}")

    if args.count_ops:
        from benchmarks.op_count import count_step, report

        counts = {}
        for name, model in models.items():
            trainer = Trainer(model.to(device), ids, dtype)
            counts[name] = count_step(trainer.model, trainer.loss, trainer.optimizer)
        report(counts, config.n_layers, lead=OURS if OURS in counts else OURS_LLAMA)
        return

    backend = args.compile_backend if args.compile else None
    trainers = {name: Trainer(model.to(device), ids, dtype, backend) for name, model in models.items()}
    for trainer in trainers.values():
        trainer.step()
    best = dict.fromkeys(trainers, float("inf"))
    for _ in range(args.repeats):
        for name, trainer in trainers.items():
            best[name] = min(best[name], trainer.step())

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"best of {args.repeats} steps after a warm-up [load average {load}]")
    peer, label = ("GPT2LMHeadModel", "GPT-2") if "GPT2LMHeadModel" in best else (LLAMA, "Llama")
    for name, seconds in best.items():
        print(f"  {name:<46} {seconds * 1e3:9.2f} ms/step {args.batch * args.length / seconds:10.0f} tokens/s"
              f"   {best[peer] / seconds:5.2f}x {label}  {best[MINIMAL] / seconds:5.2f}x minimal GPT")
    if LEARNED_AS_SHIPPED in best:
        print(f"position encoding's cost: a {config.position_encoding} step takes "
              f"{best[as_shipped(config)] / best[LEARNED_AS_SHIPPED]:.2f}x the learned-position step, all else as shipped")
    if LLAMA in best:
        print(f"Llama block (RMSNorm, SwiGLU, GQA): ours with LlamaForCausalLM's weights runs "
              f"{best[LLAMA] / best[OURS_LLAMA]:.2f}x LlamaForCausalLM's speed")
    if args.profile:
        profiled = [OURS if OURS in trainers else OURS_LLAMA, MINIMAL, peer]
        print_profiles({name: profile_steps(trainers[name]) for name in profiled}, device, mode)


if __name__ == "__main__":
    main()
