"""What the patching and ablation benchmarks share (``measuring``): a GPT-2-small-size model (``GPT2Config()``'s defaults: 12 layers,
d 768, 12 heads, vocabulary 50,257; random weights) converted with ``modeling.convert.from_transformers`` and held as the app holds it, the
time of one forward pass of a text, and the peak resident memory a call adds (sampled every 5 ms)."""

import statistics
import sys
import threading
import time
from pathlib import Path

import psutil
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "tests")]  # the test tokenizer is the tests' own


def gpt2_small():
    """(model, tokenizer): a random GPT-2 small, ours after from_transformers; the tests' tokenizer (its ids are a
    subset of the model's vocabulary, which keeps every one of its 50,257 logits)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from modeling.convert import from_transformers
    from support.fixtures_checkpoints import train_tokenizer

    torch.manual_seed(0)
    model = from_transformers(GPT2LMHeadModel(GPT2Config()).eval()).eval()
    return model.requires_grad_(False).lay_out_for_decoding(), train_tokenizer()  # as the app's registry holds it


def forward_seconds(model, ids: torch.Tensor, repeat: int = 5) -> float:
    """Median wall seconds of one plain forward pass over ``ids`` (1, T), every position's logits."""
    times = []
    with torch.inference_mode():
        model(input_ids=ids)
        for _ in range(repeat):
            started = time.perf_counter()
            model(input_ids=ids)
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def timed(call, repeat: int) -> dict:
    """Median wall seconds of ``call()`` over ``repeat`` runs (after one warm-up), and the most resident memory
    any run added above what the process held when it began (MB)."""
    call()
    times, peaks = [], []
    process = psutil.Process()
    for _ in range(repeat):
        before, peak, done = process.memory_info().rss, [0], threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], process.memory_info().rss)
                time.sleep(0.005)

        sampler = threading.Thread(target=sample)
        sampler.start()
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
        done.set()
        sampler.join()
        peaks.append(max(0, peak[0] - before) / 2**20)
    return {"seconds": round(statistics.median(times), 3), "all": [round(t, 3) for t in times],
            "added_rss_mb": round(max(peaks), 1)}
