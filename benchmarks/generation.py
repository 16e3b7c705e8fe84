"""Greedy generation speed: our ScratchTransformerForCausalLM against transformers' GPT2LMHeadModel
holding the same weights (converted with modeling.convert.causal_lm_from_gpt2), batch 1.

    python -m benchmarks.generation               # 256 new tokens, both sizes
    python -m benchmarks.generation --size gpt2-small --new-tokens 256 --repeats 3

Prints tokens/s for GPT-2, ours, their ratio, and ours with the KV cache off. Takes the best of
``--repeats`` runs of each (after one warm-up), alternating the models so that neither gets a
quieter machine.
"""

import argparse
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from modeling.convert import causal_lm_from_gpt2

SIZES = {
    # the size of our shipped Shakespeare models
    "shakespeare": dict(vocab_size=4096, n_embd=256, n_head=8, n_layer=4, n_positions=1024),
    # GPT-2 small (124M parameters), randomly initialised
    "gpt2-small": dict(vocab_size=50257, n_embd=768, n_head=12, n_layer=12, n_positions=1024),
}


def tokens_per_second(model, prompt: torch.Tensor, new_tokens: int, use_cache: bool = True) -> float:
    start = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new_tokens,
                             min_new_tokens=new_tokens, do_sample=False, use_cache=use_cache, pad_token_id=0)
    elapsed = time.perf_counter() - start
    assert out.shape[1] == prompt.shape[1] + new_tokens
    return new_tokens / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=[*SIZES, "all"], default="all")
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--prompt-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    for size in SIZES if args.size == "all" else [args.size]:
        gpt2 = GPT2LMHeadModel(GPT2Config(**SIZES[size], bos_token_id=0, eos_token_id=0)).eval()
        ours = causal_lm_from_gpt2(gpt2).eval()
        prompt = torch.randint(1, gpt2.config.vocab_size, (1, args.prompt_tokens))
        with torch.inference_mode():
            assert torch.equal(gpt2.generate(prompt, max_new_tokens=8, do_sample=False, pad_token_id=0),
                               ours.generate(prompt, max_new_tokens=8, do_sample=False, pad_token_id=0))
        for model in (gpt2, ours):  # warm-up
            tokens_per_second(model, prompt, 16)
        best = {"gpt2": 0.0, "ours": 0.0}
        for _ in range(args.repeats):
            best["gpt2"] = max(best["gpt2"], tokens_per_second(gpt2, prompt, args.new_tokens))
            best["ours"] = max(best["ours"], tokens_per_second(ours, prompt, args.new_tokens))
        no_cache = tokens_per_second(ours, prompt, args.new_tokens, use_cache=False)
        params = sum(p.numel() for p in ours.parameters()) / 1e6
        print(f"[{size}: {params:.1f}M parameters, batch 1, {args.prompt_tokens}-token prompt, "
              f"{args.new_tokens} new tokens, greedy, {args.threads} threads, best of {args.repeats}]")
        print(f"  GPT2LMHeadModel        {best['gpt2']:8.1f} tokens/s")
        print(f"  ScratchTransformer     {best['ours']:8.1f} tokens/s   ratio ours/gpt2 = {best['ours'] / best['gpt2']:.2f}")
        print(f"  ScratchTransformer, no KV cache {no_cache:8.1f} tokens/s")


if __name__ == "__main__":
    main()
