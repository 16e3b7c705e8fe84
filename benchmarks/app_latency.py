"""Benchmark of the Gradio app, as a user meets it: `python app.py` in a subprocess, called over HTTP.

    python -m benchmarks.app_latency                       # ./checkpoints if it has any, else random shipped-size ones
    python -m benchmarks.app_latency --checkpoints DIR     # any checkpoint root
    python -m benchmarks.app_latency --random tiny         # random d_model=32 checkpoints (what the tests use)
    python -m benchmarks.app_latency --starts 1 --only training   # the figures of generation beside training alone
    python -m benchmarks.app_latency --starts 1 --only timeline   # one move of the Watch it learn slider alone
    python -m benchmarks.app_latency --starts 1 --load 16x4       # 16 clients x 4 rounds at once (benchmarks.app_load)

Prints, against the targets of the issues:
- readiness: from starting `python app.py` to the page answering HTTP 200 (target < 10 s), median of --starts,
  next to the time `python -c "import gradio"` takes at the same moment (the floor: the machine's load moves both);
- first streamed token: from submitting /generate to the first output holding generated text (target < 1 s);
- attention tab: /attention on a 128-token text, request to figures received (target < 2 s);
- first streamed token of /generate while two /recompute_extrapolation requests on 20,000 CJK characters are
  in flight (one running, one queued behind it; target < 5 s);
- first streamed token of /generate (8 new tokens) alone, then while one default /train_live job runs (the
  Train one yourself tab's defaults), and how long that job took, start to finish, with them beside it;
- teaching views on 128 tokens (target <= 1 s each): /attention_steps (last layer, last head, last query),
  /logit_lens, /ablate_heads (two heads), /next_token_distribution (T 0.8, top-k 40, top-p 0.95), and
  /rank_heads (one forward pass per head: layers x heads passes);
- one move of the Watch it learn slider (target <= 1 s): /training_timeline at every snapshot of the default
  recorded run in turn, on the tab's default text (random checkpoints get two recorded runs of the presets' size,
  trained for a few steps).
Writes the figures to artifacts/bench_app.json as well. Each figure is one function below: a new endpoint's
latency is one more function, one more line in ``measure_everything`` and one in ``report_everything``.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # the random checkpoints and the app process helpers are the tests' own

from support.app_process import LONG_CJK_TEXT, QueuedJob, start_app, stop_app  # noqa: E402

from benchmarks.app_load import report_load, run_load  # noqa: E402

TEXT = ("To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer the slings and arrows "
        "of outrageous fortune, or to take arms against a sea of troubles and by opposing end them. To die, to sleep, "
        "no more; and by a sleep to say we end the heart-ache and the thousand natural shocks that flesh is heir to: "
        "'tis a consummation devoutly to be wish'd. To die, to sleep; to sleep, perchance to dream: ay, there's the rub, "
        "for in that sleep of death what dreams may come, when we have shuffled off this mortal coil, must give us pause.")
PROMPT = "Shall I compare thee to a summer's day?"
SHIPPED_SIZE = dict(d_model=256, n_heads=4, n_layers=4, d_ff=1024, max_position_embeddings=256, training_context_length=256)


def first_token_latency(client, model: str, seed: int, max_new_tokens: int = 64) -> tuple[float, float]:
    """(seconds to the first output holding generated text, tokens/s the app reported)."""
    start = time.perf_counter()
    job = client.submit(PROMPT, model, "Sampling", 0.8, 40, 0.95, 1.1, max_new_tokens, seed, api_name="/generate")
    first = None
    for text, _ in job:
        if first is None and text != PROMPT:  # the first update shows the prompt alone
            first = time.perf_counter() - start
    note = job.result()[1]
    rate = float(note.split("**")[3].split()[0]) if "tokens/s" in note else float("nan")
    return first if first is not None else float("nan"), rate


def attention_latency(client, model: str, text: str) -> float:
    start = time.perf_counter()
    *_, note = client.predict(text, model, "self", "0", "average", api_name="/attention")
    elapsed = time.perf_counter() - start
    if note.startswith("⚠️"):
        raise RuntimeError(note)
    return elapsed


def first_token_under_long_jobs(url: str, client, model: str, repeats: int) -> list[float]:
    """First-token latency of /generate while two /recompute_extrapolation jobs on LONG_CJK_TEXT are in flight;
    only measurements taken while both were still in flight count."""
    jobs = [QueuedJob(url, "recompute_extrapolation", [LONG_CJK_TEXT]) for _ in range(2)]
    try:
        if not jobs[0].started.wait(120):
            raise RuntimeError("the long job never started")
        latencies = []
        for seed in range(repeats):
            latency, _ = first_token_latency(client, model, seed, max_new_tokens=8)
            if any(job.completed.is_set() for job in jobs):
                break
            latencies.append(latency)
        return latencies
    finally:
        for job in reversed(jobs):
            job.leave()


def default_job() -> list:
    """/train_live's inputs for the tab's default job: each choice as LiveSettings' default, no preset."""
    from explorer.learning.live_settings import DEFAULT
    from ui.tabs.train_live import CHOICES

    return [getattr(DEFAULT, name) if name != "preset" else None for name in CHOICES]


def first_token_while_training(url: str, client, model: str, repeats: int) -> dict:
    """First-token latency of /generate alone, then while one /train_live job with the tab's defaults runs
    (another client, so another session; only requests answered before the job ended count), and the job's
    seconds from submit to its last update. Text data needs shakespeare-main's tokenizer in the checkpoints."""
    from gradio_client import Client

    alone = [first_token_latency(client, model, seed, max_new_tokens=8)[0] for seed in range(repeats)]
    trainer = Client(url, verbose=False)
    start = time.perf_counter()
    job = trainer.submit(*default_job(), api_name="/train_live")
    while not any(out[-1].startswith("- Step ") for out in job.outputs()):  # the job is stepping
        if job.done():
            raise RuntimeError(f"the training job ended before its first step: {job.result()[-1]}")
        time.sleep(0.05)
    during = []
    for seed in range(repeats):
        latency, _ = first_token_latency(client, model, seed, max_new_tokens=8)
        if job.done():
            break
        during.append(latency)
    *_, numbers, _, note = job.result(timeout=600)
    return {"first_token_alone_s": alone, "first_token_while_training_s": during,
            "default_job_s": time.perf_counter() - start, "default_job_training_s": numbers["seconds"],
            "default_job_losses": [numbers["losses"][0], numbers["losses"][-1]], "default_job_note": note.splitlines()[0]}


TEACHING = {  # endpoint -> the arguments after (text, model)
    "attention_steps": ("self", -1, -1, -1, False),
    "logit_lens": (-1,),
    "ablate_heads": ("self", "0.1, 2.3"),
    "next_token_distribution": (0.8, 40, 0.95, 1.0),
    "rank_heads": ("self",),
}


def teaching_latencies(client, model: str, texts: list[str]) -> dict[str, list[float]]:
    """Seconds from request to answer of each teaching endpoint, once per text (after one call to warm up)."""
    seconds = {}
    for name, args in TEACHING.items():
        client.predict(texts[0], model, *args, api_name=f"/{name}")
        seconds[name] = []
        for text in texts:
            start = time.perf_counter()
            *_, note = client.predict(text, model, *args, api_name=f"/{name}")
            seconds[name].append(time.perf_counter() - start)
            assert not note.startswith("⚠️"), (name, note)
    return seconds


def timeline_latencies(client, root: Path, rounds: int) -> list[float]:
    """Seconds from request to answer of /training_timeline as the slider asks it: every snapshot of the default
    run in turn, ``rounds`` times over (after one call to warm up), on the tab's default text; [] without a run."""
    from explorer.learning.training_runs import pick_run, training_runs
    from explorer.learning.watch_it_learn import DEFAULT_TEXT

    if not training_runs(root):
        return []
    n = len(pick_run(None, root).snapshots)
    client.predict(0, DEFAULT_TEXT, api_name="/training_timeline")
    seconds = []
    for index in [i for _ in range(rounds) for i in range(n)]:
        start = time.perf_counter()
        note = client.predict(index, DEFAULT_TEXT, api_name="/training_timeline")[-1]
        seconds.append(time.perf_counter() - start)
        assert not note.startswith("⚠️"), note
    return seconds


def report_timeline(seconds: list[float], root: Path) -> None:
    if seconds:
        print(f"{'/training_timeline, one slider move:':42}median {statistics.median(seconds):.3f} s, worst "
              f"{max(seconds):.3f} s ({len(seconds)} moves)   target <= 1 s")
    else:
        print(f"/training_timeline: not measured (no recorded run among the checkpoints in {root})")


def text_of_tokens(root: Path, model: str, n_tokens: int, variant: int) -> str:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(root / model)
    ids = tokenizer(f"{variant} " + TEXT * 4, add_special_tokens=False).input_ids[:n_tokens]
    return tokenizer.decode(ids)


def main() -> None:
    args = parse_args()
    root, source = checkpoint_root(args.checkpoints, args.random)
    from explorer.models.catalog import default_model, discover_checkpoints, read_results

    model = default_model(discover_checkpoints(root), read_results(root))  # the app's default model
    print(f"app benchmark on {source}; model for latencies: {model}; CPU load now: {os.getloadavg()[0]:.2f}")

    from gradio_client import Client

    process, url, ready, import_gradio = start_until_ready(root, args.starts)
    if args.load:
        figures = then_stop(process, lambda: run_load(url, model, *args.load))
        report_load(figures)
        write_figures({"source": source, "model": model, **figures}, "bench_app_load.json")
    elif args.only == "training":
        report_training(then_stop(process, lambda: first_token_while_training(url, Client(url, verbose=False), model,
                                                                               args.repeats)))
    elif args.only == "timeline":
        report_timeline(then_stop(process, lambda: timeline_latencies(Client(url, verbose=False), root, 2)), root)
    else:
        measured = then_stop(process, lambda: measure_everything(url, root, model, args.repeats))
        figures = {"source": source, "model": model, "load_average_1min": os.getloadavg()[0], "ready_s": ready,
                   "ready_median_s": statistics.median(ready), "import_gradio_alone_s": import_gradio, **measured}
        report_everything(figures, root)
        write_figures(figures, "bench_app.json")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoints", type=Path, help="checkpoint root (default: ./checkpoints if it has models)")
    parser.add_argument("--random", choices=["shipped", "tiny"], help="build random checkpoints of this size instead")
    parser.add_argument("--starts", type=int, default=3, help="how many times to start app.py for the readiness figure")
    parser.add_argument("--repeats", type=int, default=5, help="requests per latency figure")
    parser.add_argument("--only", choices=["training", "timeline"],
                        help="after readiness, measure only generation beside training, or only the timeline slider")
    parser.add_argument("--load", type=load_shape, metavar="CxR",
                        help="after readiness, measure only C clients at once, each R rounds of /generate then /attention")
    return parser.parse_args()


def checkpoint_root(checkpoints: Path | None, random: str | None) -> tuple[Path, str]:
    """(the checkpoint root to serve, how to name it): ``checkpoints`` (default ./checkpoints), or random
    checkpoints of the size ``random`` names (shipped size where ./checkpoints holds none) with two recorded runs."""
    from explorer.models.catalog import discover_checkpoints

    root = checkpoints or REPO / "checkpoints"
    if not random and discover_checkpoints(root):
        return root, f"checkpoints in {root}"
    from support.fixtures_checkpoints import build_checkpoints, build_timeline_runs
    from training.presets import TIMELINE_MODEL

    size = random or "shipped"
    root = build_checkpoints(Path(tempfile.mkdtemp(prefix="bench-checkpoints-")),
                             **(SHIPPED_SIZE if size == "shipped" else dict(max_position_embeddings=256)))
    build_timeline_runs(root, steps=115, every=5,  # 24 snapshots, as the presets ship
                        **{k: TIMELINE_MODEL[k] for k in ("d_model", "n_heads", "n_layers", "d_ff")})
    return root, f"random checkpoints, {size} size ({'d_model=256, 4 layers, 4 heads' if size == 'shipped' else 'd_model=32'}), vocab 384"


def start_until_ready(root: Path, starts: int) -> tuple[subprocess.Popen, str, list[float], list[float]]:
    """Start `python app.py` ``starts`` times (each stopped but the last): (the last process, its url, seconds until
    each answered HTTP 200, seconds `python -c "import gradio"` took just before each)."""
    ready, import_gradio, process = [], [], None
    for i in range(starts):
        start = time.perf_counter()  # the floor under readiness: gradio's own import, on this machine, now
        subprocess.run([sys.executable, "-c", "import gradio"], check=True)
        import_gradio.append(time.perf_counter() - start)
        process, url, seconds = start_app(root)
        ready.append(seconds)
        if i < starts - 1:
            stop_app(process)
    return process, url, ready, import_gradio


def then_stop(process: subprocess.Popen, measure):
    """``measure()``, then the app stops, whether it ended or raised."""
    try:
        return measure()
    finally:
        stop_app(process)


def measure_everything(url: str, root: Path, model: str, repeats: int) -> dict:
    """Every figure after readiness, in the order they are taken, keyed as artifacts/bench_app.json holds them."""
    from gradio_client import Client

    client = Client(url, verbose=False)
    first_cold, _ = first_token_latency(client, model, seed=0)  # right after readiness: may wait for warm-up
    round_trip = []
    for _ in range(repeats):  # the cost of any request through the queue, for scale
        start = time.perf_counter()
        client.predict(api_name="/folio_example")
        round_trip.append(time.perf_counter() - start)
    warm = [first_token_latency(client, model, seed=s) for s in range(1, repeats + 1)]
    attention_latency(client, model, text_of_tokens(root, model, 128, -1))  # first use of the tab
    attention = [attention_latency(client, model, text_of_tokens(root, model, 128, i)) for i in range(repeats)]
    teaching = teaching_latencies(client, model, [text_of_tokens(root, model, 128, i) for i in range(repeats)])
    timeline = timeline_latencies(client, root, 1)
    under_load = first_token_under_long_jobs(url, client, model, repeats)
    training = first_token_while_training(url, client, model, repeats)
    return {
        "first_token_right_after_ready_s": first_cold,
        "empty_request_round_trip_median_s": statistics.median(round_trip),
        "first_token_warm_median_s": statistics.median(f for f, _ in warm),
        "tokens_per_s_median": statistics.median(r for _, r in warm),
        "attention_128_tokens_median_s": statistics.median(attention),
        "attention_128_tokens_s": attention,
        "first_token_under_two_recomputes_s": under_load,
        **training,
        **{f"{name}_128_tokens_s": values for name, values in teaching.items()},
        **{f"{name}_128_tokens_median_s": statistics.median(values) for name, values in teaching.items()},
        "training_timeline_move_s": timeline,
    }


def report_everything(figures: dict, root: Path) -> None:
    ready, import_gradio = figures["ready_s"], figures["import_gradio_alone_s"]
    under_load = figures["first_token_under_two_recomputes_s"]
    print(f"python app.py ready (HTTP 200):     median {figures['ready_median_s']:.2f} s  "
          f"({', '.join(f'{s:.2f}' for s in ready)})   target < 10 s")
    print(f"  of which `import gradio` alone:  median {statistics.median(import_gradio):.2f} s  "
          f"({', '.join(f'{s:.2f}' for s in import_gradio)})")
    print(f"first streamed token, just after ready: {figures['first_token_right_after_ready_s']:.3f} s "
          "(includes loading the model, if not yet warm)")
    print(f"first streamed token, warm:        median {figures['first_token_warm_median_s']:.3f} s   target < 1 s "
          f"({figures['tokens_per_s_median']:.0f} tokens/s)")
    print(f"a request doing nothing (/folio_example), for scale: median {figures['empty_request_round_trip_median_s']:.3f} s")
    print(f"attention tab, 128 tokens:         median {figures['attention_128_tokens_median_s']:.3f} s   target < 2 s")
    if under_load:
        print(f"first streamed token under two /recompute_extrapolation on 20,000 CJK characters: median "
              f"{statistics.median(under_load):.3f} s, worst {max(under_load):.3f} s ({len(under_load)} requests)   target < 5 s")
    else:
        print("first streamed token under two /recompute_extrapolation: not measured (the long jobs ended first)")
    report_training(figures)
    for name in TEACHING:
        values = figures[f"{name}_128_tokens_s"]
        print(f"{'/' + name + ', 128 tokens:':42}median {statistics.median(values):.3f} s   target <= 1 s "
              f"({', '.join(f'{v:.3f}' for v in values)})")
    report_timeline(figures["training_timeline_move_s"], root)


def write_figures(figures: dict, name: str) -> None:
    out = REPO / "artifacts" / name
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(figures, indent=2))
    print(f"written to {out}")


def load_shape(text: str) -> tuple[int, int]:
    """'16x4' -> (16 clients, 4 rounds each)."""
    try:
        clients, rounds = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--load takes CLIENTSxROUNDS, e.g. 16x4; got {text!r}") from None
    if clients < 1 or rounds < 1:
        raise argparse.ArgumentTypeError(f"--load needs at least 1 client and 1 round; got {text!r}")
    return clients, rounds


def report_training(figures: dict) -> None:
    alone, during = figures["first_token_alone_s"], figures["first_token_while_training_s"]
    print(f"first streamed token (8 new tokens), alone:           median {statistics.median(alone):.3f} s, worst "
          f"{max(alone):.3f} s ({len(alone)} requests)")
    if during:
        print(f"  while one default training job runs:               median {statistics.median(during):.3f} s, worst "
              f"{max(during):.3f} s ({len(during)} requests)")
    print(f"the default training job beside them: {figures['default_job_s']:.1f} s from submit to its last update "
          f"({figures['default_job_training_s']:.1f} s training); {figures['default_job_note']}")


if __name__ == "__main__":
    main()
