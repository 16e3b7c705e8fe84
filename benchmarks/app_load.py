"""The app under load: C clients at once, each running R rounds of (/generate, then /attention on the text it got).

    python -m benchmarks.app_latency --load 16x4    # 16 clients x 4 rounds, on ./checkpoints' default model

Each client is a ``gradio_client.Client`` of its own (its own session), in a thread of its own; all start at one
moment. A client's request is fixed: its prompt (one of ``PROMPTS``, by client number), sampling at the Generate
tab's settings with the client's number as the seed, ``MAX_NEW_TOKENS`` new tokens. Before the load, every
client's request is made once ALONE (the solo run); under load, every round's text must equal it.

Printed per endpoint: p50, p95 and max of the seconds from submit to the final answer, split into the wait in
gradio's queue (submit to the server's ``process_starts`` message) and the rest (the handler running, and the
answer's way back); then the failures (a raised error or a status line starting with a warning) and whether
every seeded text equals its solo run.
"""

import queue
import statistics
import threading
import time
from dataclasses import dataclass, field

PROMPTS = ["Shall I compare thee to a summer's day?", "To be, or not to be, that is the question:",
           "Now is the winter of our discontent", "Friends, Romans, countrymen, lend me your ears;"]
MAX_NEW_TOKENS = 64
SAMPLING = ("Sampling", 0.8, 40, 0.95, 1.1)  # mode, temperature, top-k, top-p, repetition penalty


def generate_args(client_number: int, model: str) -> tuple:
    """The /generate arguments of client ``client_number``: its prompt, sampling, its number as the seed."""
    return (PROMPTS[client_number % len(PROMPTS)], model, *SAMPLING, MAX_NEW_TOKENS, client_number)


@dataclass
class Timing:
    """One request: seconds from submit to the server starting it (queued) and to its final answer (total)."""

    queued: float
    total: float


def timed(client, *args, api_name: str) -> tuple[tuple, Timing]:
    """(the final outputs, the timing) of one request; raises if the app answered with an error or a warning."""
    from gradio_client.utils import Status

    submitted, start = time.time(), time.perf_counter()
    job = client.submit(*args, api_name=api_name)
    outputs = job.result(timeout=600)
    total = time.perf_counter() - start
    began, updates = None, job.communicator.updates  # every status message, each stamped when it arrived
    while began is None:
        try:
            update = updates.get_nowait()
        except queue.Empty:
            break
        if getattr(update, "code", None) == Status.PROCESSING:
            began = update.time.timestamp()
    queued = began - submitted if began is not None else float("nan")
    if str(outputs[-1]).startswith("⚠️"):
        raise RuntimeError(f"{api_name}: {outputs[-1]}")
    return outputs, Timing(queued, total)


@dataclass
class LoadRecord:
    """What the load produced: per endpoint its timings, the failures, and each client's generated texts."""

    timings: dict[str, list[Timing]] = field(default_factory=lambda: {"/generate": [], "/attention": []})
    failures: list[str] = field(default_factory=list)
    texts: dict[int, list[str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


def one_client(url: str, number: int, model: str, rounds: int, go: threading.Barrier, record: LoadRecord) -> None:
    from gradio_client import Client

    client = Client(url, verbose=False)
    go.wait()
    for _ in range(rounds):
        try:
            (text, _), generated = timed(client, *generate_args(number, model), api_name="/generate")
            _, attended = timed(client, text, model, "self", "0", "average", api_name="/attention")
        except Exception as error:  # noqa: BLE001 - counted and reported
            with record.lock:
                record.failures.append(f"client {number}: {error}")
            continue
        with record.lock:
            record.timings["/generate"].append(generated)
            record.timings["/attention"].append(attended)
            record.texts.setdefault(number, []).append(text)


def percentile(values: list[float], q: int) -> float:
    """The q-th percentile (inclusive interpolation between the closest ranks)."""
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def run_load(url: str, model: str, clients: int, rounds: int) -> dict:
    """The solo run, then the load; the figures as a dict (see the module's docstring)."""
    from gradio_client import Client

    solo_client = Client(url, verbose=False)
    solo = {n: timed(solo_client, *generate_args(n, model), api_name="/generate")[0][0] for n in range(clients)}
    record, go = LoadRecord(), threading.Barrier(clients + 1)
    threads = [threading.Thread(target=one_client, args=(url, n, model, rounds, go, record), daemon=True)
               for n in range(clients)]
    for thread in threads:
        thread.start()
    go.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    differing = [n for n, texts in record.texts.items() if any(text != solo[n] for text in texts)]
    figures = {"clients": clients, "rounds": rounds, "wall_s": wall, "failures": record.failures,
               "requests": {name: len(values) for name, values in record.timings.items()},
               "differing_from_solo": differing}
    for name, values in record.timings.items():
        for part in ("total", "queued"):
            numbers = [getattr(t, part) for t in values]
            if numbers:
                figures[f"{name}_{part}_s"] = {"p50": percentile(numbers, 50), "p95": percentile(numbers, 95),
                                               "max": max(numbers)}
    return figures


def report_load(figures: dict) -> None:
    print(f"load: {figures['clients']} clients x {figures['rounds']} rounds of (/generate {MAX_NEW_TOKENS} tokens, "
          f"then /attention on its text); {figures['wall_s']:.1f} s in all")
    for name in ("/generate", "/attention"):
        total, queued = figures.get(f"{name}_total_s"), figures.get(f"{name}_queued_s")
        if total:
            print(f"  {name + ':':12} p50 {total['p50']:.2f} s   p95 {total['p95']:.2f} s   max {total['max']:.2f} s   "
                  f"(of which queued: p50 {queued['p50']:.2f} s, p95 {queued['p95']:.2f} s)   "
                  f"{figures['requests'][name]} answered   target p95 <= 4 s")
    print(f"  failures: {len(figures['failures'])}" + "".join(f"\n    {f}" for f in figures["failures"][:5]))
    differing = figures["differing_from_solo"]
    print("  seeded texts equal to the solo run: " + ("all" if not differing else f"NO, clients {differing}"))
