"""`python app.py` in a subprocess, as a user starts it, and events joined through its queue as a browser
joins them: for the tests that need a server of its own (the shipped checkpoints) and for the app benchmark."""

import json
import os
import random
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import requests

from support.local_server import free_port

REPO = Path(__file__).resolve().parents[2]
# the worst case for /recompute_extrapolation: 20,000 random CJK characters, about 60,000 byte tokens
_draw = random.Random(0)
LONG_CJK_TEXT = "".join(chr(_draw.randint(0x4E00, 0x9FFF)) for _ in range(20_000))


def start_app(root: Path, timeout: float = 180, env: dict | None = None) -> tuple[subprocess.Popen, str, float]:
    """Start `python app.py` serving the checkpoints in ``root``; return (process, url, seconds until the
    page answered HTTP 200). ``env``: more environment variables for it (a value None removes one)."""
    port = free_port()
    env = {key: value for key, value in dict(os.environ, SCRATCH_CHECKPOINTS=str(root), GRADIO_SERVER_NAME="127.0.0.1",
                                             GRADIO_SERVER_PORT=str(port), GRADIO_ANALYTICS_ENABLED="False",
                                             **(env or {})).items() if value is not None}
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "app.py"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}/"
    while time.perf_counter() - start < timeout:
        if process.poll() is not None:
            raise RuntimeError(f"app.py exited with {process.returncode}:\n{process.stdout.read()}")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return process, url, time.perf_counter() - start
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"app.py did not answer within {timeout:g} s")


def stop_app(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


class QueuedJob:
    """An event joined through the queue as the browser joins it (its own session, its own SSE stream), so
    that the test can leave it the way a closed tab leaves: by dropping the connection."""

    def __init__(self, url: str, api_name: str, data: list):
        config = requests.get(url + "config", timeout=30).json()
        fn_index = next(dep["id"] for dep in config["dependencies"] if dep["api_name"] == api_name)
        self.session = uuid.uuid4().hex
        self.steps: list[float] = []  # when each streamed update arrived
        self.started = threading.Event()  # the first update: the job is running
        self.completed = threading.Event()
        requests.post(url + "gradio_api/queue/join", json={"data": data, "fn_index": fn_index, "session_hash": self.session},
                      timeout=30).raise_for_status()
        self.stream = requests.get(url + "gradio_api/queue/data", params={"session_hash": self.session}, stream=True, timeout=300)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        try:
            for line in self.stream.iter_lines(decode_unicode=True):
                if not line or not line.startswith("data:"):
                    continue
                message = json.loads(line[len("data:"):])
                if message.get("msg") == "process_generating":
                    self.steps.append(time.monotonic())
                    self.started.set()
                elif message.get("msg") == "process_completed":
                    self.completed.set()
                    return
        except (requests.RequestException, AttributeError, ValueError):
            return  # the test closed the stream

    def leave(self):
        self.stream.close()
