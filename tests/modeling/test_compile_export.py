"""Static cache, torch.compile and torch.export: generate(cache_implementation="static") decodes what the dynamic cache
decodes, a training step and a decode step each compile as one graph, and exported programs give eager's logits (float32, within 1e-5)."""

import pytest
import torch
from torch.export import Dim, export
from transformers import CompileConfig, StaticCache
from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

from support.tiny_models import PAD, POSITION_ENCODINGS, random_ids, tiny_causal_lm, tiny_seq2seq

GREEDY = dict(max_new_tokens=10, do_sample=False, eos_token_id=None, pad_token_id=PAD)


pytestmark = pytest.mark.usefixtures("fresh_compiler")  # tests/conftest.py


def build(kind, position_encoding):
    return (tiny_causal_lm if kind == "causal" else tiny_seq2seq)(position_encoding)


def left_padded():
    ids = random_ids(2, 7)
    ids[0, :3] = PAD
    mask = torch.ones_like(ids)
    mask[0, :3] = 0
    return ids, mask


@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
@pytest.mark.parametrize("position_encoding", POSITION_ENCODINGS)
def test_static_cache_generates_what_the_dynamic_cache_generates(kind, position_encoding):
    model, (ids, mask) = build(kind, position_encoding), left_padded()
    with torch.no_grad():
        dynamic = model.generate(ids, attention_mask=mask, return_dict_in_generate=True, output_logits=True, **GREEDY)
        static = model.generate(ids, attention_mask=mask, cache_implementation="static", return_dict_in_generate=True,
                                output_logits=True, **GREEDY)
    assert isinstance(static.past_key_values.self_attention_cache if kind == "seq2seq" else static.past_key_values, StaticCache)
    assert torch.equal(static.sequences, dynamic.sequences)
    for a, b in zip(static.logits, dynamic.logits):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)


@pytest.mark.parametrize("position_encoding", ["learned", "rope", "alibi"])
def test_a_decode_step_compiles_as_one_graph(position_encoding):
    """fullgraph=True raises at the first graph break; the "eager" backend keeps it quick (no code generation)."""
    model, (ids, mask) = tiny_causal_lm(position_encoding), left_padded()
    cache = StaticCache(config=model.config, max_cache_len=16)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    step = torch.compile(model, fullgraph=True, backend="eager")
    with torch.no_grad():
        first = model(ids, attention_mask=mask, position_ids=positions, past_key_values=cache, use_cache=True)
        token = first.logits[:, -1].argmax(-1, keepdim=True)
        mask = torch.cat([mask, torch.ones_like(token)], dim=1)
        compiled = step(token, attention_mask=mask, position_ids=positions[:, -1:] + 1, past_key_values=cache, use_cache=True)
        expected = model(torch.cat([ids, token], dim=1), attention_mask=mask).logits[:, -1]
    torch.testing.assert_close(compiled.logits[:, -1], expected, rtol=0, atol=1e-5)


BLOCKS = {  # GPT-2's block and Llama's, as the training benchmark races them (benchmarks/training_step.py)
    "gpt2": dict(position_encoding="learned", activation="gelu_new", scale_embeddings=False, dropout=0.1),
    "llama": dict(position_encoding="rope", norm="rmsnorm", feed_forward="gated", activation="silu", n_kv_heads=1,
                  bias=False, tie_word_embeddings=False, scale_embeddings=False, dropout=0.0),
}


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_training_step_compiles_as_one_graph_and_gives_eagers_loss_and_gradients(block, dtype):
    """Forward with labels in training mode (dropout on in GPT-2's block), then backward, as the training benchmark
    runs it (bfloat16: under autocast): one graph (fullgraph=True raises at a break) and eager's loss with the same
    dropout draws (aot_eager: traced, no code generation). In float32 the gradients are eager's too, within 1e-6;
    under bfloat16 autocast aot's decomposed dropout backward rounds otherwise (1.4% of a tensor's largest
    gradient seen here; dynamo alone gives eager's exactly), so there they agree to 3% of the largest."""
    model = tiny_causal_lm(**BLOCKS[block]).train()
    ids = random_ids(2, 12)

    def step(forward):
        torch.manual_seed(0)
        with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
            loss = forward(input_ids=ids, labels=ids).loss
        loss.backward()
        grads = {name: p.grad.clone() for name, p in model.named_parameters()}
        model.zero_grad(set_to_none=True)
        return loss.detach(), grads

    eager_loss, eager_grads = step(model)
    compiled_loss, compiled_grads = step(torch.compile(model, fullgraph=True, backend="aot_eager"))
    torch.testing.assert_close(compiled_loss, eager_loss, rtol=0, atol=1e-6)
    for name, grad in eager_grads.items():
        tolerance = 1e-6 if dtype == torch.float32 else 0.03 * float(grad.abs().max())
        torch.testing.assert_close(compiled_grads[name], grad, rtol=0, atol=tolerance, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("kind", ["causal", "seq2seq"])
def test_generate_compiles_its_decode_step_with_fullgraph(kind):
    model, (ids, mask) = build(kind, "rope"), left_padded()
    compile_config = CompileConfig(fullgraph=True, backend="eager")
    compile_config._compile_all_devices = True  # generate compiles on GPUs only unless told
    with torch.no_grad():
        plain = model.generate(ids, attention_mask=mask, **GREEDY)
        compiled = model.generate(ids, attention_mask=mask, cache_implementation="static", compile_config=compile_config,
                                  **GREEDY)
    assert hasattr(model, "_compiled_call")  # generate took the compiled path
    assert torch.equal(compiled, plain)


@pytest.mark.parametrize("position_encoding", POSITION_ENCODINGS)
def test_export_with_static_and_dynamic_sequence_length(position_encoding):
    causal, seq2seq = tiny_causal_lm(position_encoding), tiny_seq2seq(position_encoding)
    ids, mask = left_padded()
    target = random_ids(2, 4, seed=3)
    longer, longer_target = random_ids(2, 11, seed=6), random_ids(2, 6, seed=7)
    with torch.no_grad():
        static = export(causal, (), dict(input_ids=ids, attention_mask=mask, use_cache=False)).module()
        torch.testing.assert_close(static(input_ids=ids, attention_mask=mask, use_cache=False).logits,
                                   causal(ids, attention_mask=mask).logits, rtol=0, atol=1e-5)
        length = Dim("length", min=2, max=64)
        dynamic = export(causal, (), dict(input_ids=ids, use_cache=False),
                         dynamic_shapes=dict(input_ids={1: length}, use_cache=None)).module()
        torch.testing.assert_close(dynamic(input_ids=longer, use_cache=False).logits, causal(longer).logits, rtol=0, atol=1e-5)

        inputs = dict(input_ids=ids, attention_mask=mask, decoder_input_ids=target, use_cache=False)
        static = export(seq2seq, (), inputs).module()
        torch.testing.assert_close(static(**inputs).logits, seq2seq(**inputs).logits, rtol=0, atol=1e-5)
        shapes = dict(input_ids={1: length}, attention_mask={1: length},
                      decoder_input_ids={1: Dim("target_length", min=2, max=64)}, use_cache=None)
        dynamic = export(seq2seq, (), inputs, dynamic_shapes=shapes).module()
        inputs = dict(input_ids=longer, attention_mask=torch.ones_like(longer), decoder_input_ids=longer_target, use_cache=False)
        torch.testing.assert_close(dynamic(**inputs).logits, seq2seq(**inputs).logits, rtol=0, atol=1e-5)


@pytest.mark.parametrize("position_encoding", ["learned", "rope", "alibi"])
def test_exported_static_cache_decoder_decodes_token_by_token(position_encoding):
    """transformers' ExecuTorch recipe: one exported step with a static cache, fed one token at a time."""
    model = tiny_causal_lm(position_encoding)
    model.generation_config.cache_implementation = "static"
    program = TorchExportableModuleForDecoderOnlyLM(model, batch_size=1, max_cache_len=16).export(
        input_ids=random_ids(1, 1), cache_position=torch.tensor([0])).module()
    ids = random_ids(1, 6)
    with torch.no_grad():
        expected = model(ids).logits[0]
        for t in range(6):
            logits = program(input_ids=ids[:, t:t + 1], cache_position=torch.tensor([t]))
            torch.testing.assert_close(logits[0, -1], expected[t], rtol=0, atol=1e-5)


@pytest.mark.parametrize("kind", ["causal", "seq2seq", "causal-llama-style"])
def test_generate_compilation_all_outputs(kind):
    """transformers' test of that name: a compiled generate (static cache, fullgraph) returns attentions and hidden
    states for every step, equal to those of the same generate run uncompiled (within 1e-5)."""
    if kind == "causal-llama-style":
        model = tiny_causal_lm("rope", norm="rmsnorm", feed_forward="gated", activation="silu", n_kv_heads=2,
                               bias=False, tie_word_embeddings=False)
    else:
        model = build(kind, "rope")
    model.config._attn_implementation = "eager"  # transformers' test: attentions need the explicit softmax
    ids, mask = left_padded()
    compile_config = CompileConfig(fullgraph=True, backend="eager")
    compile_config._compile_all_devices = True
    every_output = dict(attention_mask=mask, cache_implementation="static", max_new_tokens=4, min_new_tokens=4,
                        do_sample=False, eos_token_id=None, pad_token_id=PAD, output_attentions=True,
                        output_hidden_states=True, output_scores=True, output_logits=True,
                        return_dict_in_generate=True, use_cache=True)
    with torch.no_grad():
        plain = model.generate(ids, disable_compile=True, **every_output)
        compiled = model.generate(ids, compile_config=compile_config, **every_output)
    assert hasattr(model, "_compiled_call")  # generate took the compiled path
    assert torch.equal(compiled.sequences, plain.sequences)
    names = (("encoder_attentions", "encoder_hidden_states", "decoder_attentions", "cross_attentions",
              "decoder_hidden_states") if kind == "seq2seq" else ("attentions", "hidden_states"))
    for name in names:
        expected, actual = getattr(plain, name), getattr(compiled, name)
        assert actual is not None and len(actual) == len(expected), name
        torch.testing.assert_close(actual, expected, rtol=0, atol=1e-5, msg=lambda m: f"{name}: {m}")
    per_step = compiled.decoder_attentions if kind == "seq2seq" else compiled.attentions
    assert len(per_step) == 4 and len(per_step[0]) == model.config.n_layers
