"""The gradient step's weight matrices: their gradients kept as factors (``factored_gradient``), checked against
autograd's written-out gradients on models of every kind the step opens; no matrix takes a gradient of its own."""

import copy
import math

import pytest
import torch
from torch.func import functional_call

from explorer.learning.factored_gradient import FactoredGradients, LowRankGradient
from explorer.learning.gradient_step import gradient_step, private_copy
from support.gradient_reference import reference_step
from support.shipped import shipped
from support.tiny_models import tiny_causal_lm

TOLERANCE = 1e-5
# two float32 computations of one d_model-128 gradient, summed in different orders (autograd's dense one and the
# factors): measured at most 6e-6 apart, of the largest entry and of the sum of squares, with one torch thread
# (1e-6 with two); a wrong formula is off by a whole term
FLOAT32_ORDER = 5e-5
TEXT = "O Romeo, Romeo! wherefore art thou Romeo?"  # "Romeo" read three times: its embedding row moved by each
TARGET = " thy"

KINDS = {  # every block the converters produce, and the paper's
    "gpt2": dict(position_encoding="learned", scale_embeddings=False, activation="gelu_new"),
    "llama": dict(position_encoding="rope", norm="rmsnorm", feed_forward="gated", activation="silu", bias=False,
                  n_kv_heads=2, scale_embeddings=False, tie_word_embeddings=False),
    "pythia": dict(position_encoding="rope", rotary_fraction=0.25, parallel_residual=True, scale_embeddings=False,
                   tie_word_embeddings=False),
    "paper": dict(position_encoding="sinusoidal", norm_first=False, activation="relu"),  # scaled by sqrt(d_model)
}


@pytest.fixture(scope="module")
def tokenizer():
    return shipped("shakespeare-main")[1]


@pytest.fixture(scope="module")
def ids(tokenizer):
    ids = tokenizer(TEXT, return_tensors="pt", add_special_tokens=False).input_ids
    assert len(set(ids[0].tolist())) < ids.shape[1]  # a token read more than once
    return ids


@pytest.fixture(scope="module")
def target(tokenizer):
    (target,) = tokenizer(TARGET, add_special_tokens=False).input_ids
    return target


def model_of(kind, tokenizer, **sizes):
    return tiny_causal_lm(seed=7, vocab_size=len(tokenizer), **KINDS[kind], **sizes)


def backward(learner, ids, target):
    """The step's loss, −log p(target | ids), through the copy, and its backward pass."""
    with torch.enable_grad():
        (-torch.log_softmax(learner(ids, logits_to_keep=1).logits[0, -1], -1)[target]).backward()


def dense(gradient: LowRankGradient, embedding: bool) -> torch.Tensor:
    """∇W written out, through the step's own reading of it: a lookup of every row, or the change at the identity."""
    out, width = gradient.shape
    if embedding:
        return -gradient.rows_change(torch.arange(out), 1.0)
    return -gradient.output_change(torch.eye(width), 1.0).T


@pytest.mark.parametrize("kind", KINDS)
def test_the_factors_are_autograds_gradient_and_no_matrix_takes_one(kind, tokenizer, ids, target):
    """Every linear layer's and the token embedding's gradient, written out from its factors, is autograd's (to
    FLOAT32_ORDER of its largest entry), its sum of squares too;
    none of them got a .grad of its own; at d_model 128 the factors of all of them take less memory than a quarter
    of the matrices (they grow with the tokens read times the widths, the matrices with the widths' product)."""
    model = model_of(kind, tokenizer, d_model=128, d_ff=256)
    _, _, grads, _ = reference_step(model, ids, ids.shape[1] - 1, target, 0.1)
    learner = private_copy(model)
    factored = FactoredGradients(learner)
    backward(learner, ids, target)
    factored.remove()
    names = {id(p): name for name, p in learner.named_parameters()}
    embedding = learner.get_input_embeddings().weight
    assert len(factored.of) == sum(isinstance(m, torch.nn.Linear) for m in learner.modules()) + (kind in ("llama", "pythia"))
    kept = 0
    for key, gradient in factored.of.items():
        weight = next(p for p in learner.parameters() if id(p) == key)
        assert weight.grad is None and not weight.requires_grad
        expected = grads[names[key]]
        torch.testing.assert_close(dense(gradient, weight is embedding), expected, rtol=0,
                                   atol=FLOAT32_ORDER * float(expected.abs().max()))
        assert gradient.square_sum() == pytest.approx(float(expected.double().pow(2).sum()), rel=FLOAT32_ORDER)
        kept += sum(t.numel() for pair in gradient.products + gradient.lookups for t in pair)
    matrices = sum(p.numel() for p in learner.parameters() if id(p) in factored.of)
    assert kept < matrices / 4


@pytest.mark.parametrize("kind", KINDS)
def test_the_stepped_model_is_the_one_with_its_weights_moved(kind, tokenizer, ids, target):
    """Run with the step's changes added to each layer's output (``FactoredGradients.stepped``), the copy gives the
    logits, at every position, of the model whose weights were moved by −lr·∇ (autograd's, through functional_call),
    to 1e-5 of the largest (float32 both ways); outside the block its matrices are the ones it had."""
    model, rate = model_of(kind, tokenizer), 0.05
    _, after, _, updated = reference_step(model, ids, ids.shape[1] - 1, target, rate)
    learner = private_copy(model)
    factored = FactoredGradients(learner)
    backward(learner, ids, target)
    factored.remove()
    small = {name: p for name, p in learner.named_parameters() if p.requires_grad}
    for name, p in small.items():  # the small parameters take an ordinary step (SteppedInBackward's, by hand here)
        p.data = p.detach() - rate * p.grad
    with torch.no_grad(), factored.stepped(rate):
        stepped = learner(ids).logits
    expected = functional_call(model, updated, (ids,)).logits
    torch.testing.assert_close(stepped, expected, rtol=TOLERANCE, atol=TOLERANCE * float(expected.abs().max()))
    assert not torch.allclose(model(ids).logits, expected, atol=1e-3)  # the step changed something to check
    with torch.no_grad():
        torch.testing.assert_close(learner(ids).logits, functional_call(model, {**dict(model.named_parameters()),
                                   **{n: p.detach() for n, p in small.items()}}, (ids,)).logits)


@pytest.mark.parametrize("kind", KINDS)
def test_every_figure_of_the_step_is_autograds(kind, tokenizer, ids, target):
    """gradient_step end to end on each kind: the losses, every tensor's gradient norm, the whole norm, to 1e-5. At
    0.05 each loss falls by 3 to 5 nats, and the two ways differ by at most 2e-6 (one torch thread or two); at 0.5,
    past the minimum, float32's rounding in either way alone moves the loss after by 2e-5."""
    model, rate, position = model_of(kind, tokenizer), 0.05, ids.shape[1] - 1
    loss, after, grads, _ = reference_step(model, ids, position, target, rate)
    result = gradient_step(TEXT, model, tokenizer, position, TARGET, rate)
    assert result.loss_before == pytest.approx(loss, abs=TOLERANCE)
    assert result.loss_after == pytest.approx(after, abs=TOLERANCE) and after != pytest.approx(loss, abs=1e-3)
    for name, g in grads.items():
        assert result.grad_norms[name] == pytest.approx(float(g.double().norm()), rel=TOLERANCE, abs=1e-7), name
    whole = math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads.values()))
    assert result.grad_norm == pytest.approx(whole, rel=TOLERANCE)


def test_a_low_rank_gradients_figures_are_the_written_out_ones():
    """Two products on one weight (a layer called twice) and rows at repeated ids (a tied lookup): the sum of squares,
    cross term included, and each block's, are the written-out gradient's in float64 (to 1e-10; 1e-6 once float32
    rows at one id are summed)."""
    generator = torch.Generator().manual_seed(0)
    gradient = LowRankGradient(torch.Size((12, 8)))
    written = torch.zeros(12, 8, dtype=torch.float64)
    for rank in (3, 5):
        delta, x = torch.randn(rank, 12, generator=generator), torch.randn(rank, 8, generator=generator)
        gradient.add_product(delta, x)
        written += delta.double().T @ x.double()
    assert gradient.block_squares(0, slice(4, 12), 4).tolist() == pytest.approx(
        [float(written[r:r + 4].pow(2).sum()) for r in (4, 8)], rel=1e-10)
    assert gradient.block_squares(1, slice(None), 2).tolist() == pytest.approx(
        [float(written[:, c:c + 2].pow(2).sum()) for c in range(0, 8, 2)], rel=1e-10)
    ids, rows = torch.tensor([3, 7, 3]), torch.randn(3, 8, generator=generator)
    gradient.add_rows(ids, rows)
    written.index_add_(0, ids, rows.double())
    assert gradient.square_sum() == pytest.approx(float(written.pow(2).sum()), rel=1e-6)
    torch.testing.assert_close(dense(gradient, embedding=True), written.float(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(dense(gradient, embedding=False), written.float(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="lookup rows"):
        gradient.block_squares(0, slice(None), 4)


def test_the_shared_model_and_its_hooks_are_left_as_they_were(tokenizer):
    """The copy's matrices are frozen and hooked, never the shared model's; after the step no hook is left on the
    copy either (its forward is the plain one again)."""
    model = model_of("llama", tokenizer)
    hooks = {name: dict(m._forward_hooks) for name, m in model.named_modules()}
    learner = copy.deepcopy(model)
    gradient_step(TEXT, model, tokenizer, -1, TARGET, 0.5)
    assert all(p.requires_grad for p in model.parameters())
    assert {name: dict(m._forward_hooks) for name, m in model.named_modules()} == hooks
    factored = FactoredGradients(private_copy(learner))
    factored.remove()
    with factored.stepped(0.5):
        pass
    assert not any(m._forward_hooks for m in factored.model.modules())
