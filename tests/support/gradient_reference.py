"""One SGD step computed the plain way, for the gradient step's tests to check against: every gradient written out by
torch.autograd on a fresh copy of the parameters, the update by hand, the loss after through functional_call."""

import torch
from torch.func import functional_call


def reference_step(model, ids, position, target_id, rate):
    """(loss before, loss after, {name: ∇}, {name: θ − rate·∇}) for −log p(target | ids[0..position])."""
    params = {name: p.detach().clone().float().requires_grad_(True) for name, p in model.named_parameters()}
    context = ids[:, : position + 1]
    target = torch.tensor([target_id])
    loss = torch.nn.functional.cross_entropy(functional_call(model, params, (context,)).logits[:, -1], target)
    grads = dict(zip(params, torch.autograd.grad(loss, list(params.values()))))
    updated = {name: params[name].detach() - rate * grads[name] for name in params}
    with torch.no_grad():
        after = torch.nn.functional.cross_entropy(functional_call(model, updated, (context,)).logits[:, -1], target)
    return float(loss.detach()), float(after), grads, updated
