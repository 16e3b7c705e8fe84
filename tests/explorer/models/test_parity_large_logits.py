"""A model whose logits are large opens as transformers' model, not as "a conversion error": float32 rounding grows
with the size of the numbers, so the parity gap is judged against the logits' size (``explorer.core.parity``).

The model: a GPT-2 (d 256, 2 layers) with weights 7 times the initial size, one feed-forward writing 3000 into the
residual stream (trained GPT-2 carries values of that size in a few dimensions) and a final norm's gain of 30: its
logits reach 173 and ours differ from transformers' by 4.3e-4 (2.5e-6 of them), above the absolute bound of 1e-4 that
read it as a conversion error."""

import pytest
import torch

from explorer.core.parity import PARITY_TOLERANCE
from explorer.core.visitor import Visitor, visiting
from explorer.models import opening
from support import hub_repos


@pytest.fixture(scope="module")
def large_logits(tmp_path_factory):
    model, tok = hub_repos.scaled_gpt2(7, n_embd=256, n_layer=2, n_head=4, n_positions=64)
    with torch.no_grad():
        model.transformer.h[0].mlp.c_proj.bias[3] = 3000.0
        model.transformer.wte.weight.add_(-2.5)
        model.transformer.ln_f.weight.mul_(30)
    folder = tmp_path_factory.mktemp("large-logits")
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def test_large_logits_open_as_float_rounding(large_logits):
    with visiting(Visitor("visitor-large-logits")):
        opened = opening.open_folder(large_logits, "large", "upload")
    parity = opened.parity
    assert parity.size > 100
    assert parity.relative <= PARITY_TOLERANCE / 10  # measured 2.5e-6
    assert parity.rounding and "float rounding" in opened.label and "conversion error" not in opened.label
