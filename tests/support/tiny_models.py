"""Tiny random models shared by the tests (seeded, dropout off, eval mode): the one source of ``tiny_config``."""

import torch

from modeling import POSITION_ENCODINGS, ScratchTransformerConfig, ScratchTransformerForCausalLM, ScratchTransformerForSeq2SeqLM

VOCAB = 64
PAD, BOS, EOS = 0, 1, 2
__all__ = ["POSITION_ENCODINGS", "VOCAB", "PAD", "BOS", "EOS", "tiny_config", "tiny_causal_lm", "tiny_seq2seq", "random_ids"]


def tiny_config(seq2seq: bool = False, **overrides) -> ScratchTransformerConfig:
    """d_model 32, 4 heads, 2 layers (2 + 2 for ``seq2seq``), 64 positions, dropout off; ``overrides`` win."""
    values = dict(vocab_size=VOCAB, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_position_embeddings=64,
                  dropout=0.0, initializer_range=0.2, pad_token_id=PAD, bos_token_id=BOS, eos_token_id=EOS)
    if seq2seq:
        values.update(is_encoder_decoder=True, n_encoder_layers=2, decoder_start_token_id=overrides.get("bos_token_id", BOS))
    values.update(overrides)
    return ScratchTransformerConfig(**values)


def tiny_causal_lm(position_encoding: str = "rope", seed: int = 0, **overrides) -> ScratchTransformerForCausalLM:
    torch.manual_seed(seed)
    return ScratchTransformerForCausalLM(tiny_config(position_encoding=position_encoding, **overrides)).eval()


def tiny_seq2seq(position_encoding: str = "sinusoidal", seed: int = 0, **overrides) -> ScratchTransformerForSeq2SeqLM:
    torch.manual_seed(seed)
    return ScratchTransformerForSeq2SeqLM(tiny_config(seq2seq=True, position_encoding=position_encoding, **overrides)).eval()


def random_ids(batch: int, length: int, seed: int = 1) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(3, VOCAB, (batch, length), generator=generator)
