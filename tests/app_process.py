"""`python app.py` in a subprocess, as a user starts it: for the tests that need a server of its own (the
shipped checkpoints) and for the app benchmark."""

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from local_server import free_port

REPO = Path(__file__).resolve().parent.parent


def start_app(root: Path, timeout: float = 180) -> tuple[subprocess.Popen, str, float]:
    """Start `python app.py` serving the checkpoints in ``root``; return (process, url, seconds until the
    page answered HTTP 200)."""
    port = free_port()
    env = dict(os.environ, SCRATCH_CHECKPOINTS=str(root), GRADIO_SERVER_NAME="127.0.0.1", GRADIO_SERVER_PORT=str(port),
               GRADIO_ANALYTICS_ENABLED="False")
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
