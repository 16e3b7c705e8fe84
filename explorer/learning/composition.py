"""K-composition over training: how much a later head's induction score depends on an earlier head, at every
snapshot of a training run (the lowest plot of Watch it learn).
"""

from checkpointing.in_context import INDUCTION_LENGTH, induction_scores
from checkpointing.training_run import TIMELINE_FILE
from modeling import ablate_heads, record

from explorer.learning.training_runs import TrainingRun, file_key, snapshot_model
from explorer.core.caches import LRUCache

COMPOSITIONS = LRUCache(8)  # (timeline.json, its mtime and size) -> every pair's composition at every snapshot


def composition_scores(model, length: int = INDUCTION_LENGTH) -> dict[tuple[int, int, int, int], float]:
    """{(l1, h1, l2, h2): how much head h2 of layer l2 loses of its induction score when head h1 of an earlier
    layer l1 is removed}, for every such pair: the standard score (``checkpointing.in_context.induction_scores``).

    K-composition (Elhage et al. 2021) asks whether h2's keys read what h1 wrote. The weight-based form,
    ‖W_QK^h2ᵀ W_OV^h1‖_F / (‖W_QK^h2‖_F ‖W_OV^h1‖_F), assumes one W_QK per head; under RoPE W_QK depends on the
    offset, so it is measured on the probe instead: h2's induction score with every head, minus its score with h1's
    output removed (zeroed before W_O, ``modeling.ablate_heads``). A pair that forms the circuit scores near h2's
    whole score; an unrelated pair near 0."""
    config = model.config
    base = induction_scores(model, length)
    out = {}
    for l1 in range(config.n_layers - 1):
        for h1 in range(config.n_heads):
            with record(keep=lambda site: False, edits=ablate_heads("decoder", "self", [(l1, h1)], config.n_layers,
                                                                     config.n_heads)):
                ablated = induction_scores(model, length)
            for l2 in range(l1 + 1, config.n_layers):
                for h2 in range(config.n_heads):
                    out[(l1, h1, l2, h2)] = float(base[l2, h2] - ablated[l2, h2])
    return out


def run_composition(run: TrainingRun, final) -> dict[tuple[int, int, int, int], list[float]]:
    """``composition_scores`` at every snapshot of ``run``: {pair: one score per snapshot}; computed once per run."""
    def measure():
        per_snapshot = [composition_scores(snapshot_model(run, i, final)) for i in range(len(run.snapshots))]
        return {pair: [scores[pair] for scores in per_snapshot] for pair in per_snapshot[0]}

    return COMPOSITIONS.get(file_key(run.info.path / TIMELINE_FILE), measure)
