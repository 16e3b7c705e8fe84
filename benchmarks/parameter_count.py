"""Benchmark of the parameter count from a config's numbers (``explorer.models.plans.count_parameters``), which every
open runs before a weight is fetched: well under a second for any config, and never a model built.

    python -m benchmarks.parameter_count

Prints, for each config (real ones and absurd ones), the count and the median time of --repeats calls; and, for
scale, what the count used to cost (building GPT-2 on the meta device) at 12 and at 2,000 layers.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CONFIGS = {
    "GPT-2 small": {"model_type": "gpt2"},
    "GPT-2, 10^6 layers (a 405-byte hostile config)": {"model_type": "gpt2", "n_layer": 10**6},
    "GPT-2, 10^12 layers, d 10^6": {"model_type": "gpt2", "n_layer": 10**12, "n_embd": 10**6},
    "Llama 3 70B": {"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
                    "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 128256},
    "Pythia 14M": {"model_type": "gpt_neox", "hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 6,
                   "num_attention_heads": 4, "vocab_size": 50304},
    "ours, 10^9 layers": {"model_type": "scratch_transformer", "n_layers": 10**9},
}


def seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def meta_build(layers: int) -> float:
    """What the count cost before: GPT-2 built on the meta device (no memory for weights, every module made)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    start = time.perf_counter()
    with torch.device("meta"):
        GPT2LMHeadModel(GPT2Config(n_layer=layers))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    from explorer.models.plans import count_parameters

    for name, raw in CONFIGS.items():
        took = seconds(lambda: count_parameters(raw), args.repeats)
        print(f"{name:40s} {count_parameters(raw):>28,} parameters  {took * 1e6:8.1f} µs")
    for layers in (12, 2_000):
        print(f"before: GPT-2 on the meta device, {layers:>5,} layers: {meta_build(layers):8.2f} s")


if __name__ == "__main__":
    main()
