"""One model of every family the app explains, each with a tokenizer, built once per session: ours as shipped, the
paper's post-norm encoder-decoder, GPT-2, Llama with grouped-query attention and Llama 3.2's slowed RoPE, Qwen2 (q/k/v biases), Mistral with ONE
key/value head, GPT-NeoX (parallel residual, a quarter of each head rotated) and an attention-only model. The
transformers families are transformers' own tiny random models converted by ``modeling.convert.from_transformers``."""

import functools

import torch
from transformers import AutoConfig, AutoModelForCausalLM

from modeling.convert import from_transformers
from support.fixtures_checkpoints import causal_lm, seq2seq_lm
from support.hub_repos import TINY, tokenizer
from support.shipped import shipped

FAMILIES = ("ours", "paper", "gpt2", "llama", "qwen2", "mistral", "gpt_neox", "attention-only")
CONVERTED = {"gpt2": {}, "llama": {}, "qwen2": {}, "mistral": {"num_key_value_heads": 1}, "gpt_neox": {}}


@functools.cache
def _tokenizer():
    return tokenizer()


def _converted(model_type: str):
    tok = _tokenizer()
    config = AutoConfig.for_model(model_type, vocab_size=len(tok), bos_token_id=tok.bos_token_id,
                                  eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                                  **{**TINY[model_type], **CONVERTED[model_type]})
    torch.manual_seed(0)
    return from_transformers(AutoModelForCausalLM.from_config(config).eval()).eval()


@functools.cache
def family(name: str):
    """(model, tokenizer) of family ``name`` (one of ``FAMILIES``)."""
    if name == "ours":
        return shipped("shakespeare-main")
    tok = _tokenizer()
    if name == "paper":  # the paper's: post-norm (no final norm), ReLU, x sqrt(d_model), sinusoidal, tied
        return seq2seq_lm(tok, norm_first=False, activation="relu"), tok
    if name == "attention-only":
        return causal_lm(tok, "rope", feed_forward="none"), tok
    return _converted(name), tok
