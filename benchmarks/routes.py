"""How long the routes of one prediction take (How the prediction was made): the recorded forward pass, then the
tracing (tensor arithmetic only), against one plain forward pass of the same model on the same tokens.

    python -m benchmarks.routes --threads 1     # as the app runs it: one torch thread per request

Two models: shakespeare-main on --main-tokens tokens (default 128) of a passage repeated (the induction head copies
from the first copy: the route fans out the most), and a GPT-2-small-size model (``GPT2Config()``'s defaults:
12 layers, 12 heads, d_model 768, random weights, converted with ``modeling.convert.from_transformers``) on
--gpt2-tokens random tokens (default 64). Each is timed --repeat times after one warm-up; prints one JSON line per
model with the median wall seconds of the plain pass, the recorded pass, the tracing, the routes in all (recorded
pass + tracing) and that total as a multiple of the plain pass, with the edges and nodes of the graph.
"""

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
from transformers import GPT2Config, GPT2LMHeadModel

from explorer.models import catalog, registry
from explorer.views.routes.graph import DEFAULT_THRESHOLD, Tracer
from modeling import record
from modeling.convert import from_transformers

PASSAGE = ("My lord, the duke of Norfolk sends word, and the earl of Warwick waits without. Tell the duke of Norfolk "
           "that the king will hear him at noon, and bid the earl of Warwick come with him; ")


def median_seconds(run, repeat: int) -> float:
    run()  # warm-up
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def routes_timing(model, ids: torch.Tensor, threshold: float, repeat: int) -> dict:
    """The plain pass, the recorded pass and the tracing of the last position's routes, each timed alone."""
    labels = [str(i) for i in ids[0].tolist()]

    def plain():
        with torch.inference_mode():
            model(ids, use_cache=False)

    def recorded():
        with torch.inference_mode(), record() as recording:
            model(ids, use_cache=False)
        return recording

    recording = recorded()

    def trace():
        tracer = Tracer(model, recording, threshold, labels, [])
        with torch.inference_mode():
            tracer.trace(ids.shape[1] - 1)
        return tracer

    seconds = {name: median_seconds(run, repeat) for name, run in
               (("plain_pass", plain), ("recorded_pass", recorded), ("tracing", trace))}
    tracer = trace()
    total = seconds["recorded_pass"] + seconds["tracing"]
    return {**{k: round(v, 4) for k, v in seconds.items()}, "routes": round(total, 4),
            "routes_over_plain_pass": round(total / seconds["plain_pass"], 1), "edges": len(tracer.edges),
            "nodes": len(tracer.nodes), "tokens": ids.shape[1], "threshold": threshold}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="checkpoints/shakespeare-main")
    parser.add_argument("--main-tokens", type=int, default=128)
    parser.add_argument("--gpt2-tokens", type=int, default=64)
    parser.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    model, tokenizer = registry.shipped_model(catalog.describe_folder(Path(args.model)))
    ids = tokenizer(PASSAGE * 8, return_tensors="pt").input_ids
    if ids.shape[1] < args.main_tokens:
        raise SystemExit(f"--main-tokens: the repeated passage is {ids.shape[1]} tokens; ask for at most that")
    main_ids = ids[:, :args.main_tokens]
    print(json.dumps({"model": Path(args.model).name, "threads": args.threads,
                      **routes_timing(model, main_ids, args.threshold, args.repeat)}))

    torch.manual_seed(0)
    gpt2 = from_transformers(GPT2LMHeadModel(GPT2Config()).eval()).eval()
    random_ids = torch.randint(0, gpt2.config.vocab_size, (1, args.gpt2_tokens), generator=torch.Generator().manual_seed(0))
    print(json.dumps({"model": "GPT-2-small size (GPT2Config(), random weights)", "threads": args.threads,
                      **routes_timing(gpt2, random_ids, args.threshold, args.repeat)}))


if __name__ == "__main__":
    main()
