"""explorer.core.machine.give_memory_back: memory one thread frees is reused by the others instead of staying in a heap
of its own, as the app needs when its threads load and drop models for visitors (each case runs in a fresh
interpreter: the setting is the process's)."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

# 8 threads, alive together, take turns: each takes 30 MB in 100 KB blocks and a small block after them, then frees
# the 30 MB and keeps the small one. Prints the MB the process still holds of the 240 MB taken and freed.
EIGHT_THREADS_FREE_30_MB_EACH = """
import sys, threading, psutil
from explorer.core import machine
if sys.argv[1] == "set":
    assert machine.give_memory_back()
process, turns, done, pins = psutil.Process(), [threading.Event() for _ in range(9)], threading.Event(), []
def thread(n):
    turns[n].wait()
    blocks = [bytearray(100_000) for _ in range(300)]
    pins.append(bytearray(1_000))
    del blocks
    turns[n + 1].set()
    done.wait()
threads = [threading.Thread(target=thread, args=(n,)) for n in range(8)]
base = process.memory_info().rss
for t in threads:
    t.start()
turns[0].set()
turns[8].wait()
print((process.memory_info().rss - base) / 2**20)
done.set()
"""


def kept_mb(setting: str) -> float:
    out = subprocess.run([sys.executable, "-c", EIGHT_THREADS_FREE_30_MB_EACH, setting], cwd=REPO, capture_output=True,
                         text=True, check=True, timeout=120)
    return float(out.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator: Linux only")
def test_memory_freed_by_one_thread_is_reused_by_the_next_once_the_app_sets_the_allocator():
    assert kept_mb("set") < 40  # 2 heaps: each thread reuses what the ones before it freed (13 MB measured)
    assert kept_mb("default") > 60  # heaps of their own: several keep their 30 MB (100 MB measured)


def test_leaving_side_by_side_early_drops_the_work_not_started():
    """An error in the loop (a Deadline) frees the cores after the items running, not after all of them."""
    import threading

    from explorer.core.machine import side_by_side

    started, lock = [], threading.Lock()

    def work(item):
        with lock:
            started.append(item)
        if item > 0:
            threading.Event().wait(0.5)  # busy while the loop below stops: no worker is free to start another
        return item * 2

    with side_by_side(work, list(range(5)), workers=2) as results:
        assert list(results) == [0, 2, 4, 6, 8]  # in order, all of them
    started.clear()
    with pytest.raises(RuntimeError):
        with side_by_side(work, list(range(40)), workers=2) as results:
            for value in results:
                raise RuntimeError("stop")
    # item 0, item 1 (running), and item 2 if the worker freed by item 0 took it up before the loop stopped (a race
    # either way): never the 37 others
    assert sorted(started) in ([0, 1], [0, 1, 2])


def test_a_deadline_stops_work_past_its_time_or_bound_to_run_far_past_it():
    from explorer.core import machine
    from explorer.core.inputs import InputProblem

    deadline = machine.Deadline("The runs", "use a shorter text", seconds=10)
    deadline.check(0.001)  # under SETTLED_SECONDS: the pace is not trusted yet
    deadline.started -= 3  # 3 s in
    deadline.check(0.1)  # on pace for 30 s: past 10 s, but under PACE_MARGIN (4) times it; the time itself will tell
    with pytest.raises(machine.OverBudget) as stopped:
        deadline.check(0.05)  # on pace for 60 s: past 4 x 10
    assert isinstance(stopped.value, InputProblem)  # the app shows it as a message, what to do included
    assert "The runs stopped after 3.0 s, 5% done" in str(stopped.value) and "about 60 s" in str(stopped.value)
    assert "may hold the cores for 10 s." in str(stopped.value)
    assert str(stopped.value).endswith("for the exact answer, use a shorter text.")
    deadline.started -= 8  # 11 s in: past the time itself, whatever the pace
    with pytest.raises(machine.OverBudget):
        deadline.check(0.95)
    calls = []
    watching = machine.Deadline("The runs", "shorten it", seconds=10).watching(lambda f, d: calls.append((f, d)))
    watching(0.5, "half")
    assert calls == [(0.5, "half")]  # checked, then passed on


def test_the_operator_may_give_exact_answers_another_time(monkeypatch):
    from explorer.core import machine
    from explorer.core.settings import EXACT_SECONDS

    monkeypatch.delenv(EXACT_SECONDS.env, raising=False)
    assert machine.Deadline("x", "y").seconds == EXACT_SECONDS.default == 60
    monkeypatch.setenv(EXACT_SECONDS.env, "600")
    assert machine.Deadline("x", "y").seconds == 600
    monkeypatch.setenv(EXACT_SECONDS.env, "an hour")
    assert machine.Deadline("x", "y").seconds == 60  # unreadable: the default
