"""The peer both speed benchmarks race: transformers' GPT2LMHeadModel at the shipped ``shakespeare-main``'s sizes,
or at GPT-2 small's (``--size gpt2-small``: ``GPT2Config()``'s defaults, 124M parameters)."""

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


SIZES = ("shipped", "gpt2-small")
GPT2_SMALL = dict(vocab_size=50257, d_model=768, n_heads=12, n_layers=12, d_ff=3072, max_position_embeddings=1024,
                  position_encoding="learned", activation="gelu_new", scale_embeddings=False, dropout=0.0,
                  layer_norm_eps=1e-5)  # GPT2Config()'s sizes, no dropout (as nanoGPT's GPT-2 small figures)


def sized_config(size: str, checkpoint) -> ScratchTransformerConfig:
    """The sizes a benchmark runs at: "shipped" reads ``checkpoint``'s config.json; "gpt2-small" is GPT-2 small's."""
    if size == "gpt2-small":
        return ScratchTransformerConfig(**GPT2_SMALL)
    return ScratchTransformerConfig.from_pretrained(checkpoint)
