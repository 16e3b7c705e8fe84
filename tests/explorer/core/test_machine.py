"""explorer.core.machine.give_memory_back: memory a process frees goes back to the system, as the app needs when it
loads and drops models for its visitors (each case runs in a fresh interpreter: the setting is the process's)."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

# Frees 16 MB (glibc then serves buffers up to that size from its heap), takes 8 buffers of 16 MB and a small one
# after them, frees the 8 and keeps the small one: prints the MB the process still holds of the 128 freed.
FREES_128_MB = """
import sys, psutil, torch
from explorer.core import machine
if sys.argv[1] == "set":
    assert machine.give_memory_back()
process = psutil.Process()
first = torch.ones(4_000_000)
del first
base = process.memory_info().rss
buffers = [torch.ones(4_000_000) for _ in range(8)]
pin = torch.ones(1_000)
del buffers
print((process.memory_info().rss - base) / 2**20)
"""


def kept_mb(setting: str) -> float:
    out = subprocess.run([sys.executable, "-c", FREES_128_MB, setting], cwd=REPO, capture_output=True, text=True,
                         check=True, timeout=120)
    return float(out.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator: Linux only")
def test_freed_buffers_go_back_to_the_system_once_the_app_sets_the_allocator():
    assert kept_mb("set") < 8  # each 16 MB buffer mapped on its own and unmapped when freed
    assert kept_mb("default") > 64  # glibc's default keeps them in its heap, behind the small buffer
