"""The exact grids (each cell run from its first patched layer and position, batched) equal every cell run alone
from the embeddings (the corrupted text's full pass with that cell's patches as edits), on tiny models of every
family: ours with each position encoding, post-norm, and converted GPT-2, Llama (grouped-query) and GPT-NeoX
(parallel residual). Tolerance 1e-5 on the logit difference."""

import numpy as np
import pytest
import torch

from explorer.views.forward_pass import recorded_pass
from explorer.views.patching.analysis import activation_patching, logit_difference
from explorer.views.patching.grids import GRIDS
from explorer.views.patching.runs import patch_edits
from modeling import ScratchTransformerForCausalLM, record
from modeling.convert import from_transformers
from support.fixtures_checkpoints import checkpoint_config, train_tokenizer
from support.hub_repos import tiny_transformers_model

TOLERANCE = 1e-5
CLEAN = "Shall I compare thee to a summer's day? Thou art more lovely and more temperate. Shall I compare"
CORRUPTED = "Shall I shall thee to a summer's day? Thou art more lovely and more temperate. Shall I shall"


def ours(encoding, **overrides):
    torch.manual_seed(0)
    return ScratchTransformerForCausalLM(checkpoint_config(train_tokenizer(), encoding, initializer_range=0.2,
                                                           **overrides)).eval()


FAMILIES = {
    "rope": lambda: ours("rope"), "alibi": lambda: ours("alibi"), "learned": lambda: ours("learned"),
    "sinusoidal": lambda: ours("sinusoidal"), "post-norm": lambda: ours("sinusoidal", norm_first=False),
    **{name: (lambda n=name: from_transformers(tiny_transformers_model(n)).eval()) for name in ("gpt2", "llama", "gpt_neox")},
}


@pytest.mark.parametrize("family", FAMILIES)
def test_every_cell_equals_its_run_from_the_embeddings(family):
    model, tokenizer = FAMILIES[family](), train_tokenizer()
    result = activation_patching(model, tokenizer, CLEAN, CORRUPTED)
    clean = recorded_pass(model, tokenizer, CLEAN)
    ids = tokenizer(CORRUPTED, return_tensors="pt").input_ids
    config, length = model.config, ids.shape[1]
    for name, grid in result.grids.items():
        cells = GRIDS[name].cells(config.n_layers, config.n_heads, length)
        values = {patch.site: clean.recording[patch.site] for cell in cells for patch in cell}
        reference = []
        for cell in cells:
            with torch.inference_mode(), record(keep=lambda s: False, edits=patch_edits([cell], values)):
                logits = model(input_ids=ids, use_cache=False).logits[0, -1].float()
            reference.append(float(logit_difference(logits, result.answer_id, result.wrong_id)))
        patched = grid.values.ravel() * (result.clean_metric - result.corrupted_metric) + result.corrupted_metric
        assert np.abs(patched - np.array(reference)).max() < TOLERANCE, (family, name)
