"""The app under long jobs, as a probe of it found it: `python app.py` on the shipped checkpoints, two
/recompute_extrapolation requests on 20,000 CJK characters in flight, and a user who clicks Generate.

The waits below wait on events (a message from the server, a job's state); the one bound on time is the
goal itself (a /generate streams within 5 s), measured while both long jobs are shown to be in flight.
"""

import time

import pytest
from gradio_client import Client

from support.app_process import LONG_CJK_TEXT, REPO, QueuedJob, start_app, stop_app

FIRST_TOKEN_GOAL_S = 5.0


@pytest.fixture(scope="module")
def shipped_app():
    process, url, _ = start_app(REPO / "checkpoints")
    try:
        client = Client(url, verbose=False)  # both calls wait for the models the background warm-up loads
        client.predict("Shall I", "shakespeare-main", "Greedy", 1, 0, 1, 1, 2, 0, api_name="/generate")
        client.predict("Shall I compare thee to a summer's day? " * 20, api_name="/recompute_extrapolation")
        yield url
    finally:
        stop_app(process)


def test_generate_streams_within_5_s_while_two_long_jobs_are_in_flight_and_leaving_frees_them(shipped_app):
    first = QueuedJob(shipped_app, "recompute_extrapolation", [LONG_CJK_TEXT])
    second = QueuedJob(shipped_app, "recompute_extrapolation", [LONG_CJK_TEXT])
    assert first.started.wait(120), "the first long job never started"
    while len(first.steps) < 3:  # a few (length, model) steps done: it is busy scoring
        assert not first.completed.wait(0.05)
    client = Client(shipped_app, verbose=False)
    prompt = "Shall I compare thee to a summer's day?"
    start = time.monotonic()
    job = client.submit(prompt, "shakespeare-main", "Sampling", 0.8, 40, 0.95, 1.1, 8, 0, api_name="/generate")
    while not job.outputs() or job.outputs()[-1][0] == prompt:  # wait for the first generated token
        assert not job.done() or job.outputs(), "generate ended without output"
        time.sleep(0.01)
    first_token = time.monotonic() - start
    in_flight = not first.completed.is_set() and not second.completed.is_set()
    assert in_flight, "a long job ended before the measurement: it would prove nothing"
    assert first_token < FIRST_TOKEN_GOAL_S, f"first generated token after {first_token:.1f} s"
    assert job.result(timeout=60)[1].startswith("- Done: **8 tokens**")

    # both clients leave (as a closed tab does); the long jobs must stop, freeing their slot at once
    unit = min(b - a for a, b in zip(first.steps[1:], first.steps[2:]))  # the quickest step of the first job
    remaining = 2 + 4 * 5 - len(first.steps)  # steps it had left
    second.leave()
    first.leave()
    left = time.monotonic()
    third = QueuedJob(shipped_app, "recompute_extrapolation", ["Shall I compare thee to a summer's day? " * 20])
    assert third.started.wait(120)
    waited = time.monotonic() - left
    # the slot (concurrency 1) came free long before the first job could have finished its remaining steps
    print(f"first token {first_token:.2f} s; after leaving, the slot came free in {waited:.2f} s (steps left {remaining}, quickest step {unit:.2f} s)")
    assert waited < remaining * unit / 2, f"waited {waited:.1f} s; the first job had {remaining} steps of >= {unit:.2f} s left"
    assert third.completed.wait(120)
    third.leave()
