"""The gradient of a weight matrix, kept as the few vectors it is made of, never written out.

A linear layer y = x Wᵀ + b that read the rows x_1..x_r (every position of every call) has the weight gradient

    ∇W L = Σ_t δ_tᵀ x_t = Δᵀ X,        Δ = ∂L/∂y  (r, out),   X  (r, in),

a sum of r outer products: rank at most r, the positions read. A token lookup y_t = s·E[id_t] (s: the embedding's
scale) is the same product with X the one-hot rows of the ids: its gradient adds s·δ_t to row id_t. Kept as (Δ, X)
and those rows (``LowRankGradient``), a matrix's gradient is r·(out + in) numbers where written out it is out·in:
for 128 tokens GPT-2 small's come to 0.15 times the model's size. Every figure the step shows comes from them as
they are:

    ‖ΔᵀX‖²           = Σ_{s,t} (ΔΔᵀ)_{st} (XXᵀ)_{st}     two r×r Gram matrices: no (out, in) matrix
    x (W − lr·ΔᵀX)ᵀ  = x Wᵀ − lr·(x Xᵀ) Δ               the stepped layer's output, W never rewritten

``FactoredGradients`` collects them on a private copy of a model (``gradient_step.private_copy``): the copy's weight
matrices take no gradient; a hook keeps each layer's input X, and the gradient Δ reaching its output. ``stepped``
then runs the copy as if every matrix had taken the step: each layer's output is given the change the step makes
to it (``LowRankGradient.output_change``, ``rows_change``), so no stepped matrix is ever made.
"""

import contextlib
from functools import cached_property

import torch
from torch import nn


class LowRankGradient:
    """∇W L of one (out, in) weight as factors: Σ Δᵀ X over the linear layers that read it (``add_product``) plus
    rows added at the ids a lookup read (``add_rows``). The figures are read once the backward pass is over."""

    def __init__(self, shape: torch.Size):
        self.shape = shape  # (out, in)
        self.products: list[tuple[torch.Tensor, torch.Tensor]] = []  # (Δ (r, out), X (r, in)) per call
        self.lookups: list[tuple[torch.Tensor, torch.Tensor]] = []  # (ids (r,), ∂L/∂E[id] (r, in)) per call

    def add_product(self, delta: torch.Tensor, inputs: torch.Tensor) -> None:
        self._forget()
        self.products.append((delta.reshape(-1, delta.shape[-1]), inputs.reshape(-1, inputs.shape[-1])))

    def add_rows(self, ids: torch.Tensor, rows: torch.Tensor) -> None:
        self._forget()
        self.lookups.append((ids.reshape(-1), rows.reshape(-1, rows.shape[-1])))

    def _forget(self) -> None:
        """Drops ``factors`` and ``rows`` as read so far: read again, they include what was just added."""
        self.__dict__.pop("factors", None)
        self.__dict__.pop("rows", None)

    @property
    def reached(self) -> bool:
        """Whether the loss reached this weight at all (else its gradient is 0 and the step leaves it)."""
        return bool(self.products or self.lookups)

    @cached_property
    def factors(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(Δ (r, out), X (r, in)): every call's rows stacked, so ΔᵀX is the products' sum; None without one."""
        if len(self.products) <= 1:  # the usual case, one call: no copy
            return self.products[0] if self.products else None
        return torch.cat([d for d, _ in self.products]), torch.cat([x for _, x in self.products])

    @cached_property
    def rows(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(ids, rows): each id read once, its rows summed (a token read twice moves its row by both); None without."""
        if not self.lookups:
            return None
        ids, rows = torch.cat([i for i, _ in self.lookups]), torch.cat([r for _, r in self.lookups])
        unique, where = ids.unique(return_inverse=True)
        return unique, torch.zeros(len(unique), rows.shape[1], dtype=rows.dtype).index_add_(0, where, rows)

    def square_sum(self) -> float:
        """‖∇W‖² = ‖ΔᵀX‖² + ‖R‖² + 2⟨ΔᵀX, R⟩ (R: the rows, at their ids), in float64 from r×r Gram matrices."""
        total = 0.0
        if self.factors is not None:
            delta, inputs = (t.double() for t in self.factors)
            total += float(((delta @ delta.T) * (inputs @ inputs.T)).sum())
        if self.rows is not None:
            ids, rows = self.rows[0], self.rows[1].double()
            total += float(rows.pow(2).sum())
            if self.factors is not None:  # the product's own rows at those ids, (ids, in): Δ[:, ids]ᵀ X
                total += 2 * float(((delta[:, ids].T @ inputs) * rows).sum())
        return total

    def block_squares(self, dim: int, span: slice, size: int) -> torch.Tensor:
        """(blocks,) ‖·‖² of each block of ``size`` rows (dim 0) or columns (dim 1) of ∇W within ``span``: rows of
        ΔᵀX are columns of Δ, its columns those of X; per block, (Δ_bΔ_bᵀ ∘ XXᵀ) summed. Products only."""
        if self.rows is not None:
            raise ValueError("block_squares reads a product's factors; this gradient has lookup rows")
        if self.factors is None:
            return torch.zeros(0, dtype=torch.float64)
        cut, whole = (t.double() for t in (self.factors if dim == 0 else self.factors[::-1]))
        blocks = cut[:, span].unflatten(1, (-1, size))  # (r, blocks, size)
        return (torch.einsum("sbi,tbi->bst", blocks, blocks) * (whole @ whole.T)).sum(dim=(1, 2))

    def output_change(self, x: torch.Tensor, rate: float) -> torch.Tensor:
        """What the step changes in a linear layer's output at inputs x (..., in): x (−rate·∇W)ᵀ, that is
        −rate·((x Xᵀ) Δ), and −rate·(x Rᵀ) in the columns of the rows' ids. Never an (out, in) matrix."""
        if self.factors is None:
            change = x.new_zeros(*x.shape[:-1], self.shape[0])
        else:
            delta, inputs = self.factors
            change = (x @ inputs.T) @ delta
        if self.rows is not None:
            ids, rows = self.rows
            change.index_add_(-1, ids, x @ rows.T)
        return change.mul_(-rate)

    def rows_change(self, ids: torch.Tensor, rate: float) -> torch.Tensor:
        """What the step changes in the rows a lookup reads at ``ids`` (..., in): −rate·∇W[ids], that is
        −rate·(Δ[:, ids]ᵀ X), plus −rate·R at the ids among the rows'."""
        flat = ids.reshape(-1)
        if self.factors is None:
            change = torch.zeros(len(flat), self.shape[1])
        else:
            delta, inputs = self.factors
            change = delta[:, flat].T @ inputs
        if self.rows is not None:
            read, rows = self.rows
            where = torch.searchsorted(read, flat).clamp(max=len(read) - 1)  # ``read`` is sorted (unique)
            change += torch.where((read[where] == flat)[:, None], rows[where], 0.0)
        return change.mul_(-rate).reshape(*ids.shape, self.shape[1])


def lookup_scale(embedding: nn.Embedding) -> float:
    """s in y = s·E[ids]: ``TokenEmbedding.scale`` (√d_model, or 1 as GPT-2); 1 for a plain ``nn.Embedding``."""
    return getattr(embedding, "scale", 1.0)


class FactoredGradients:
    """On a private copy of a model: every linear layer's weight and the token embedding take no gradient of their
    own; while the copy runs with gradients on, each keeps its input and, in the backward pass, the gradient reaching
    its output, as a ``LowRankGradient`` (``of``: id(weight) -> it; a tied weight has one, both uses added). Biases,
    norms and learned positions keep their ordinary gradients. ``remove`` takes the hooks off."""

    def __init__(self, model: nn.Module):
        self.model = model
        embedding = model.get_input_embeddings()
        self.modules = [m for m in model.modules() if isinstance(m, nn.Linear) or m is embedding]
        self.of: dict[int, LowRankGradient] = {}
        self.handles = []
        for module in self.modules:
            module.weight.requires_grad_(False)
            self.of.setdefault(id(module.weight), LowRankGradient(module.weight.shape))
            self.handles.append(module.register_forward_hook(self._lookup if module is embedding else self._linear))

    def _linear(self, module: nn.Module, inputs: tuple, output: torch.Tensor):
        gradient, x = self.of[id(module.weight)], inputs[0].detach()
        return self._keep_delta(output, lambda delta: gradient.add_product(delta, x))

    def _lookup(self, module: nn.Module, inputs: tuple, output: torch.Tensor):
        """y = s·E[ids] (``lookup_scale``): ∂L/∂E[id_t] = s·∂L/∂y_t."""
        gradient, ids, scale = self.of[id(module.weight)], inputs[0], lookup_scale(module)
        return self._keep_delta(output, lambda delta: gradient.add_rows(ids, delta * scale))

    @staticmethod
    def _keep_delta(output: torch.Tensor, keep):
        """Registers ``keep(∂L/∂output)``. An output nothing before it needs a gradient for (the token lookup, or a
        first layer reading it) is given one as a new leaf: the gradient still has to reach this layer."""
        if not torch.is_grad_enabled():
            return None
        if not output.requires_grad:
            output = output.detach().requires_grad_(True)
        output.register_hook(keep)
        return output

    def square_sums(self) -> dict[int, float]:
        """id(weight) -> ‖∇W‖², for each weight the loss reached."""
        return {key: gradient.square_sum() for key, gradient in self.of.items() if gradient.reached}

    @contextlib.contextmanager
    def stepped(self, rate: float):
        """Inside: the copy runs as if each reached weight had moved to W − rate·∇W, every module that reads it
        included (a tied LM head with its embedding): a hook adds the step's change to each module's output
        (``output_change``; a lookup's ``rows_change``, times its scale). The weights themselves are untouched."""
        embedding, handles = self.model.get_input_embeddings(), []

        def linear(module, inputs, output):
            return output + self.of[id(module.weight)].output_change(inputs[0], rate)

        def lookup(module, inputs, output):
            return output + lookup_scale(module) * self.of[id(module.weight)].rows_change(inputs[0], rate)

        for module in self.modules:
            if self.of[id(module.weight)].reached:
                handles.append(module.register_forward_hook(lookup if module is embedding else linear))
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
