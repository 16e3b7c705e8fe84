"""How long activation patching takes: each grid of shakespeare-main on a text of --tokens tokens.

    python -m benchmarks.patching --threads 1 --tokens 64             # as the app runs it: one torch thread per worker
    python -m benchmarks.patching --threads 1 --tokens 64 --word My   # the first token changed: every patch is run
    python -m benchmarks.patching --size gpt2-small --tokens 32       # a GPT-2-small-size model
    python -m benchmarks.patching --size smollm-135m --tokens 32      # a Llama of SmolLM-135M's size

With ``--size gpt2-small`` the model is a random GPT-2 small (``smollm-135m``: a random Llama of that size; both
``benchmarks.measuring.REAL_SIZES``), and the JSON adds: one
forward pass of the clean text (seconds), every grid at once ("all": seconds, and as a multiple of that forward
pass; the resident memory the call added), and the first-order estimate of every grid (attribution patching).

The clean text is the opening of the passage below, cut to exactly --tokens tokens; the corrupted one changes one
word (``explorer.views.patching.texts.change_one_word``; the JSON says which, and the positions it changes: a patch before the
first of them writes what is already there and is not run). Each grid is timed alone (``grids=[name]``), --repeat
times after one warm-up; prints one JSON line with the median wall seconds of each, its median CPU seconds (all
threads: on a shared machine the wall time depends on the other load, the CPU time much less; on an idle machine
the wall time is about the CPU time over the cores used) and the patched runs it made.
``--workers`` chunks run side by side (``explorer.views.patching.runs.WORKERS`` in the app), ``--threads`` torch threads each.
"""

import argparse
import json
import statistics
import os
import time
from pathlib import Path

import torch

from explorer.core import machine
from explorer.models import catalog, registry
from benchmarks import measuring
from explorer.views.patching.analysis import activation_patching
from explorer.views.patching.estimates import attribution_patching
from explorer.views.patching.grids import GRIDS
from explorer.views.patching.runs import CHUNK_TOKENS, WORKERS
from explorer.views.patching.texts import change_one_word

PASSAGE = ("My lord, the duke of Norfolk sends word, and the earl of Warwick waits without. Tell the duke of Norfolk "
           "that the king will hear him at noon, and bid the earl of Warwick come with him; for the queen would see "
           "them both before the night, and the prince would speak with Norfolk of the war in France, and of the "
           "ships that wait at Dover for the wind.")


def text_of_length(tokenizer, tokens: int) -> str:
    """The passage's opening that the tokenizer reads as exactly ``tokens`` tokens."""
    ids = tokenizer(PASSAGE).input_ids
    if len(ids) < tokens:
        raise SystemExit(f"--tokens: the passage is {len(ids)} tokens; ask for at most that")
    for cut in range(tokens, len(ids) + 1):
        text = tokenizer.decode(ids[:cut])
        if len(tokenizer(text).input_ids) == tokens:
            return text
    raise SystemExit(f"no opening of the passage is exactly {tokens} tokens")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="checkpoints/shakespeare-main")
    parser.add_argument("--size", choices=["checkpoint", *sorted(measuring.REAL_SIZES)], default="checkpoint",
                        help="gpt2-small, smollm-135m: a random model of that size instead of --model")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--workers", type=int, default=WORKERS)
    parser.add_argument("--chunk-tokens", type=int, default=CHUNK_TOKENS)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--word", default=None, help="the word to change (default: change_one_word's choice); 'My', "
                        "the first, is the slowest case: no patch writes what is already there")
    parser.add_argument("--all-only", action="store_true", help="skip timing each grid alone")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    machine.give_memory_back()  # as app.py does at launch
    if args.size in measuring.REAL_SIZES:
        model, tokenizer = measuring.real_size(args.size)
        model_name = f"{args.size}-random"
    else:
        info = catalog.describe_folder(Path(args.model))
        (model, tokenizer), model_name = registry.shipped_model(info), info.name
    clean = text_of_length(tokenizer, args.tokens)
    corrupted, change = change_one_word(tokenizer, clean, args.word)
    changed = [i for i, (a, b) in enumerate(zip(tokenizer(clean).input_ids, tokenizer(corrupted).input_ids)) if a != b]

    options = dict(chunk_tokens=args.chunk_tokens, workers=args.workers)
    result = {"model": model_name, "tokens": args.tokens, "threads": args.threads, "workers": args.workers,
              "chunk_tokens": args.chunk_tokens, "cpus": os.cpu_count(),
              "corruption": change, "changed_positions": changed}
    layers, heads = model.config.n_layers, model.config.n_heads
    runs = {"residual": layers * args.tokens, "heads": layers * heads * 2, "attention": layers * args.tokens,
            "feed_forward": layers * args.tokens}
    for name in GRIDS if not args.all_only else []:
        activation_patching(model, tokenizer, clean, corrupted, grids=[name], **options)  # warm-up (and the two runs, cached)
        times, cpu = [], []
        for _ in range(args.repeat):
            started, started_cpu = time.perf_counter(), time.process_time()
            activation_patching(model, tokenizer, clean, corrupted, grids=[name], **options)
            times.append(time.perf_counter() - started)
            cpu.append(time.process_time() - started_cpu)
        result[name] = {"seconds": round(statistics.median(times), 3), "cpu_seconds": round(statistics.median(cpu), 3),
                        "patched_runs": runs[name], "all": [round(t, 3) for t in times]}
    forward = measuring.forward_seconds(model, tokenizer(clean, return_tensors="pt").input_ids)
    result["forward_seconds"] = round(forward, 4)
    every = measuring.timed(lambda: activation_patching(model, tokenizer, clean, corrupted, **options), args.repeat)
    estimate = measuring.timed(lambda: attribution_patching(model, tokenizer, clean, corrupted), args.repeat)
    for key, figures in (("all", every), ("estimate", estimate)):
        result[key] = {**figures, "forward_passes": round(figures["seconds"] / forward, 1)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
