"""``Transformer``: a plain ``nn.Module`` with the API of ``torch.nn.Transformer(batch_first=True)``, built from the
same stacks as the Hugging Face models (``modeling_scratch_transformer.TransformerStack``), and its mask helper.

torch's masks (bool True = blocked, or float added; key padding masks (B, S) True at padding) become the one additive
bias every attention backend takes (``build_attention_bias``).
"""

import torch
from torch import nn

from .configuration_scratch_transformer import ScratchTransformerConfig
from .modeling_scratch_transformer import TransformerStack
from .recording import name_sites


def build_attention_bias(
    query_length: int,
    key_length: int,
    *,
    key_padding_mask: torch.Tensor | None = None,
    attn_mask: torch.Tensor | None = None,
    n_heads: int = 1,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor | None:
    """torch.nn.Transformer's masks as one additive bias, broadcastable to (B, H, T, S); None when none is given.

    - key_padding_mask (B, S): True (or -inf) where the key is padding;
    - attn_mask: (T, S) or (B*H, T, S), bool True = blocked, or float added.
    Blocked entries get the dtype's most negative finite value, not -inf, so a row with every key
    blocked (a padding query) yields uniform weights instead of NaN.
    """
    blocked, bias = None, None
    for mask in (
        None if key_padding_mask is None else key_padding_mask[:, None, None, :],
        None if attn_mask is None or attn_mask.dim() == 2 else attn_mask.view(-1, n_heads, query_length, key_length),
        attn_mask if attn_mask is not None and attn_mask.dim() == 2 else None,
    ):
        if mask is None:
            continue
        if mask.dtype == torch.bool:
            blocked = mask if blocked is None else blocked | mask
        else:
            bias = mask.to(dtype) if bias is None else bias + mask.to(dtype)
    if blocked is None:
        return bias
    base = torch.zeros((), dtype=dtype, device=blocked.device) if bias is None else bias
    return torch.where(blocked, torch.finfo(dtype).min, base)




class Transformer(nn.Module):
    """Encoder-decoder over embeddings, a drop-in for ``torch.nn.Transformer(batch_first=True)``.

    Same constructor and forward arguments; masks follow torch's conventions (bool True = blocked,
    or float added to the scores; key padding masks (B, S) True at padding). Beyond torch:
    ``position_encoding="rope"`` or ``"alibi"`` applies that encoding inside self-attention, and a
    ``ScratchTransformerConfig`` may be passed as ``config`` instead of the separate sizes. Attention
    runs on ``config._attn_implementation``: "sdpa" (the default) or "eager".
    """

    ATTENTION_IMPLEMENTATIONS = ("sdpa", "eager")  # torch's masks are float tensors, per head: what these take

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6, num_decoder_layers: int = 6,
                 dim_feedforward: int = 2048, dropout: float = 0.1, activation: str = "relu",
                 custom_encoder: nn.Module | None = None, custom_decoder: nn.Module | None = None,
                 layer_norm_eps: float = 1e-5, batch_first: bool = True, norm_first: bool = False, bias: bool = True,
                 device=None, dtype=None, *, position_encoding: str = "none",
                 config: ScratchTransformerConfig | None = None):
        super().__init__()
        if not batch_first:
            raise ValueError("batch_first must be True: tensors are (batch, sequence, d_model)")
        if custom_encoder is not None or custom_decoder is not None:
            raise ValueError("custom_encoder / custom_decoder are not supported; build the stacks from a config")
        if not isinstance(activation, str):
            raise ValueError(f"activation must be one of 'relu', 'gelu', 'gelu_new' (a string); got {activation!r}")
        if position_encoding not in ("none", "rope", "alibi"):
            raise ValueError(
                "position_encoding of a Transformer over embeddings must be 'none', 'rope' or 'alibi' "
                f"(add sinusoidal or learned encodings to the embeddings yourself); got {position_encoding!r}"
            )
        if config is None:
            config = ScratchTransformerConfig(
                vocab_size=1, d_model=d_model, n_heads=nhead, n_layers=num_decoder_layers,
                n_encoder_layers=num_encoder_layers, d_ff=dim_feedforward, dropout=dropout,
                attention_dropout=dropout, activation=activation, layer_norm_eps=layer_norm_eps,
                norm_first=norm_first, final_layer_norm=True, bias=bias, position_encoding=position_encoding,
                is_encoder_decoder=True,
            )
        config.validate_architecture()
        if config._attn_implementation is None:
            config._attn_implementation = "sdpa"
        if config._attn_implementation not in self.ATTENTION_IMPLEMENTATIONS:
            raise ValueError(f"Transformer runs attention with {' or '.join(self.ATTENTION_IMPLEMENTATIONS)}; "
                             f"got config._attn_implementation={config._attn_implementation!r}")
        self.config = config
        self.d_model, self.nhead, self.batch_first = config.d_model, config.n_heads, True
        self.encoder = TransformerStack(config, config.n_encoder_layers)
        self.decoder = TransformerStack(config, config.n_layers, cross_attention=True)
        name_sites(self.encoder, "encoder")
        name_sites(self.decoder, "decoder")
        if device is not None or dtype is not None:
            self.to(device=device, dtype=dtype)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor, src_mask: torch.Tensor | None = None,
                tgt_mask: torch.Tensor | None = None, memory_mask: torch.Tensor | None = None,
                src_key_padding_mask: torch.Tensor | None = None, tgt_key_padding_mask: torch.Tensor | None = None,
                memory_key_padding_mask: torch.Tensor | None = None, src_is_causal: bool | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> torch.Tensor:
        """src (B, S, D), tgt (B, T, D) -> (B, T, D). The ``*_is_causal`` flags are hints, as in torch:
        causality comes from the masks you pass (``generate_square_subsequent_mask``)."""
        for name, x in (("src", src), ("tgt", tgt)):
            if x.dim() != 3 or x.shape[-1] != self.d_model:
                raise ValueError(f"{name} must be (batch, length, d_model={self.d_model}); got {tuple(x.shape)}")
        if src.shape[0] != tgt.shape[0]:
            raise ValueError(f"src and tgt must have the same batch size; got {src.shape[0]} and {tgt.shape[0]}")
        memory = self.encode(src, src_mask, src_key_padding_mask)
        return self.decode(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask)

    def encode(
        self, src: torch.Tensor, src_mask: torch.Tensor | None = None, src_key_padding_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """src (B, S, D) -> memory (B, S, D)."""
        length = src.shape[1]
        mask = build_attention_bias(length, length, key_padding_mask=src_key_padding_mask, attn_mask=src_mask,
                                    n_heads=self.nhead, dtype=src.dtype)
        return self.encoder(src, position_ids=self.positions(src), attention_mask=mask)

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, tgt_mask: torch.Tensor | None = None,
               memory_mask: torch.Tensor | None = None, tgt_key_padding_mask: torch.Tensor | None = None,
               memory_key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """tgt (B, T, D) attending to memory (B, S, D) -> (B, T, D)."""
        length, memory_length = tgt.shape[1], memory.shape[1]
        common = dict(n_heads=self.nhead, dtype=tgt.dtype)
        mask = build_attention_bias(length, length, key_padding_mask=tgt_key_padding_mask, attn_mask=tgt_mask, **common)
        cross_mask = build_attention_bias(length, memory_length, key_padding_mask=memory_key_padding_mask,
                                          attn_mask=memory_mask, **common)
        return self.decoder(tgt, position_ids=self.positions(tgt), attention_mask=mask, memory=memory,
                            memory_mask=cross_mask)

    @staticmethod
    def positions(x: torch.Tensor) -> torch.Tensor:
        """0 .. length-1 for every row of x (B, length, D)."""
        return torch.arange(x.shape[1], device=x.device).expand(x.shape[0], -1)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> torch.Tensor:
        """(sz, sz) float mask: 0 on and below the diagonal, -inf above (position t sees 0..t)."""
        return torch.triu(torch.full((sz, sz), float("-inf"), device=device, dtype=dtype or torch.float32), diagonal=1)
