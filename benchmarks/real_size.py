"""The views at a real model's size: a random GPT-2 small (``GPT2Config()``'s defaults: 12 layers,
d 768, vocabulary 50,257; 124M parameters), or a Llama of SmolLM-135M's size (``benchmarks.measuring.REAL_SIZES``),
served by a Hub on 127.0.0.1 (tests/support/fake_hub.py), opened as the app opens it, every view called through its
tab's handler as the app calls it.

    python -m benchmarks.real_size                 # GPT-2 small's size, one torch thread (as the app serves a request)
    python -m benchmarks.real_size --size smollm-135m  # a Llama: 30 layers, 9 query and 3 key/value heads
    python -m benchmarks.real_size --size tiny     # 2 layers, d 32: that it runs (the tests' size)
    python -m benchmarks.real_size --only lens trace   # some views alone (opening and the forward pass always)

Prints, for each figure, the wall time (median of --repeats after one call to warm up, each call on a text the
view has not seen, so nothing is cached), that time as a multiple of one forward pass of the same model over the
same 128 tokens (a figure that carries over to another machine), the peak RSS while it ran, and what a view's first
call holds on top of the open model (as MB and as a multiple of the model's weights: target at most 1x):
- open: the first open (download, convert, parity) and again from the local cache (target <= 6 s);
- heads: Attention heads, 128 tokens; lens: Logit lens, 128 tokens (target <= 1.5 s);
- gradient step, steps (Attention step by step), trace (Inside the forward pass), 128 tokens (target <= 2 s each);
- generation: greedy tokens/s of the app's decoding and of transformers' own class (GPT2LMHeadModel,
  LlamaForCausalLM) holding the same weights, alternating, in this process (target: at least GPT2LMHeadModel's);
- watch: Watch it learn from the Hub on --revisions revisions of a random Pythia-70m-size repo (GPT-NeoX, 6 layers,
  d 512, 70M parameters), while the model above stays open: the seconds, and the peak RSS above what it was before, in
  bytes and in one revision's weights (target: at most one revision held at a time beside the model shown, so that
  12 revisions of a Pythia-160M-size repo fit in 16 GB).
Writes the figures to artifacts/bench_real_size.json as well.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # the fake Hub and the test tokenizer are the tests' own

REPO_ID = "bench/real-size"
TINY = ("gpt2", dict(n_layer=2, n_embd=32, n_head=2, vocab_size=384, n_positions=256))  # that it runs: the tests' size
PYTHIA_70M = dict(hidden_size=512, num_hidden_layers=6, num_attention_heads=8, intermediate_size=2048,
                  vocab_size=50304, max_position_embeddings=2048, rotary_pct=0.25)  # the Watch it learn repo's revisions
PYTHIA_TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=384,
                   max_position_embeddings=256, rotary_pct=0.25)
WATCH_REPO = "bench/pythia-like"
TOKENS = 128
NEW_TOKENS = 32
TEXT = ("Shall I compare thee to a summer's day? Thou art more lovely and more temperate: rough winds do shake the "
        "darling buds of May, and summer's lease hath all too short a date. ")


def sizes():
    """size -> (transformers model_type, config keyword arguments): ``benchmarks.measuring.REAL_SIZES`` and "tiny"."""
    from benchmarks.measuring import REAL_SIZES

    return {**REAL_SIZES, "tiny": TINY}


def build(folder: Path, size: str) -> Path:
    """A random transformers model of ``size`` (its own class) and the tests' tokenizer, saved in ``folder``."""
    from support.fixtures_checkpoints import train_tokenizer
    from support.hub_repos import transformers_model

    tokenizer = train_tokenizer()
    model_type, config = sizes()[size]
    transformers_model(model_type, tokenizer, **config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_revisions(folder: Path, size: str, revisions: int, hub) -> tuple[list[str], int]:
    """``revisions`` random GPTNeoXForCausalLM of ``size`` (each its own seed) served as WATCH_REPO's step<N>: their
    names, and the bytes of one revision's weights."""
    from support.fixtures_checkpoints import train_tokenizer
    from support.hub_repos import transformers_model

    tokenizer, names = train_tokenizer(), []
    for step in range(revisions):
        where = folder / f"step{step * 1000}"
        transformers_model("gpt_neox", tokenizer, step, **(PYTHIA_TINY if size == "tiny" else PYTHIA_70M)).save_pretrained(where)
        tokenizer.save_pretrained(where)
        hub.add_folder(WATCH_REPO, where, revision=where.name)
        names.append(where.name)
    return names, (where / "model.safetensors").stat().st_size


def watch_figures(revisions: list[str], revision_bytes: int) -> dict:
    """Watch it learn from the Hub as the tab runs it (opening, then measuring): seconds and RSS above the start."""
    from explorer.learning import hub_revisions
    from explorer.learning.watch_it_learn import DEFAULT_TEXT

    before = rss()
    with PeakRSS() as memory:
        start = time.perf_counter()
        asked = hub_revisions.request(WATCH_REPO, ", ".join(revisions), DEFAULT_TEXT)
        for _ in asked.opening():
            pass
        opened = time.perf_counter() - start
        asked.measure()
        seconds = time.perf_counter() - start
    return {"revisions": len(revisions), "opening_s": opened, "seconds": seconds, "rss_before": before,
            "peak_above": memory.peak - before, "revision_bytes": revision_bytes}


def texts_of_tokens(tokenizer, n: int, count: int) -> list[str]:
    """``count`` different texts the tokenizer reads as exactly ``n`` tokens (windows of a long text)."""
    ids, texts, start = tokenizer(TEXT * (2 + n // 16), add_special_tokens=False).input_ids, [], 0
    while len(texts) < count:
        text = tokenizer.decode(ids[start:start + n])
        if len(tokenizer(text, add_special_tokens=False).input_ids) == n and text not in texts:
            texts.append(text)
        start += 1
    return texts


class PeakRSS:
    """The process's peak resident set size while the block runs (sampled every 5 ms from /proc)."""

    def __enter__(self):
        self.peak, self._done = rss(), threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self):
        while not self._done.wait(0.005):
            self.peak = max(self.peak, rss())

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()
        self.peak = max(self.peak, rss())


def rss() -> int:
    """Bytes resident now."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def timed(call, texts: list[str]) -> dict:
    """``call(text)`` on each text: the first warms up; the seconds of the others, and the peak RSS of all; and
    "on_top": the peak above what the process held before the first call, its heap trimmed (what the view adds on
    top of the open model: its first call, before any of its memory is kept for reuse)."""
    from explorer.core import machine

    machine.trim_heap()
    before = rss()
    with PeakRSS() as memory:
        call(texts[0])
        on_top = memory.peak - before
        seconds = []
        for text in texts[1:]:
            start = time.perf_counter()
            call(text)
            seconds.append(time.perf_counter() - start)
    return {"seconds": seconds, "median_s": statistics.median(seconds), "peak_rss": memory.peak, "on_top": on_top}


def checked(outputs):
    """A handler's outputs, after checking that its status line reports no failure."""
    note = outputs[-1]
    if isinstance(note, str) and note.startswith("⚠"):
        raise RuntimeError(note)
    return outputs


def view_calls(repo_id: str) -> dict:
    """name -> call(text), each a tab's handler as the app calls it."""
    from ui.tabs import attention, gradient_step, lens, steps, trace

    return {
        "heads": lambda text: checked(attention.show_attention(text, repo_id, "self", "0", "average")),
        "lens": lambda text: checked(lens.logit_lens(text, repo_id, -1)),
        "gradient step": lambda text: checked(gradient_step.gradient_step(text, repo_id, -1, " the", 0.001)),
        "steps": lambda text: checked(steps.attention_steps(text, repo_id, "self", -1, -1, -1, False)),
        "trace": lambda text: checked(trace.trace_forward(text, repo_id)),
    }


def forward_seconds(model, tokenizer, texts: list[str]) -> float:
    """Median seconds of one plain forward pass over each text (the unit every figure is also given in)."""
    import torch

    seconds = []
    for text in texts:
        ids = tokenizer(text, return_tensors="pt", add_special_tokens=False).input_ids
        with torch.inference_mode():
            start = time.perf_counter()
            model(ids, use_cache=False)
            seconds.append(time.perf_counter() - start)
    return statistics.median(seconds[1:])


def generation_rates(model, folder: Path, tokenizer, repeats: int) -> dict:
    """Greedy tokens/s of the Generate tab's decoding (``explorer.generation.streaming.stream_generation``: the
    model's running batch, as the app streams) and of transformers' own class loaded from the same files
    (``generate``: GPT2LMHeadModel, LlamaForCausalLM), alternating; each the best of ``repeats``. Both make the same
    tokens. Returns {"ours", "theirs": tokens/s, "class": theirs' class name}."""
    import threading

    import torch
    from transformers import AutoModelForCausalLM

    from explorer.generation.decoding import DecodingSettings
    from explorer.generation.streaming import stream_generation

    reference = AutoModelForCausalLM.from_pretrained(folder).eval()
    ids = tokenizer(TEXT, return_tensors="pt", add_special_tokens=False).input_ids[:, :16]
    prompt = tokenizer.decode(ids[0])
    settings = DecodingSettings(False, max_new_tokens=NEW_TOKENS)

    def ours() -> tuple[int, str]:
        *_, last = stream_generation(model, tokenizer, prompt, settings, threading.Event())
        return last.n_tokens, last.text

    def theirs() -> tuple[int, str]:
        with torch.inference_mode():
            out = reference.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS,
                                     do_sample=False, eos_token_id=model.generation_config.eos_token_id, pad_token_id=0)
        return out.shape[1] - ids.shape[1], prompt + tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)

    rates, texts = {"ours": [], "theirs": []}, {}
    for _ in range(repeats + 1):
        for name, run in (("ours", ours), ("theirs", theirs)):
            start = time.perf_counter()
            n_tokens, texts[name] = run()
            rates[name].append(n_tokens / (time.perf_counter() - start))
    if texts["ours"] != texts["theirs"]:
        raise RuntimeError(f"our greedy text differs from {type(reference).__name__}'s")
    return {**{name: max(values[1:]) for name, values in rates.items()}, "class": type(reference).__name__}


def open_figures(repo_id: str, repeats: int) -> dict:
    from explorer.models import opening, registry

    with PeakRSS() as memory:
        start = time.perf_counter()
        opened = opening.open_repo(repo_id)
        first = time.perf_counter() - start
    again = []
    for _ in range(repeats):
        registry.forget_all()  # as a fresh process: nothing held, the files on disk
        start = time.perf_counter()
        opening.open_repo(repo_id)
        again.append(time.perf_counter() - start)
    return {"parameters": opened.n_parameters, "first_s": first, "again_s": again,
            "median_s": statistics.median(again), "peak_rss": memory.peak}


VIEWS = ("heads", "lens", "gradient step", "steps", "trace", "generation", "watch")


def measure(size: str, repeats: int, only=VIEWS, revisions: int = 6) -> dict:
    from explorer.models import registry
    from support.fake_hub import FakeHub

    with tempfile.TemporaryDirectory() as tmp, FakeHub() as hub:
        folder = build(Path(tmp) / "model", size)
        hub.add_folder(REPO_ID, folder)
        os.environ.update(HF_ENDPOINT=hub.url, HF_HOME=str(Path(tmp) / "home"))
        for name in ("HF_HUB_CACHE", "HF_HUB_OFFLINE"):
            os.environ.pop(name, None)
        figures = {"size": size, "open": open_figures(REPO_ID, repeats)}
        _, model, tokenizer = registry.resolve(REPO_ID)
        figures["forward_s"] = forward_seconds(model, tokenizer, texts_of_tokens(tokenizer, TOKENS, repeats + 1))
        figures["weights"] = sum(p.numel() * p.element_size() for p in model.parameters())
        texts = texts_of_tokens(tokenizer, TOKENS, (len(VIEWS) + 1) * (repeats + 1))
        for index, (name, call) in enumerate(view_calls(REPO_ID).items(), start=1):  # each view its own texts
            if name in only:
                figures[name] = timed(call, texts[index * (repeats + 1):(index + 1) * (repeats + 1)])
        if "generation" in only:
            figures["generation"] = generation_rates(model, folder, tokenizer, repeats)
        if "watch" in only:
            figures["watch"] = watch_figures(*build_revisions(Path(tmp) / "revisions", size, revisions, hub))
        registry.forget_all()  # its Hub and files go with this block
    return figures


def report(figures: dict) -> None:
    unit = figures["forward_s"]
    print(f"{figures['size']}: {figures['open']['parameters'] / 1e6:.1f}M parameters; one forward pass over {TOKENS} "
          f"tokens {unit * 1000:.0f} ms (the unit below); load average {os.getloadavg()[0]:.1f}")
    opened = figures["open"]
    print(f"{'open, first':<28}{opened['first_s']:7.2f} s {opened['first_s'] / unit:7.0f}x  peak RSS "
          f"{opened['peak_rss'] / 1e9:.2f} GB")
    print(f"{'open, from the local cache':<28}{opened['median_s']:7.2f} s {opened['median_s'] / unit:7.0f}x")
    for name in VIEWS[:-2]:
        if name not in figures:
            continue
        view = figures[name]
        print(f"{name + f', {TOKENS} tokens':<28}{view['median_s']:7.2f} s {view['median_s'] / unit:7.1f}x  peak RSS "
              f"{view['peak_rss'] / 1e9:.2f} GB, {view['on_top'] / 1e6:.0f} MB on top "
              f"({view['on_top'] / figures['weights']:.2f}x the weights)  ({', '.join(f'{s:.2f}' for s in view['seconds'])})")
    if "generation" in figures:
        rates = figures["generation"]
        print(f"{'generation, greedy':<28}{rates['ours']:7.1f} tokens/s; {rates['class']} {rates['theirs']:.1f} "
              f"tokens/s ({rates['ours'] / rates['theirs']:.2f}x)")
    if "watch" in figures:
        watch = figures["watch"]
        print(f"{'watch it learn from the Hub':<28}{watch['seconds']:7.2f} s {watch['seconds'] / unit:7.0f}x  "
              f"{watch['revisions']} revisions of {watch['revision_bytes'] / 1e6:.0f} MB (opening {watch['opening_s']:.1f} s); "
              f"peak RSS {watch['peak_above'] / 1e9:.2f} GB above the {watch['rss_before'] / 1e9:.2f} GB before = "
              f"{watch['peak_above'] / watch['revision_bytes']:.1f} revisions' weights")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(sizes()), default="gpt2-small")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the app uses 1 per request)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=VIEWS, nargs="*", default=list(VIEWS))
    parser.add_argument("--revisions", type=int, default=6, help="revisions Watch it learn opens (at most 12)")
    args = parser.parse_args(argv)
    import torch

    from explorer.core import machine

    torch.set_num_threads(args.threads)
    machine.give_memory_back()  # as app.py does at launch
    figures = measure(args.size, args.repeats, args.only, args.revisions)
    report(figures)
    out = REPO / "artifacts" / "bench_real_size.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
