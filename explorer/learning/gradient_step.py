"""One plain gradient step, on a copy of a shared model: where learning pushes, and what one step changes.

For a text, a position t and a target token y, the loss is the negative log-probability the model gives y after
reading tokens 0..t:

    L(θ) = −log softmax(logits(θ; x_0..x_t))[y]

Its gradient ∇θL has one entry per weight: how much L rises when that weight rises a little. One step of plain
stochastic gradient descent moves every weight against it,

    θ ← θ − lr · ∇θL,

so for a small learning rate the loss changes by about −lr·‖∇θL‖² (the first-order term of its Taylor series,
``predicted_loss_change``; ‖∇θL‖ is the norm of the whole gradient, every weight once); a large one overshoots.
The step is taken on a private copy (``private_copy``): the shared model, which other requests read, never changes.
The copy reads the shared model's weights. Its weight matrices' gradients are kept as the vectors they are made of
(``factored_gradient``: they grow with the tokens read, not with each matrix's size), and the model after the step is
the copy with each layer's output given the change the step makes to it; no stepped matrix is made. The few small
parameters (biases, norms, learned positions) take ordinary gradients, each moved as it completes
(``SteppedInBackward``). Tied weights (where the model ties them: the token embedding, which is then also the LM
head) are one tensor, so one gradient (the sum of both uses) and one update, as ``parameters()`` and
``state_dict()`` see them.
"""

import copy
import math
from dataclasses import dataclass, field

import numpy as np
import torch

from explorer.learning.factored_gradient import FactoredGradients
from explorer.views.architecture import Architecture, describe
from explorer.views.heads import THRESHOLD, cached_induction_scores
from explorer.core.inputs import MAX_TEXT_CHARS, InputProblem, echo, number, pick, require_text
from explorer.generation.model_ids import model_ids
from explorer.generation.labels import token_labels
from explorer.generation.tokens import FORWARD_MAX_TOKENS, one_token

MAX_LEARNING_RATE = 100.0  # enough to watch a step overshoot (50 diverges); more only shows the same blow-up
TOP_TOKENS = 10
HEAD_PARTS = ("q", "k", "v", "o")  # a head's rows of W_Q, W_K, W_V (and their biases; k, v per key/value head), its columns of W_O


@dataclass
class GradientStep:
    """What one SGD step did. ``grad_norms``: the L2 norm of the gradient of every parameter tensor, by its
    state_dict name (a tied name carries the one tensor's norm; ``tied`` maps it to the name it shares);
    ``head_grad_norms[part]``: (layers, heads) norms of each head's slice, part in q, o and "all" (everything the
    head uses), (layers, key/value heads) for k and v; ``shapes``: every parameter's shape by its state_dict name;
    ``architecture``: what the model is, to name each parameter (``Architecture.tensor_meaning``);
    ``grad_norm``: ‖∇L‖ of the whole gradient (each tensor once: the tied weight once);
    ``induction_head``: (layer, head, score) of the model's best induction head on the probe when it reaches
    ``THRESHOLD``, else None."""

    tokens: list[str]  # labels of the tokens read, 0..position
    target: str
    target_id: int
    learning_rate: float
    loss_before: float
    loss_after: float
    p_before: float
    p_after: float
    top_before: list[tuple[str, float]]
    top_after: list[tuple[str, float]]
    grad_norms: dict[str, float]
    head_grad_norms: dict[str, list[list[float]]]
    grad_norm: float = 0.0
    tied: dict[str, str] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)
    induction_head: tuple[int, int, float] | None = None
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    architecture: Architecture | None = None

    @property
    def predicted_loss_change(self) -> float:
        """−lr·‖∇L‖²: the first-order change of the loss, exact as lr → 0."""
        return -self.learning_rate * self.grad_norm**2

    @property
    def loss_change(self) -> float:
        return self.loss_after - self.loss_before

    def to_json(self) -> dict:
        return {
            "tokens": self.tokens, "target": self.target, "target_id": self.target_id,
            "learning_rate": self.learning_rate,
            "loss_before": self.loss_before, "loss_after": self.loss_after,
            "p_before": self.p_before, "p_after": self.p_after,
            "top_before": [[t, p] for t, p in self.top_before], "top_after": [[t, p] for t, p in self.top_after],
            "grad_norms": self.grad_norms, "head_grad_norms": self.head_grad_norms, "tied": self.tied,
            "grad_norm": self.grad_norm, "predicted_loss_change": self.predicted_loss_change,
            "induction_head": list(self.induction_head) if self.induction_head else None,
        }


def check_model(model) -> None:
    """Only decoder-only models predict the next token of one text; an encoder-decoder reads two."""
    if model.config.is_encoder_decoder:
        name = str(getattr(model.config, "_name_or_path", "") or "this model").rstrip("/").rsplit("/", 1)[-1]
        raise InputProblem(f"One gradient step works on decoder-only models (shakespeare-main and the "
                           f"shakespeare-<encoding> models); {echo(name)} is an encoder-decoder, which reads a "
                           "source text and writes another.")


def check_learning_rate(value) -> float:
    allowed = f"greater than 0, at most {MAX_LEARNING_RATE:g}"
    rate = number(value, "The learning rate", allowed)
    if not 0 < rate <= MAX_LEARNING_RATE:
        raise InputProblem(f"The learning rate must be {allowed}; got {echo(value)}.")
    return rate


def target_token(tokenizer, target, vocab_size: int) -> tuple[int, list[str]]:
    """(the id of ``target``, notices): exactly one token, checked as every answer is (``tokens.one_token``: the
    leading-space hint, and a notice when a word typed without its space is another token than with it)."""
    return one_token(tokenizer, target, "The target", vocab_size)


def induction_head(model) -> tuple[int, int, float] | None:
    """(layer, head, score) of the head with the highest induction score on the probe
    (``explorer.views.heads.cached_induction_scores``, measured once per model), when it reaches THRESHOLD; else None."""
    scores, _ = cached_induction_scores(model)
    layer, head = np.unravel_index(int(np.argmax(scores)), scores.shape)
    best = float(scores[layer, head])
    return (int(layer), int(head), best) if best >= THRESHOLD else None


def text_ids(model, tokenizer, text) -> torch.Tensor:
    """(1, T) ids of the text; a text longer than the step reads is an InputProblem stating the bound."""
    limit = min(FORWARD_MAX_TOKENS, model.config.position_limit or FORWARD_MAX_TOKENS)
    if isinstance(text, str) and len(text) > MAX_TEXT_CHARS:  # refused before tokenizing it
        raise InputProblem(f"The text is {len(text):,} characters; one gradient step reads at most {limit} tokens "
                           f"(a few hundred characters). Shorten it.")
    cleaned, _ = require_text(text, "a text")
    ids = model_ids(tokenizer, cleaned, model.config.vocab_size, "The text", special_tokens=False)
    if ids.shape[1] > limit:
        raise InputProblem(f"The text is {ids.shape[1]} tokens; one gradient step reads at most {limit}. Shorten it.")
    if ids.shape[1] == 0:
        raise InputProblem("The text has no tokens; type a text first.")
    return ids


def _next_token(model, ids: torch.Tensor) -> torch.Tensor:
    """log p(· | ids): (vocab,) log-probabilities of the token after the last one (the LM head reads the last
    position alone: ``logits_to_keep=1``; the loss depends on no other position's logits)."""
    return torch.log_softmax(model(ids, use_cache=False, logits_to_keep=1).logits[0, -1].float(), dim=-1)


def _top(tokenizer, log_probs: torch.Tensor, k: int = TOP_TOKENS) -> list[tuple[str, float]]:
    probs, ids = log_probs.exp().topk(k)
    return list(zip(token_labels(tokenizer, ids), [float(p) for p in probs]))


def head_squares(arch: Architecture, part_of: str, grad: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per head, the sum of squares of its slice of one attention parameter's gradient: ``part_of`` "qkv" (W_QKV or
    b_QKV: q, k, v from their rows, ``Architecture.qkv_rows``, in blocks of d_head; k and v per key/value head) or "o"
    (W_O: a head's output is a block of its input columns)."""
    if part_of == "o":
        grads = {"o": grad.T}
    else:
        rows = arch.qkv_rows()
        grads = {part: grad[rows[part].start:rows[part].stop] for part in "qkv"}
    return {part: g.float().reshape(arch.n_heads if part in "qo" else arch.n_kv_heads, arch.d_head, -1).pow(2).sum(dim=(1, 2))
            for part, g in grads.items()}


def head_grad_norms(model, squares: list[dict[str, torch.Tensor]]) -> dict[str, np.ndarray]:
    """(layers, heads) gradient norms of each head's slice from ``squares`` (per layer, ``head_squares`` summed over
    the layer's weight and bias): rows h·d_head..(h+1)·d_head of W_Q (and b_Q), the same columns of W_O; (layers,
    key/value heads) of W_K, W_V (and their biases), one column per key/value head. "all" (layers, heads): the norm
    of everything head h uses, its slices of W_Q and W_O and the W_K, W_V slices of the key/value head it reads
    (shared by its group: a grouped model counts them in each of its query heads)."""
    arch = describe(model)
    grids = {part: torch.stack([layer[part] for layer in squares]).numpy() for part in HEAD_PARTS}
    reads = [arch.kv_head_of(h) for h in range(arch.n_heads)]  # the key/value head each query head reads
    everything = grids["q"] + grids["o"] + grids["k"][:, reads] + grids["v"][:, reads]
    return {part: np.sqrt(grid) for part, grid in grids.items()} | {"all": np.sqrt(everything)}


def square_sum(tensor: torch.Tensor) -> float:
    """Σ x², summed in float64: the gradients summed this way (biases, norms, learned positions) are small; a weight
    matrix's comes from its factors (``LowRankGradient.square_sum``)."""
    return float(torch.linalg.vector_norm(tensor, dtype=torch.float64)) ** 2


def private_copy(model):
    """A float32 copy of ``model`` in eval mode (no dropout: the step is deterministic) whose parameters are new
    leaf tensors that read the shared model's float32 weights in place, not copies of them (a weight in another dtype
    is converted, so copied). Its modules, buffers and ties are its own; nothing the step does writes the memory it
    shares (``SteppedInBackward`` gives a parameter new memory as it moves it; ``FactoredGradients.stepped`` changes
    layers' outputs, never their weights)."""
    leaves = {id(p): torch.nn.Parameter(p.detach().float(), requires_grad=True) for p in model.parameters()}
    return copy.deepcopy(model, memo=leaves).float().eval()


def attention_parameters(model) -> dict[int, tuple[int, str]]:
    """id(parameter) -> (layer, "qkv" or "o") for each attention parameter a head owns slices of: W_QKV and b_QKV
    (its rows), W_O (its columns)."""
    found = {}
    for layer, block in enumerate(model.model.decoder.stack.layers):
        for parameter in (block.self_attn.qkv_proj.weight, block.self_attn.qkv_proj.bias):
            if parameter is not None:
                found[id(parameter)] = (layer, "qkv")
        found[id(block.self_attn.out_proj.weight)] = (layer, "o")
    return found


class SteppedInBackward:
    """Plain SGD taken during ``backward`` for each parameter that takes a gradient, one at a time: as soon as its
    gradient is complete (its post-accumulate-grad hook), what the views show of it is measured (the sum of its
    squares, each head's slices), then the gradient's memory is overwritten with θ − lr·∇θL and becomes the
    parameter's (the old value, which a ``private_copy`` shares with the shared model, is left as it was). So the step
    holds no gradient beside the moved parameters. A parameter is moved only once every operation that read it has
    had its backward (its gradient is complete only then), so no saved value is changed under autograd.
    ``squares``: id(parameter) -> Σ∇²; ``head``: per layer, the head parts' ``head_squares`` summed."""

    def __init__(self, model, rate: float):
        self.rate, self.squares, self.arch = rate, {}, describe(model)  # read once, not in every hook
        self.head = [{part: torch.zeros(self.arch.n_heads if part in "qo" else self.arch.n_kv_heads, dtype=torch.float64)
                      for part in HEAD_PARTS} for _ in model.model.decoder.stack.layers]
        self.attention = attention_parameters(model)
        self.handles = [p.register_post_accumulate_grad_hook(self.step) for p in model.parameters() if p.requires_grad]

    @torch.no_grad()
    def step(self, parameter: torch.Tensor) -> None:
        grad = parameter.grad
        self.squares[id(parameter)] = square_sum(grad)
        if id(parameter) in self.attention:
            layer, part_of = self.attention[id(parameter)]
            self.add_heads(layer, head_squares(self.arch, part_of, grad))
        torch.add(parameter, grad, alpha=-self.rate, out=grad)  # θ − lr·∇, written over ∇: no new memory
        parameter.grad = None
        parameter.data = grad  # rebinds this parameter alone; the memory it read before is untouched

    def add_heads(self, layer: int, squares: dict[str, torch.Tensor]) -> None:
        for part, values in squares.items():
            self.head[layer][part] += values.double()

    def add_factored(self, factored: FactoredGradients) -> None:
        """The weight matrices' figures, from their factors (``FactoredGradients``): each one's Σ∇², and each head's
        slices of W_QKV (rows, in blocks of d_head) and W_O (columns)."""
        self.squares |= factored.square_sums()
        rows = self.arch.qkv_rows()
        for key, (layer, part_of) in self.attention.items():
            gradient = factored.of.get(key)
            if gradient is None or not gradient.reached:
                continue
            if part_of == "o":
                self.add_heads(layer, {"o": gradient.block_squares(1, slice(None), self.arch.d_head)})
            else:
                self.add_heads(layer, {part: gradient.block_squares(0, slice(rows[part].start, rows[part].stop), self.arch.d_head)
                                       for part in "qkv"})

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def gradient_step(text, model, tokenizer, position, target, learning_rate) -> GradientStep:
    """One SGD step on a copy of ``model`` for the loss −log p(target | tokens 0..position of text).

    position: a token index of the text (−1: the last). The shared model is only read."""
    check_model(model)
    rate = check_learning_rate(learning_rate)
    ids = text_ids(model, tokenizer, text)
    position = pick(position, ids.shape[1], "position")
    target_id, notices = target_token(tokenizer, target, model.config.vocab_size)
    ids = ids[:, : position + 1]

    learner = private_copy(model)
    names = {id(p): name for name, p in learner.named_parameters()}
    state = learner.state_dict(keep_vars=True)
    tied = {name: names[id(t)] for name, t in state.items() if id(t) in names and names[id(t)] != name}
    shapes = {name: tuple(t.shape) for name, t in state.items() if id(t) in names}
    found = induction_head(model)  # the shared model's (the learner is its copy)

    factored = FactoredGradients(learner)  # first: the weight matrices take no gradient of their own
    stepping = SteppedInBackward(learner, rate)
    try:
        with torch.enable_grad():
            before = _next_token(learner, ids)
            loss = -before[target_id]
            loss.backward()  # the matrices' factors kept; the small parameters moved as their gradients complete
    finally:
        stepping.remove()
        factored.remove()
    stepping.add_factored(factored)
    before, loss = before.detach(), loss.detach()
    # a parameter the loss does not reach has no gradient: norm 0, and it is not moved
    grad_norms = {name: math.sqrt(stepping.squares.get(id(t), 0.0)) for name, t in state.items() if id(t) in names}
    grad_norm = math.sqrt(sum(stepping.squares.values()))  # ‖∇L‖² = Σ over tensors, each once
    heads = head_grad_norms(learner, stepping.head)

    with torch.no_grad(), factored.stepped(rate):
        after = _next_token(learner, ids)

    return GradientStep(
        tokens=token_labels(tokenizer, ids[0]), target=target, target_id=target_id, learning_rate=rate,
        loss_before=float(loss), loss_after=float(-after[target_id]),
        p_before=float(before[target_id].exp()), p_after=float(after[target_id].exp()),
        top_before=_top(tokenizer, before), top_after=_top(tokenizer, after),
        grad_norms=grad_norms, head_grad_norms={part: grid.tolist() for part, grid in heads.items()},
        grad_norm=grad_norm, tied=tied, notices=notices, induction_head=found, shapes=shapes,
        architecture=describe(model),
    )
