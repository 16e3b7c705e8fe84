"""Benchmark of Open a model at GPT-2 small's size: a random GPT-2 of 124M parameters (``GPT2Config()``'s defaults: 12
layers, d 768, vocabulary 50,257, 1,024 positions), built here, served by a Hub on 127.0.0.1 (tests/support/fake_hub.py).

    python -m benchmarks.hub_open                 # one torch thread, as the app serves a request
    python -m benchmarks.hub_open --threads 2

Prints, against the Hub issue's targets:
- the first open (download into a fresh HF cache, convert, measure parity): for information;
- opening again from the local cache (a fresh app process's case: the files are on disk; the Hub is asked only what
  the revision's commit is), median of --repeats (target <= 10 s);
- the same with HF_HUB_OFFLINE=1 (no Hub at all);
- its Attention heads view of a 128-token text, as the app computes it (``ui.tabs.attention.show_attention``: the recorded
  run, every layer x head's weights, the figures), first request and later ones (target <= 3 s).
Writes the figures to artifacts/bench_hub_open.json as well.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # the fake Hub and the test tokenizer are the tests' own

REPO_ID = "bench/gpt2-small-random"
TEXT = " ".join(["Shall I compare thee to a summer's day? Thou art more lovely and more temperate."] * 20)


def build(folder: Path) -> Path:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from support.fixtures_checkpoints import train_tokenizer

    tokenizer = train_tokenizer()
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def text_of_tokens(tokenizer, n: int) -> str:
    """A text the tokenizer reads as exactly ``n`` tokens."""
    ids = tokenizer(TEXT).input_ids
    assert len(ids) >= n
    text = tokenizer.decode(ids[:n])
    assert len(tokenizer(text).input_ids) == n
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the app uses 1 per request)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    from support.fake_hub import FakeHub

    with tempfile.TemporaryDirectory() as tmp, FakeHub() as hub:
        tmp = Path(tmp)
        start = time.perf_counter()
        hub.add_folder(REPO_ID, build(tmp / "model"))
        print(f"built and served a random GPT-2 small in {time.perf_counter() - start:.1f} s")
        os.environ.update(HF_ENDPOINT=hub.url, HF_HOME=str(tmp / "home"))
        os.environ.pop("HF_HUB_CACHE", None)
        os.environ.pop("HF_HUB_OFFLINE", None)
        from explorer.models import opening, registry
        from ui.tabs import attention

        figures = {}
        start = time.perf_counter()
        opened = opening.open_repo(REPO_ID)
        figures["first_open_s"] = time.perf_counter() - start
        figures["parameters"], figures["parity"] = opened.n_parameters, opened.parity.gap
        print(f"first open (download {opened.plan.weight_bytes / 1e6:.0f} MB, convert, parity {opened.parity.gap:.1e}): "
              f"{figures['first_open_s']:.2f} s; {opened.n_parameters / 1e6:.1f}M parameters")
        for mode in ("cache", "offline"):
            seconds = []
            for _ in range(args.repeats):
                registry.forget_all()  # as a fresh process: nothing held, the files on disk
                if mode == "offline":
                    os.environ["HF_HUB_OFFLINE"] = "1"
                start = time.perf_counter()
                opening.open_repo(REPO_ID)
                seconds.append(time.perf_counter() - start)
                os.environ.pop("HF_HUB_OFFLINE", None)
            figures[f"open_from_{mode}_s"] = seconds
            print(f"open from the local cache{' (HF_HUB_OFFLINE=1)' if mode == 'offline' else ''}: median "
                  f"{statistics.median(seconds):.2f} s of {[round(s, 2) for s in seconds]} (target <= 10 s)")
        _, _, tokenizer = registry.resolve(REPO_ID)
        seconds = []
        for variant in range(args.repeats + 1):
            text = text_of_tokens(tokenizer, 128 - variant)  # a new text each time: no cached run
            start = time.perf_counter()
            *_, note = attention.show_attention(text, REPO_ID, "self", "0", "average")
            seconds.append(time.perf_counter() - start)
            assert "⚠" not in note, note
        figures["attention_128_s"] = seconds
        print(f"Attention heads on 128 tokens: first {seconds[0]:.2f} s, then median {statistics.median(seconds[1:]):.2f} s "
              f"of {[round(s, 2) for s in seconds[1:]]} (target <= 3 s)")
    out = REPO / "artifacts" / "bench_hub_open.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
