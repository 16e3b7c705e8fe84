"""Training-step speed: forward, backward and AdamW on one batch, our ScratchTransformerForCausalLM against
transformers' GPT2LMHeadModel holding the same weights (modeling.convert.causal_lm_from_gpt2), at the dimensions
and dropout of the shipped ``shakespeare-main`` (read from its config.json).

    python -m benchmarks.training_step                        # batch 16 x 256, best of 3
    python -m benchmarks.training_step --batch 8 --repeats 5 --profile

Also times ours with shakespeare-main's own position encoding (its config exactly, e.g. RoPE), which GPT-2 cannot
hold. Each figure is the best of --repeats steps after a warm-up step, the models alternating; the load average is
printed with it. --profile prints where one step of ours spends its time (torch.profiler, by operator).
"""

import argparse
import os
import time

import torch

from benchmarks.gpt2_reference import SHIPPED_MAIN, gpt2_like
from modeling import ScratchTransformerConfig, ScratchTransformerForCausalLM
from modeling.convert import causal_lm_from_gpt2


class Trainer:
    """One model and its AdamW; ``step()`` runs forward, backward and the update on a fixed batch."""

    def __init__(self, model, ids: torch.Tensor):
        self.model, self.ids = model.train(), ids
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)

    def step(self) -> float:
        start = time.perf_counter()
        loss = self.model(input_ids=self.ids, labels=self.ids).loss
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=str(SHIPPED_MAIN))
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--length", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)  # denormal floats in the backward pass cost 20x on this 2-core CPU
    torch.manual_seed(0)

    config = ScratchTransformerConfig.from_pretrained(args.checkpoint)
    gpt2 = gpt2_like(config, positions=args.length)
    ours = causal_lm_from_gpt2(gpt2)
    shipped = ScratchTransformerForCausalLM(config)
    ids = torch.randint(0, config.vocab_size, (args.batch, args.length), generator=torch.Generator().manual_seed(0))
    trainers = {"GPT2LMHeadModel": Trainer(gpt2, ids), "ScratchTransformer (GPT-2's weights)": Trainer(ours, ids),
                f"ScratchTransformer ({config.position_encoding}, as shipped)": Trainer(shipped, ids)}
    for trainer in trainers.values():
        trainer.step()
    best = dict.fromkeys(trainers, float("inf"))
    for _ in range(args.repeats):
        for name, trainer in trainers.items():
            best[name] = min(best[name], trainer.step())

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{os.path.basename(args.checkpoint)} dimensions: d_model {config.d_model}, {config.n_heads} heads, "
          f"{config.n_layers} layers, d_ff {config.d_ff}, vocab {config.vocab_size}, dropout {config.dropout}; "
          f"batch {args.batch} x {args.length}, AdamW, {args.threads} threads, best of {args.repeats} "
          f"[load average {load}]")
    reference = best["GPT2LMHeadModel"]
    for name, seconds in best.items():
        ratio = "" if name == "GPT2LMHeadModel" else f"   {reference / seconds:.2f}x GPT-2"
        print(f"  {name:<40} {seconds:7.3f} s/step {args.batch * args.length / seconds:9.0f} tokens/s{ratio}")
    if args.profile:
        from torch.profiler import profile

        with profile() as prof:
            trainers["ScratchTransformer (GPT-2's weights)"].step()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20))


if __name__ == "__main__":
    main()
