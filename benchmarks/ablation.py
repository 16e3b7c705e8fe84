"""How long Head ablation's "Rank every head" takes, exact and estimated, on a GPT-2-small-size model.

    python -m benchmarks.ablation --tokens 64            # one torch thread per worker, as the app runs it
    python -m benchmarks.ablation --size smollm-135m     # a Llama of SmolLM-135M's size: 30 layers of 9 heads

The model: a random GPT-2 small, or another of ``benchmarks.measuring.REAL_SIZES``; the text: the patching benchmark's passage cut to
--tokens tokens. Prints one JSON line: one forward pass of the text (seconds), the exact ranking
(``explorer.views.ablation.rank_heads``: every head removed alone) and its first-order estimate
(``explorer.views.ablation_estimate.estimate_head_ranking``), each as median wall seconds of --repeat runs after a
warm-up, as a multiple of that forward pass, and the resident memory the call added; and how the estimate agrees
with the exact ranking.
"""

import argparse
import json
import os

import torch

from benchmarks import measuring
from benchmarks.patching import text_of_length
from explorer.core import machine
from explorer.core.machine import CORES
from explorer.views.ablation import rank_heads
from explorer.views.ablation_estimate import estimate_head_ranking
from explorer.views.first_order import agreement


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(measuring.REAL_SIZES), default="gpt2-small")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--workers", type=int, default=CORES)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    machine.give_memory_back()  # as app.py does at launch
    model, tokenizer = measuring.real_size(args.size)
    text = text_of_length(tokenizer, args.tokens)
    forward = measuring.forward_seconds(model, tokenizer(text, return_tensors="pt").input_ids)
    result = {"model": f"{args.size}-random", "tokens": args.tokens, "threads": args.threads, "workers": args.workers,
              "cpus": os.cpu_count(), "forward_seconds": round(forward, 4)}
    exact = measuring.timed(lambda: rank_heads(model, tokenizer, text, workers=args.workers), args.repeat)
    estimate = measuring.timed(lambda: estimate_head_ranking(model, tokenizer, text), args.repeat)
    for key, figures in (("rank_heads", exact), ("estimate", estimate)):
        result[key] = {**figures, "forward_passes": round(figures["seconds"] / forward, 1)}
    agreed = agreement(estimate_head_ranking(model, tokenizer, text).increase,
                       rank_heads(model, tokenizer, text, workers=args.workers).increase)
    result["agreement"] = agreed.to_json()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
