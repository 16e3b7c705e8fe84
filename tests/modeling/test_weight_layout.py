"""The linear weights' memory order (``lay_out_linear_weights``): ``eval()`` stores each W (out, in) as W^T row-major
for decoding, ``train()`` back row-major; the shape, the values, the outputs (float32, within 1e-5), the saved files
(byte for byte), loading and training are the same in either order."""

import pytest
import torch
from safetensors.torch import load_file
from torch import nn
from transformers import AutoModelForCausalLM

from modeling.modeling_scratch_transformer import lay_out_linear_weights
from support.tiny_models import PAD, random_ids, tiny_causal_lm, tiny_seq2seq

GREEDY = dict(max_new_tokens=12, do_sample=False, eos_token_id=None, pad_token_id=PAD)


def linear_weights(model):
    return {name: module.weight for name, module in model.named_modules() if isinstance(module, nn.Linear)}


def laid_out_for_decoding(model) -> bool:
    """Every linear weight stored W^T row-major (strides (1, out)) and none row-major: True; all row-major: False."""
    orders = {weight.t().is_contiguous() and not weight.is_contiguous() for weight in linear_weights(model).values()}
    assert len(orders) == 1, "the linear weights are in mixed orders"
    return orders.pop()


@pytest.mark.parametrize("build", [lambda: tiny_causal_lm("learned"), lambda: tiny_causal_lm(tie_word_embeddings=False),
                                   lambda: tiny_seq2seq()], ids=["tied", "untied", "seq2seq"])
def test_eval_lays_the_weights_out_for_decoding_and_train_lays_them_back(build):
    model = build()  # tiny_* return the model after eval()
    assert laid_out_for_decoding(model)
    shapes = {name: (weight.shape, weight.clone()) for name, weight in linear_weights(model).items()}
    head = model.get_output_embeddings().weight
    assert head is model.get_input_embeddings().weight or not model.config.tie_word_embeddings
    model.train()
    assert not laid_out_for_decoding(model)
    model.eval()
    model.eval()  # a second eval() moves nothing
    assert laid_out_for_decoding(model)
    for name, weight in linear_weights(model).items():
        assert weight.shape == shapes[name][0] and torch.equal(weight, shapes[name][1]), name
    assert model.get_output_embeddings().weight is head  # still one Parameter, tied where it was


def test_greedy_tokens_and_logits_are_the_same_in_either_order():
    model, ids = tiny_causal_lm("learned"), random_ids(2, 7)
    with torch.no_grad():
        decoding = model.generate(ids, return_dict_in_generate=True, output_logits=True, **GREEDY)
        lay_out_linear_weights(model, for_decoding=False)
        assert not laid_out_for_decoding(model)
        training = model.generate(ids, return_dict_in_generate=True, output_logits=True, **GREEDY)
    assert torch.equal(decoding.sequences, training.sequences)
    for a, b in zip(decoding.logits, training.logits):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_save_pretrained_writes_the_same_bytes_in_either_order_and_loading_lays_them_out(tmp_path):
    model = tiny_causal_lm("learned")
    model.save_pretrained(tmp_path / "decoding")
    assert laid_out_for_decoding(model)  # as before the save
    model.save_pretrained(tmp_path / "given", state_dict=model.state_dict())  # as the Trainer may pass it
    model.train()
    model.save_pretrained(tmp_path / "training")
    assert not laid_out_for_decoding(model)
    files = {order: (tmp_path / order / "model.safetensors").read_bytes() for order in ("decoding", "given", "training")}
    assert files["decoding"] == files["training"] and files["given"] == files["training"]
    saved = load_file(tmp_path / "training" / "model.safetensors")
    assert {name: t.shape for name, t in saved.items()} == {
        name: t.shape for name, t in model.state_dict().items() if name != "lm_head.weight"}  # tied: stored once
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "decoding")
    assert laid_out_for_decoding(loaded)  # from_pretrained ends with eval()
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name


def test_load_state_dict_keeps_the_order_the_model_is_in():
    source, target = tiny_causal_lm("learned", seed=1), tiny_causal_lm("learned", seed=2)
    source.train()  # row-major tensors into a model laid out for decoding
    target.load_state_dict(source.state_dict())
    assert laid_out_for_decoding(target)
    for name, tensor in source.state_dict().items():
        assert torch.equal(target.state_dict()[name], tensor), name


def train_steps(model, optimizer, ids, steps: int, decode_between: bool):
    """``steps`` AdamW steps on ``ids``; with ``decode_between``, an eval() and a greedy generation between steps, as
    the Trainer's evaluation and the live-training view's samples do."""
    for _ in range(steps):
        model.train()
        loss = model(ids, labels=ids).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if decode_between:
            model.eval()
            with torch.no_grad():
                model.generate(ids[:1, :3], **GREEDY)
    model.train()


@pytest.mark.parametrize("optimizer", ["foreach", "fused"])
def test_training_with_evaluations_between_steps_trains_as_without(optimizer):
    ids, results = random_ids(2, 9), []
    for decode_between in (False, True):
        model = tiny_causal_lm("learned")
        adamw = torch.optim.AdamW(model.parameters(), lr=1e-2, **{optimizer: True})
        train_steps(model, adamw, ids, 3, decode_between)
        for parameter in model.parameters():
            assert adamw.state[parameter]["exp_avg"].stride() == parameter.stride()
        results.append(model.state_dict())
    for name, tensor in results[0].items():
        assert torch.equal(results[1][name], tensor), name


@pytest.mark.usefixtures("fresh_compiler")  # tests/conftest.py
def test_a_compiled_model_trains_and_decodes_in_either_order():
    """torch.compile'd training with evaluations between its steps (the order changing under the compiled graphs)
    ends where eager training without them does, and the compiled forward gives eager's logits in both orders."""
    ids, eager, model = random_ids(2, 9), tiny_causal_lm("learned"), tiny_causal_lm("learned")
    compiled = torch.compile(model, backend="aot_eager")
    train_steps(eager, torch.optim.AdamW(eager.parameters(), lr=1e-2, foreach=True), ids, 2, decode_between=False)
    train_steps(compiled, torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True), ids, 2, decode_between=True)
    for name, tensor in eager.state_dict().items():
        torch.testing.assert_close(model.state_dict()[name], tensor, atol=1e-6, rtol=0)
    for mode in ("eval", "train"):
        getattr(compiled, mode)()
        getattr(eager, mode)()
        assert laid_out_for_decoding(model) == (mode == "eval")
        with torch.no_grad():
            torch.testing.assert_close(compiled(ids).logits, eager(ids).logits, atol=1e-5, rtol=0)
