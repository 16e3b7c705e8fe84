"""A minimal GPT, the floor the training-step benchmark races ours against (nanoGPT's model.py, stripped to the step).

x_0 = drop(E[t] + P[pos]); each block: x += drop(W_o SDPA_causal(split(W_qkv LN(x)))), then
x += drop(W_2 GELU(W_1 LN(x))); logits = LN(x) E^T (the head is the token table). Dropout where GPT-2 has it (the
embeddings and each sublayer's output; none on the attention weights, as in the shipped models); no cache, no options:
what a training step of these dimensions cannot do without.
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class MinimalGPTConfig:
    vocab_size: int = 4096
    d_model: int = 256
    n_heads: int = 8
    n_layers: int = 6
    d_ff: int = 1024
    context: int = 256
    dropout: float = 0.0

    @classmethod
    def like(cls, config, context: int) -> "MinimalGPTConfig":
        """The sizes and dropout of a ScratchTransformerConfig, with a position table of ``context`` rows."""
        return cls(config.vocab_size, config.d_model, config.n_heads, config.n_layers, config.d_ff, context,
                   config.dropout)


class CausalSelfAttention(nn.Module):
    """softmax(Q K^T / sqrt(d_head) + causal mask) V per head, Q, K and V from one fused product."""

    def __init__(self, c: MinimalGPTConfig):
        super().__init__()
        self.n_heads = c.n_heads
        self.qkv = nn.Linear(c.d_model, 3 * c.d_model)
        self.out, self.drop = nn.Linear(c.d_model, c.d_model), nn.Dropout(c.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, d = x.shape  # nanoGPT's split into heads, as it writes it
        q, k, v = (part.view(batch, length, self.n_heads, d // self.n_heads).transpose(1, 2)
                   for part in self.qkv(x).split(d, dim=2))
        heads = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.drop(self.out(heads.transpose(1, 2).reshape(batch, length, d)))


class Block(nn.Module):
    """Pre-norm: x + attn(LN(x)), then x + MLP(LN(x)), MLP(x) = W_2 GELU(W_1 x)."""

    def __init__(self, c: MinimalGPTConfig):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(c.d_model), CausalSelfAttention(c)
        self.ln2 = nn.LayerNorm(c.d_model)
        self.mlp = nn.Sequential(nn.Linear(c.d_model, c.d_ff), nn.GELU(), nn.Linear(c.d_ff, c.d_model),
                                 nn.Dropout(c.dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class MinimalGPT(nn.Module):
    """Token and learned position embeddings, pre-norm blocks, a final LayerNorm, the head tied to the token table."""

    def __init__(self, c: MinimalGPTConfig):
        super().__init__()
        self.token, self.position = nn.Embedding(c.vocab_size, c.d_model), nn.Embedding(c.context, c.d_model)
        self.drop, self.blocks = nn.Dropout(c.dropout), nn.ModuleList(Block(c) for _ in range(c.n_layers))
        self.norm = nn.LayerNorm(c.d_model)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)

    def forward(self, ids: torch.Tensor, labels: torch.Tensor | None = None):
        """Logits (batch, length, vocab); with ``labels`` (the ids themselves) also the next-token cross-entropy."""
        x = self.drop(self.token(ids) + self.position(torch.arange(ids.shape[1], device=ids.device)))
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.norm(x), self.token.weight)
        if labels is None:
            return logits, None
        # nanoGPT's loss over every position, the targets shifted instead of the logits (slicing the logits would copy
        # them): the last position has no next token, and is ignored
        targets = F.pad(labels[:, 1:], (0, 1), value=-100)
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
