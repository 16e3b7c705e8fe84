"""What the patching and ablation benchmarks share (``measuring``), and the real-size view benchmark too: a model of a
real model's size (``REAL_SIZES``: GPT-2 small, ``GPT2Config()``'s defaults, 12 layers, d 768, 12 heads, vocabulary
50,257; SmolLM-135M's, a Llama of 30 layers, d 576, 9 query and 3 key/value heads, vocabulary 49,152; random weights)
converted with ``modeling.convert.from_transformers`` and held as the app holds it, the time of one forward pass of a
text, and the peak resident memory a call adds (sampled every 5 ms)."""

import statistics
import sys
import threading
import time
from pathlib import Path

import psutil
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "tests")]  # the test tokenizer is the tests' own


# a real model's size: its transformers model_type and config keyword arguments (beyond the tokenizer's special ids)
REAL_SIZES = {
    "gpt2-small": ("gpt2", {}),  # GPT2Config()'s defaults: 124.4M parameters
    "smollm-135m": ("llama", dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                                  num_key_value_heads=3, vocab_size=49152, max_position_embeddings=2048,
                                  tie_word_embeddings=True)),  # HuggingFaceTB/SmolLM-135M's config: 134.5M parameters
}


def real_size(size: str = "gpt2-small"):
    """(model, tokenizer): a random model of ``REAL_SIZES[size]``, ours after from_transformers, held as the app's
    registry holds it; the tests' tokenizer."""
    from modeling.convert import from_transformers
    from support.fixtures_checkpoints import train_tokenizer
    from support.hub_repos import transformers_model

    model_type, sizes = REAL_SIZES[size]
    tokenizer = train_tokenizer()
    model = from_transformers(transformers_model(model_type, tokenizer, **sizes)).eval()
    return model.requires_grad_(False).lay_out_for_decoding(), tokenizer


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
