"""The peer both speed benchmarks race: transformers' GPT2LMHeadModel at the shipped ``shakespeare-main``'s sizes."""

from transformers import GPT2Config, GPT2LMHeadModel

from checkpointing.paths import checkpoints_dir
from modeling import ScratchTransformerConfig

SHIPPED_MAIN = checkpoints_dir() / "shakespeare-main"


def gpt2_like(config: ScratchTransformerConfig, positions: int) -> GPT2LMHeadModel:
    """A randomly initialised GPT-2 with ``config``'s sizes, activation and dropout, and a learned position table of
    ``positions`` rows (GPT-2 itself: learned positions, unscaled embeddings; convert with causal_lm_from_gpt2)."""
    return GPT2LMHeadModel(GPT2Config(
        vocab_size=config.vocab_size, n_embd=config.d_model, n_head=config.n_heads, n_layer=config.n_layers,
        n_inner=config.d_ff, n_positions=positions, activation_function=config.activation,
        layer_norm_epsilon=config.layer_norm_eps, resid_pdrop=config.dropout, embd_pdrop=config.dropout,
        attn_pdrop=config.attention_dropout, bos_token_id=0, eos_token_id=0,
    ))
