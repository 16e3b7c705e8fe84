"""The operator's settings: read when used, a malformed value warned about once and never lifting a limit, and every
default written in docs/safety.md as it is in the code."""

import logging
import re
from pathlib import Path

import pytest

from explorer.core import machine, settings
from explorer.core.settings import EXACT_SECONDS, HUB_MAX_BYTES, HUB_STALL_SECONDS, UPLOAD_DISK
from explorer.generation.tokens import FORWARD_MAX_TOKENS
from explorer.models import hub_cache, jobs, plans, registry

SAFETY = (Path(__file__).resolve().parents[3] / "docs" / "safety.md").read_text()


@pytest.fixture(autouse=True)
def forget_warnings(monkeypatch):
    monkeypatch.setattr(settings, "_warned", set())


def test_a_setting_is_read_when_it_is_used(monkeypatch):
    monkeypatch.delenv(HUB_MAX_BYTES.env, raising=False)
    assert HUB_MAX_BYTES.value() == 1_000_000_000 and plans.limits()["bytes"] == 1_000_000_000
    monkeypatch.setenv(HUB_MAX_BYTES.env, "2.5e8")
    assert HUB_MAX_BYTES.value() == 250_000_000 and isinstance(HUB_MAX_BYTES.value(), int)
    assert plans.limits()["bytes"] == 250_000_000 and plans.file_cap("model.safetensors") == 250_000_000
    monkeypatch.setenv(HUB_STALL_SECONDS.env, "2.5")
    assert HUB_STALL_SECONDS.value() == 2.5  # seconds keep their fraction
    monkeypatch.setenv(EXACT_SECONDS.env, "0")
    assert machine.Deadline("x", "y").seconds == 0  # 0 is allowed: every exact run stops at its first look


@pytest.mark.parametrize("given", ["1GB", "-1", "inf", "nan", "1e400"])
def test_a_malformed_value_keeps_the_default_and_is_warned_about_once(monkeypatch, caplog, given):
    """Text, a negative number, infinity or NaN never lifts a limit nor raises (int(float('inf')) used to raise
    OverflowError at every open); the log names the variable, the value and the default that holds."""
    monkeypatch.setenv(HUB_MAX_BYTES.env, given)
    monkeypatch.setenv(UPLOAD_DISK.env, given)
    with caplog.at_level(logging.WARNING, logger="app"):
        assert plans.limits()["bytes"] == HUB_MAX_BYTES.default
        assert HUB_MAX_BYTES.value() == HUB_MAX_BYTES.default and UPLOAD_DISK.value() == UPLOAD_DISK.default
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"SCRATCH_HUB_MAX_BYTES={given!r} is not a number of at least 0 (bytes); the default 1 GB holds",
                        f"SCRATCH_UPLOAD_DISK={given!r} is not a number of at least 0 (bytes); the default 6 GB holds"]


def test_an_empty_value_is_unset(monkeypatch, caplog):
    monkeypatch.setenv(EXACT_SECONDS.env, " ")
    with caplog.at_level(logging.WARNING, logger="app"):
        assert EXACT_SECONDS.value() == 60
    assert not caplog.records


def test_how_a_setting_reads():
    assert [s.shown(s.default) for s in settings.EVERY] == [
        "60 s", "200M", "1 GB", "2 GB", "5 GB", "20 s", "6 GB", "2.2 GB", "1800 s"]
    assert settings.megabytes(178_300_000) == "178 MB"


@pytest.mark.parametrize("setting", settings.EVERY, ids=lambda s: s.env)
def test_docs_safety_gives_every_setting_its_default(setting):
    """docs/safety.md writes each one as `NAME` (default ...): a default changed in the code must change there."""
    assert re.search(rf"`{setting.env}` \({re.escape(setting.shown(setting.default))}[ )]", SAFETY), setting.env


def test_docs_safety_gives_the_other_bounds_as_the_code_has_them():
    words = {2: "two", 3: "three", 4: "four"}
    assert f"At most {jobs.MAX_JOBS} Hub jobs run at once, and at most {jobs.MAX_JOBS_PER_VISITOR} started by one" in SAFETY
    assert f"under {jobs.FLOOR_BYTES // 1000} KB" in SAFETY
    assert f"at most {FORWARD_MAX_TOKENS} tokens" in SAFETY
    assert f"take {words[machine.PACE_MARGIN]} times that" in SAFETY
    assert f"({words[registry.LOAD_PEAK_WEIGHTS]} times its weights" in SAFETY
    assert f"keeps glibc to {words[machine.ARENAS]} heaps" in SAFETY
    assert f"not measured yet (its last request a visitor, for {hub_cache.KEEP_SECONDS // 60} minutes at most)" in SAFETY
