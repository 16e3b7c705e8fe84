"""The cost of removing each head, to first order (Michel et al. 2019): every head at once from one backward pass.

Give each head a mask m_h = 1 multiplying its output o_h (the ablation's edit sets it to 0). The loss L changes by
about dL/dm_h · (0 - 1) = -(o_h · dL/do_h): the first-order term of writing 0 - o_h into the head's output, summed
over its positions and d_head. One forward and one backward pass of the text give it for every head
(``first_order.site_gradients`` at each layer's "heads" site). It misses what is not linear: a removed head's
effect on later attention patterns (a softmax that saturates), on the norms, and on later heads that copy it.
"""

import numpy as np
import torch

from explorer.generation.decoding import DecodingSettings
from explorer.views.ablation import HeadRanking, prepare
from explorer.views.first_order import site_gradients


def estimate_head_ranking(model, tokenizer, text: str, kind: str = "self",
                          decoding: DecodingSettings = DecodingSettings(False)) -> HeadRanking:
    """``ablation.rank_heads``' increase of the loss, every head estimated at once: -(o_h · dL/do_h)."""
    attention, run, losses = prepare(model, tokenizer, text, kind, decoding)
    sites = [attention.site(layer, "heads") for layer in range(attention.n_layers(model.config))]

    targets = run.read.target_ids[1:].clone()  # made under inference_mode: a copy autograd can save

    def mean_loss(logits):  # ``ablation.token_losses``, with those targets
        return torch.nn.functional.cross_entropy(logits[0, :-1].float(), targets)

    gradients = site_gradients(model, run.read.inputs, sites, mean_loss)
    increase = np.stack([-(run.recording[site][0] * gradients[site][0]).sum((1, 2)).double().numpy() for site in sites])
    return HeadRanking(attention.name, float(losses.mean()), increase, list(run.read.notices))
