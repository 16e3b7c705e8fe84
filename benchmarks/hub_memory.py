"""Benchmark of the app's memory bound: N visitors at once each open a different Hub model of a given
size and look at it (the Attention heads view, whose recorded pass the view cache keeps), with SCRATCH_HUB_MEMORY set.
The repos are random GPT-2s built and served by a Hub on 127.0.0.1 (tests/support/fake_hub.py) in a process of its own
(its memory is not the app's, as a real Hub's is not); each visitor is a
browser session of its own (``explorer.core.visitor``), and each open goes through the app's own code path
(``explorer.models.opening.start_open``, then ``registry.resolve`` and the attention view's recorded pass, as
``ui.tabs.attention.show_attention`` computes it). A visitor told the app is busy opening models (``jobs.MAX_JOBS``
at once) tries again a second later, until its model opens.

    python -m benchmarks.hub_memory                                   # 8 opens of ~60 MB models, bound 300 MB
    python -m benchmarks.hub_memory --opens 20 --layers 14 --bound 2e9  # the issue's 20 opens of ~170 MB, bound 2 GB

Prints the parameters used, then RSS: the baseline (the app's code imported, the shipped models not loaded), the
peak while the opens run, the steady state after them, and the target: steady and peak under baseline + bound + 25%.
"""

import argparse
import gc
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # the fake Hub and the test tokenizer are the tests' own

RETRY_S = 1.0  # a visitor told the app is busy opening models tries again after this long
TEXT = "Shall I compare thee to a summer's day? Thou art more lovely and more temperate. " * 3


def build(folder: Path, layers: int, width: int, seed: int) -> Path:
    """A random GPT-2 (``layers`` x ``width``, the test tokenizer's 384 tokens) saved as a repo folder."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from support.fixtures_checkpoints import train_tokenizer

    tokenizer = train_tokenizer()
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=len(tokenizer), n_embd=width, n_layer=layers, n_head=8, n_positions=256,
                        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    GPT2LMHeadModel(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


class PeakRSS:
    """The process's RSS sampled every 20 ms in a thread: ``peak`` since ``start``."""

    def __init__(self):
        self.process, self.peak, self.stop = psutil.Process(), 0, threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def now(self) -> int:
        return self.process.memory_info().rss

    def _sample(self):
        while not self.stop.wait(0.02):
            self.peak = max(self.peak, self.now())

    def __enter__(self):
        self.peak = self.now()
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def visit(number: int, repo_id: str, slots: dict, failures: list) -> None:
    """One visitor: open the repo, then look at its attention heads, each event in the app's concurrency group for it
    (``ui.events.OPENING``, ``ui.events.INTERACTIVE``), as the app's queue serves them."""
    from explorer.core.inputs import InputProblem
    from explorer.core.visitor import Visitor, visiting
    from explorer.generation.decoding import DecodingSettings
    from explorer.models import opening, registry
    from explorer.views.attention import attention_maps

    with visiting(Visitor(f"visitor-{number}")):  # what ui.events.guarded sets around the app's events
        try:
            while True:
                try:
                    with slots["opening"]:
                        opening.start_open(repo_id).outcome()
                    break
                except InputProblem as problem:  # "busy opening N models": the visitor tries again, as told
                    if "busy" not in str(problem):
                        raise
                    slots["busy"].append(repo_id)
                    time.sleep(RETRY_S)
            with slots["model"]:
                _, model, tokenizer = registry.resolve(repo_id)
                attention_maps(model, tokenizer, TEXT, DecodingSettings(False))  # its recorded pass: in the view cache
        except Exception as error:  # noqa: BLE001 - reported, and the benchmark fails
            failures.append(f"{repo_id}: {error}")


def serve(args, tmp: Path, ready, stop) -> None:
    """The Hub, in a child process: build the repos, serve them, put (url, weight bytes) on ``ready``, wait for ``stop``."""
    from support.fake_hub import FakeHub

    with FakeHub() as hub:
        for number in range(args.opens):
            hub.add_folder(f"bench/model-{number}", build(tmp / f"model-{number}", args.layers, args.width, number))
        ready.put((hub.url, (tmp / "model-0" / "model.safetensors").stat().st_size))
        stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--opens", type=int, default=8, help="visitors opening a model each, all at once")
    parser.add_argument("--layers", type=int, default=5, help="GPT-2 layers (width 512: about 3.1M parameters each)")
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--bound", type=float, default=300e6, help="SCRATCH_HUB_MEMORY, bytes")
    parser.add_argument("--keep-allocator", action="store_true",
                        help="leave glibc's allocator as it is (the app sets it: explorer.core.machine.give_memory_back)")
    args = parser.parse_args()
    if not args.keep_allocator:
        from explorer.core import machine

        machine.give_memory_back()  # as app.py does at launch
    context = multiprocessing.get_context("spawn")
    ready, stop = context.Queue(), context.Event()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        hub = context.Process(target=serve, args=(args, tmp, ready, stop), daemon=True)
        hub.start()
        url, model_bytes = ready.get(timeout=600)
        import torch

        torch.set_num_threads(1)
        os.environ["SCRATCH_HUB_MEMORY"] = str(int(args.bound))
        os.environ.update(HF_ENDPOINT=url, HF_HOME=str(tmp / "home"))
        os.environ.pop("HF_HUB_CACHE", None)
        os.environ.pop("HF_HUB_OFFLINE", None)
        import importlib

        from explorer.models import registry

        importlib.import_module("explorer.views.attention")  # the app's code imported before the baseline
        from ui.events import INTERACTIVE, OPENING

        gc.collect()
        baseline = psutil.Process().memory_info().rss
        failures: list[str] = []
        print(f"{args.opens} concurrent opens of {model_bytes / 1e6:.0f} MB models (GPT-2, {args.layers} layers, width "
              f"{args.width}), each then viewed (Attention heads); SCRATCH_HUB_MEMORY {args.bound / 1e6:.0f} MB")
        start = time.perf_counter()
        with PeakRSS() as rss:
            slots = {group["concurrency_id"]: threading.Semaphore(group["concurrency_limit"]) for group in (OPENING, INTERACTIVE)}
            slots["busy"] = []  # the opens refused while the app was busy opening others (each tried again)
            visitors = [threading.Thread(target=visit, args=(n, f"bench/model-{n}", slots, failures))
                        for n in range(args.opens)]
            for thread in visitors:
                thread.start()
            for thread in visitors:
                thread.join()
            gc.collect()
            steady = rss.now()
        seconds = time.perf_counter() - start
        held = registry.held_bytes()
        target = baseline + args.bound * 1.25
        print(f"took {seconds:.1f} s; failures: {failures or 'none'}; {len(slots['busy'])} open(s) refused while the app "
              f"was busy opening others, each tried again after {RETRY_S:g} s")
        print(f"RSS baseline {baseline / 1e6:.0f} MB, peak {rss.peak / 1e6:.0f} MB, steady {steady / 1e6:.0f} MB")
        print(f"registry after: {len(held)} model(s) in memory, {sum(held.values()) / 1e6:.0f} MB counted "
              f"(weights + tokenizer + cached views) of the {args.bound / 1e6:.0f} MB bound")
        print(f"target: under baseline + bound + 25% = {target / 1e6:.0f} MB: steady "
              f"{'OK' if steady <= target else 'OVER'}, peak {'OK' if rss.peak <= target else 'OVER'}")
        stop.set()
        hub.join(10)
        if failures:
            sys.exit(1)


if __name__ == "__main__":
    main()
