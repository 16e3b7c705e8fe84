"""The linear weights' memory order (``lay_out_linear_weights``): ``generate`` (eval mode, CPU, not distributed)
stores each W (out, in) as W^T row-major for decoding, ``train()`` back row-major; the shape, the values, the outputs
(float32, within 1e-5), the saved files (byte for byte), loading and training are the same in either order."""

import pytest
import torch
from safetensors.torch import load_file
from torch import nn
from transformers import AutoModelForCausalLM

from support.tiny_models import PAD, random_ids, tiny_causal_lm, tiny_seq2seq

GREEDY = dict(max_new_tokens=12, do_sample=False, eos_token_id=None, pad_token_id=PAD)


def linear_weights(model):
    return {name: module.weight for name, module in model.named_modules() if isinstance(module, nn.Linear)}


def laid_out_for_decoding(model) -> bool:
    """Every linear weight stored W^T row-major (strides (1, out)) and none row-major: True; all row-major: False."""
    orders = {weight.t().is_contiguous() and not weight.is_contiguous() for weight in linear_weights(model).values()}
    assert len(orders) == 1, "the linear weights are in mixed orders"
    return orders.pop()


def decode(model, ids=None):
    ids = random_ids(2, 5) if ids is None else ids
    with torch.no_grad():
        if model.config.is_encoder_decoder:
            return model.generate(ids, decoder_start_token_id=1, return_dict_in_generate=True, output_logits=True,
                                  **GREEDY)
        return model.generate(ids, return_dict_in_generate=True, output_logits=True, **GREEDY)


@pytest.mark.parametrize("build", [lambda: tiny_causal_lm("learned"), lambda: tiny_causal_lm(tie_word_embeddings=False),
                                   lambda: tiny_seq2seq()], ids=["tied", "untied", "seq2seq"])
def test_generate_lays_the_weights_out_for_decoding_and_train_lays_them_back(build):
    model = build()  # tiny_* return the model after eval(): eval() alone moves nothing
    assert not laid_out_for_decoding(model)
    before = {name: weight.clone() for name, weight in linear_weights(model).items()}
    head = model.get_output_embeddings().weight
    decode(model)
    assert laid_out_for_decoding(model)
    pointers = {name: weight.data_ptr() for name, weight in linear_weights(model).items()}
    decode(model)  # a second generate moves nothing
    assert pointers == {name: weight.data_ptr() for name, weight in linear_weights(model).items()}
    for name, weight in linear_weights(model).items():
        assert weight.shape == before[name].shape and torch.equal(weight, before[name]), name
    assert model.get_output_embeddings().weight is head  # still one Parameter, tied where it was
    if model.config.tie_word_embeddings:
        assert model.get_input_embeddings().weight is head
    model.train()
    assert not laid_out_for_decoding(model)
    model.eval()
    assert not laid_out_for_decoding(model)


def test_greedy_tokens_and_logits_are_the_same_in_either_order():
    model, ids = tiny_causal_lm("learned"), random_ids(2, 7)
    model.train()  # dropout is 0: the same function; generate leaves training's order alone
    training = decode(model, ids)
    assert not laid_out_for_decoding(model)
    model.eval()
    decoding = decode(model, ids)
    assert laid_out_for_decoding(model)
    assert torch.equal(decoding.sequences, training.sequences)
    for a, b in zip(decoding.logits, training.logits):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_a_distributed_run_keeps_nn_linears_order(tmp_path):
    """DistributedDataParallel built around weights laid out for decoding trained them wrong (gloo, two processes:
    0.058 from the reference against 0.003): inside a process group generate moves nothing."""
    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        model = tiny_causal_lm("learned")
        decode(model)
        assert not laid_out_for_decoding(model)
    finally:
        torch.distributed.destroy_process_group()


def test_save_pretrained_writes_the_same_bytes_in_either_order(tmp_path):
    model = tiny_causal_lm("learned")
    model.save_pretrained(tmp_path / "training")
    decode(model)
    model.save_pretrained(tmp_path / "decoding")
    assert laid_out_for_decoding(model)  # as before the save
    model.save_pretrained(tmp_path / "given", state_dict=model.state_dict())  # as the Trainer may pass it
    files = {order: (tmp_path / order / "model.safetensors").read_bytes() for order in ("decoding", "given", "training")}
    assert files["decoding"] == files["training"] and files["given"] == files["training"]
    saved = load_file(tmp_path / "decoding" / "model.safetensors")
    assert {name: t.shape for name, t in saved.items()} == {
        name: t.shape for name, t in model.state_dict().items() if name != "lm_head.weight"}  # tied: stored once
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "decoding")
    assert not laid_out_for_decoding(loaded)
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name


def test_load_state_dict_keeps_the_order_the_model_is_in():
    source, target = tiny_causal_lm("learned", seed=1), tiny_causal_lm("learned", seed=2)
    decode(target)
    target.load_state_dict(source.state_dict())  # row-major tensors into a model laid out for decoding
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
        if mode == "eval":
            decode(model)
        assert laid_out_for_decoding(model) == (mode == "eval")
        with torch.no_grad():
            torch.testing.assert_close(compiled(ids).logits, eager(ids).logits, atol=1e-5, rtol=0)
