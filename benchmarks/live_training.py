"""How long live training takes, and whether an induction head forms within a budget.

    python -m benchmarks.live_training --threads 1                       # the default job, start to final result
    python -m benchmarks.live_training --threads 1 --budget 60 --set preset=induction
        # one trial: the given settings, steps up to the bound, stopped (through the stop Event) after --budget s
    python -m benchmarks.live_training --threads 1 --against-bare --set preset=induction --set steps=300
        # the tab's step against a bare PyTorch loop (forward, backward, AdamW) on the same model and batches

Prints one JSON line: wall seconds, steps done, steps per second, the loss at the first and last logged step,
the best induction score (varying offsets, ``explorer.learning.live_snapshots.least_induction_score_over_offsets``) at every snapshot,
and the step and second at which it first reached ``--threshold``. ``--threads`` sets torch's threads (the
machine is shared: 1 keeps a trial to one core).
"""

import argparse
import json
import threading
import time
from dataclasses import replace

import torch

from checkpointing.in_context import attention_weights, induction_probe, induction_scores_from
from explorer.learning.live_data import SPECIAL_IDS, LiveData
from explorer.learning.live_model import build_model
from explorer.learning.live_result import LiveResult
from explorer.learning.live_settings import LIMITS, check_settings
from explorer.learning.live_snapshots import Snapshot, probe_lengths
from explorer.learning.train_live import train_live


def value(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def bare_loop(settings, batches: list[dict]) -> float:
    """Seconds for a plain loop over ``batches`` on a fresh model of ``settings``: forward, backward, AdamW step
    (the tab's optimizer: torch's AdamW, no weight decay, every parameter)."""
    model = build_model(settings, settings.vocab_size).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate, weight_decay=0.0)
    started = time.perf_counter()
    for batch in batches:
        loss = model(**batch, use_cache=False).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return time.perf_counter() - started


def against_bare(settings, rounds: int = 3) -> dict:
    """The tab's job (``train_live``: its AdamW loop in a thread, data drawn as it goes, one snapshot at the end)
    and the bare loop, alternated ``rounds`` times so that both see the same load; the best of each, per step."""
    settings = replace(settings, log_every=settings.steps, sample_tokens=0)
    data = LiveData(settings, None).batches()
    batches = [next(data) for _ in range(settings.steps)]
    tab, bare = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        for item in train_live(settings):
            pass
        tab.append(time.perf_counter() - started)
        bare.append(bare_loop(settings, batches))
    tab_ms, bare_ms = 1000 * min(tab) / settings.steps, 1000 * min(bare) / settings.steps
    return {"tab_ms_per_step": round(tab_ms, 2), "bare_ms_per_step": round(bare_ms, 2),
            "tab_speed_over_bare": round(bare_ms / tab_ms, 3), "rounds": rounds, "steps": settings.steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--budget", type=float, default=None, help="seconds; stop the job then (a trial)")
    parser.add_argument("--threshold", type=float, default=0.3)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--against-bare", action="store_true", help="time the tab's step against a bare loop")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    values = {name: value(v) for name, v in (item.split("=", 1) for item in args.set)}
    if args.budget is not None and "preset" not in values:
        values.setdefault("steps", LIMITS["steps"][1])
    settings = check_settings(**dict(values))
    if args.against_bare:
        if settings.data != "random-repeats":
            parser.error("--against-bare times random tokens (--set data=random-repeats or preset=induction)")
        print(json.dumps({"settings": values, "threads": args.threads, **against_bare(settings)}))
        return
    stop = threading.Event()
    if args.budget is not None:
        threading.Timer(args.budget, stop.set).start()
    started = time.perf_counter()
    curve, first = [], None
    for item in train_live(settings, stop):
        if isinstance(item, Snapshot):
            best = max(map(max, item.induction))
            curve.append([item.step, round(item.seconds, 1), round(item.loss, 3), round(best, 3)])
            if first is None and best >= args.threshold:
                first = {"step": item.step, "seconds": round(item.seconds, 1)}
        else:
            result: LiveResult = item
    wall = time.perf_counter() - started
    stop.set()
    # the best head's score at each probe offset apart (a head copying at one fixed offset scores at one only)
    best = divmod(int(torch.tensor(result.induction).argmax()), settings.n_heads)
    by_offset = {}
    for length in probe_lengths(settings.context_length):
        ids = induction_probe(result.model.config.vocab_size, length, seed=7, skip=SPECIAL_IDS)
        by_offset[length] = round(float(induction_scores_from(attention_weights(result.model, ids), length)[best]), 3)
    print(json.dumps({
        "settings": values, "threads": args.threads, "wall_s": round(wall, 1), "steps": result.steps_done,
        "steps_per_s": round(result.steps_done / wall, 1), "first_loss": result.losses[0] if result.losses else None,
        "last_loss": result.losses[-1] if result.losses else None,
        "final_best_induction": round(max(map(max, result.induction)), 3), "reached": first,
        "best_head": best, "best_head_by_offset (fresh probes)": by_offset,
        "curve [step, s, loss, best induction]": curve,
    }))


if __name__ == "__main__":
    main()
