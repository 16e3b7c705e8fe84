"""explorer.models.registry: before a model loads, room is made for what the load takes at its peak (the model as
read, ours converted from it, the file's pages: ``LOAD_PEAK_WEIGHTS`` times its weights), not for its weights alone:
RSS stays within the bound plus the app's baseline while models load (the figures: benchmarks/hub_memory.py)."""

from collections import OrderedDict

import pytest

from explorer.models import catalog, registry


@pytest.mark.parametrize("spare, a_stays", [(-1, False), (0, True)])
def test_a_load_gets_room_for_its_peak_before_it_starts(tiny_checkpoints, monkeypatch, spare, a_stays):
    monkeypatch.setattr(registry, "_held", OrderedDict())  # this test's own memory: the suite's models stay
    found = catalog.discover_checkpoints(tiny_checkpoints)
    a, b = found["shakespeare-rope"], found["shakespeare-alibi"]
    monkeypatch.setenv("SCRATCH_HUB_MEMORY", str(10**12))
    registry.shipped_model(a)
    a_bytes = registry.held_bytes()[registry.shipped_key(a)]
    peak = registry.load_peak_bytes(b.n_parameters, b.path)
    at_rest = 4 * b.n_parameters
    assert peak >= registry.LOAD_PEAK_WEIGHTS * at_rest > at_rest > 0
    monkeypatch.setenv("SCRATCH_HUB_MEMORY", str(a_bytes + peak + spare))  # both fit at rest either way
    registry.shipped_model(b)
    held = registry.held_bytes()
    assert registry.shipped_key(b) in held
    assert (registry.shipped_key(a) in held) == a_stays
    assert sum(held.values()) <= a_bytes + peak + spare
