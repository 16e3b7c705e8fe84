"""explorer/present/train_live: the probe's attention map keeps its height and sits below its title, however long the
reason for the head shown is (the title is hung and wrapped by ``figures.wrapped_title``)."""

import numpy as np

from explorer.learning.live_snapshots import Sample, Snapshot
from explorer.present import figures
from explorer.present.train_live import PROBE_PLOT_PX, probe_attention_figure

SWITCHED = ("L1.H1 now scores a little higher (0.03); the plot moves to another head only once it is ahead by 0.05 or "
            "more, so it does not flicker between two close heads")  # the longest reason Train one yourself gives


def snapshot(watched: str) -> Snapshot:
    attention = np.tril(np.ones((64, 64))) / np.arange(1, 65)[:, None]
    return Snapshot(step=300, steps=300, seconds=1.0, logged_steps=[0], losses=[8.0], sample=Sample([], []),
                    probe=list(range(64)), layer=0, head=0, attention=attention.tolist(), induction=[[0.0]],
                    induction_baseline=0.0, watched=watched)


def test_the_probe_map_sits_below_a_title_of_any_length():
    """Before, six title lines were drawn in a top margin of 168 px, centred on it: the last two lay over the map
    at 800 px, whose plot kept 152 px."""
    for watched in ("the best induction head (score 0.02)", SWITCHED):
        fig = probe_attention_figure(snapshot(watched))
        title, top = figures.wrapped_title(f"L0.H0: {watched}", "on the probe: random tokens, twice")
        lines = fig.layout.title.text.count("<br>") + 1
        assert fig.layout.title.yanchor == "top" and fig.layout.title.yref == "container"
        assert fig.layout.margin.t == top >= figures.LABEL_ROOM + figures.TITLE_LINE * (lines - 1) + figures.DETAIL_LINE
        assert fig.layout.height - fig.layout.margin.t - fig.layout.margin.b == PROBE_PLOT_PX
