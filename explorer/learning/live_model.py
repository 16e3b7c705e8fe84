"""The model a live training job trains: fresh, seeded, sized by its ``LiveSettings``."""

import torch

from modeling import ScratchTransformerConfig, ScratchTransformerForCausalLM

from explorer.models import catalog
from explorer.learning.live_settings import LiveSettings


def build_model(settings: LiveSettings, vocab_size: int) -> ScratchTransformerForCausalLM:
    """A fresh, seeded model: pre-norm, d_ff = 4 d_model, no dropout, tied embeddings; ``attention_only``: layers
    with no feed-forward, x + Attn(LN(x)) (``feed_forward="none"``). Built behind ``catalog.LOAD_LOCK``:
    transformers' ``from_pretrained`` replaces torch's init functions with no-ops for the whole process while it
    loads, so a model built beside it would keep uninitialised weights."""
    feed_forward = dict(feed_forward="none") if settings.attention_only else dict(d_ff=4 * settings.d_model)
    config = ScratchTransformerConfig(
        vocab_size=vocab_size, d_model=settings.d_model, n_heads=settings.n_heads, n_layers=settings.n_layers,
        **feed_forward, dropout=0.0, position_encoding=settings.position_encoding,
        max_position_embeddings=settings.context_length, training_context_length=settings.context_length,
        pad_token_id=1, bos_token_id=0, eos_token_id=0)
    with catalog.LOAD_LOCK:  # never while a from_pretrained elsewhere has switched torch's init functions off
        torch.manual_seed(settings.seed)
        return ScratchTransformerForCausalLM(config)
