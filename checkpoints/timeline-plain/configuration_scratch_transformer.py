"""Configuration of the from-scratch Transformer.

Our own names follow the paper (d_model, n_heads, d_ff, ...); the standard Hugging Face names
(hidden_size, num_attention_heads, num_hidden_layers, intermediate_size) are aliases through
``attribute_map``, so the rest of the ecosystem (generate, caches, pipelines) reads them as usual. A standard name
given to the constructor sets its paper name before any default is derived from it (n_encoder_layers from
num_hidden_layers), so either spelling builds the same model.
"""

import math

from transformers import PretrainedConfig

POSITION_ENCODINGS = ("sinusoidal", "learned", "rope", "alibi", "none")
ACTIVATIONS = ("relu", "gelu", "gelu_new")


class ScratchTransformerConfig(PretrainedConfig):
    """Hyper-parameters of a decoder-only LM or an encoder-decoder model.

    Args:
        vocab_size: number of token ids.
        d_model: width of every residual stream vector (``hidden_size``).
        n_heads: attention heads per layer; each head works in d_k = d_model / n_heads dimensions.
        n_layers: decoder layers (the only stack of a decoder-only model; ``num_hidden_layers``).
        n_encoder_layers: encoder layers of an encoder-decoder model (defaults to ``n_layers``).
        d_ff: inner width of the position-wise feed-forward network (``intermediate_size``).
        max_position_embeddings: size of the learned position table; for the other encodings the
            context length the model is meant for (they run past it).
        position_encoding: "sinusoidal" (added to the embeddings, the paper), "learned" (a trained
            table, GPT-2), "rope" (q and k rotated in every self-attention), "alibi" (a distance
            penalty on every score) or "none".
        rope_theta: RoPE base; pair i of a head turns by pos * rope_theta^(-2i/d_head).
        norm_first: pre-norm (x + f(LN(x)), GPT-2) when true; post-norm (LN(x + f(x)), the paper) when false.
        final_layer_norm: LayerNorm after the last layer of each stack (default: ``norm_first``,
            which pre-norm needs; ``torch.nn.Transformer`` has it in both modes).
        activation: feed-forward non-linearity: "relu", "gelu" (exact) or "gelu_new" (tanh approximation).
        scale_embeddings: multiply token embeddings by sqrt(d_model) as the paper does (GPT-2 does not).
        dropout: dropout on embeddings and on every sublayer output.
        activation_dropout: dropout on the feed-forward hidden act(x W1 + b1) (default: ``dropout``, as in
            ``torch.nn.Transformer``; GPT-2 has none there).
        attention_dropout: dropout on the attention weights.
        bias: whether the linear layers and LayerNorms have a bias.
        training_context_length: context length the checkpoint was trained at (informational; used
            by evaluation to measure extrapolation).
    """

    model_type = "scratch_transformer"
    keys_to_ignore_at_inference = ["past_key_values"]
    attribute_map = {
        "hidden_size": "d_model",
        "num_attention_heads": "n_heads",
        "num_hidden_layers": "n_layers",
        "intermediate_size": "d_ff",
        "n_positions": "max_position_embeddings",
    }

    def __init__(
        self,
        vocab_size: int = 4096,
        d_model: int = 256,
        n_heads: int = 4,
        n_layers: int = 4,
        n_encoder_layers: int | None = None,
        d_ff: int = 1024,
        max_position_embeddings: int = 256,
        position_encoding: str = "sinusoidal",
        rope_theta: float = 10000.0,
        norm_first: bool = True,
        final_layer_norm: bool | None = None,
        activation: str = "gelu",
        scale_embeddings: bool = True,
        dropout: float = 0.1,
        activation_dropout: float | None = None,
        attention_dropout: float = 0.0,
        bias: bool = True,
        layer_norm_eps: float = 1e-5,
        initializer_range: float = 0.02,
        training_context_length: int | None = None,
        is_encoder_decoder: bool = False,
        tie_word_embeddings: bool = True,
        pad_token_id: int | None = None,
        bos_token_id: int | None = None,
        eos_token_id: int | None = None,
        decoder_start_token_id: int | None = None,
        use_cache: bool = True,
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_layers = n_layers
        self.d_ff = d_ff
        self.max_position_embeddings = max_position_embeddings
        for name in [name for name in kwargs if name in self.attribute_map]:
            setattr(self, name, kwargs.pop(name))  # a standard name sets its paper name before defaults read it
        self.n_encoder_layers = self.n_layers if n_encoder_layers is None else n_encoder_layers
        self.position_encoding = position_encoding
        self.rope_theta = rope_theta
        self.norm_first = norm_first
        self.final_layer_norm = norm_first if final_layer_norm is None else final_layer_norm
        self.activation = activation
        self.scale_embeddings = scale_embeddings
        self.dropout = dropout
        self.activation_dropout = dropout if activation_dropout is None else activation_dropout
        self.attention_dropout = attention_dropout
        self.bias = bias
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.training_context_length = training_context_length
        self.tie_word_embeddings = tie_word_embeddings
        self.use_cache = use_cache
        if is_encoder_decoder and decoder_start_token_id is None:
            decoder_start_token_id = bos_token_id
        kwargs.setdefault("is_decoder", not is_encoder_decoder)
        super().__init__(
            is_encoder_decoder=is_encoder_decoder,
            pad_token_id=pad_token_id,
            bos_token_id=bos_token_id,
            eos_token_id=eos_token_id,
            decoder_start_token_id=decoder_start_token_id,
            **kwargs,
        )
        # set after super().__init__, which may reset it from kwargs
        self.tie_word_embeddings = tie_word_embeddings
        self.validate_architecture()

    @property
    def d_head(self) -> int:
        """Width of one attention head: d_k = d_v = d_model / n_heads."""
        return self.d_model // self.n_heads

    @property
    def position_limit(self) -> int | None:
        """The most positions the model can read: a learned table has ``max_position_embeddings`` rows and
        nothing past them; the other encodings are defined at every position (None: no limit)."""
        return self.max_position_embeddings if self.position_encoding == "learned" else None

    @property
    def context_length(self) -> int:
        """The context the model was trained at (``training_context_length``), else ``max_position_embeddings``."""
        return self.training_context_length or self.max_position_embeddings

    def validate_architecture(self) -> None:
        """Raise ValueError naming the field and what is allowed when the config cannot work.

        Runs when a config is made and again when a model is built from it (fields may change between)."""
        for name in ("vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "max_position_embeddings"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not isinstance(self.n_encoder_layers, int) or isinstance(self.n_encoder_layers, bool) or self.n_encoder_layers < 0:
            raise ValueError(f"n_encoder_layers must be a non-negative integer, got {self.n_encoder_layers!r}")
        if self.is_encoder_decoder and self.n_encoder_layers == 0:
            raise ValueError("n_encoder_layers must be positive for an encoder-decoder model, got 0")
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model (hidden_size) must be divisible by n_heads (num_attention_heads): "
                f"{self.d_model} % {self.n_heads} = {self.d_model % self.n_heads}"
            )
        if self.position_encoding not in POSITION_ENCODINGS:
            raise ValueError(
                f"position_encoding must be one of {', '.join(POSITION_ENCODINGS)}; got {self.position_encoding!r}"
            )
        if self.position_encoding == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"position_encoding 'sinusoidal' needs an even d_model (sin/cos pairs), got {self.d_model}")
        if self.position_encoding == "rope" and self.d_head % 2:
            raise ValueError(
                f"position_encoding 'rope' needs an even head dimension d_model / n_heads (it rotates pairs), "
                f"got {self.d_model} / {self.n_heads} = {self.d_head}"
            )
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}; got {self.activation!r}")
        for name in ("dropout", "activation_dropout", "attention_dropout"):
            value = getattr(self, name)
            if not _is_number(value) or not 0.0 <= value < 1.0:
                raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
        for name in ("rope_theta", "layer_norm_eps"):
            value = getattr(self, name)
            if not _is_number(value) or not 0.0 < value < math.inf:
                raise ValueError(f"{name} must be a finite positive number, got {value!r}")
        for name in ("norm_first", "final_layer_norm", "scale_embeddings", "bias"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")


def _is_number(value) -> bool:
    """An int or float (bool is an int in Python, but not a number here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
