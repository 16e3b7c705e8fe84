"""A ``Patching`` result of any size, every cell one value, for the tests of its figures and text (they read its
shape, labels and metrics only; the numbers of real runs are tested in tests/explorer/views/test_patching*.py)."""

import numpy as np

from explorer.views.patching.analysis import Patching, PatchGrid
from explorer.views.patching.grids import GRIDS

LONG_TOKEN = "␣extraordinarily"  # a token label longer than a tick label shows (present.figures.TICK_CHARS)


def sized_result(n_layers: int, n_tokens: int, n_heads: int = 4, clean: float = 3.0, corrupted: float = -1.0,
                 values: float = 0.5) -> Patching:
    """Every grid of a model of ``n_layers`` x ``n_heads`` on ``n_tokens`` tokens (every third one long)."""
    tokens = [LONG_TOKEN if p % 3 == 0 else "␣a" for p in range(n_tokens)]
    grids = {}
    for name, kind in GRIDS.items():
        rows, columns = kind.row_labels(n_layers, n_heads), kind.columns(tokens)
        shape = (len(rows), len(columns))
        grids[name] = PatchGrid(name, kind.title, rows, columns, np.full(shape, values, dtype=np.float32),
                                np.zeros((*shape, 5), dtype=np.int64), np.zeros((*shape, 5), dtype=np.float32))
    return Patching(tokens=tokens, corrupted_tokens=list(tokens), changed=[0, n_tokens // 2], answer="␣a",
                    wrong_answer="␣b", answer_id=1, wrong_id=2, clean_metric=clean, corrupted_metric=corrupted,
                    clean_top=[], corrupted_top=[], grids=grids, n_heads=n_heads, labels=lambda ids: [])
