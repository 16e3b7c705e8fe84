# GENERATED from modeling/configuration_scratch_transformer.py by `python -m training.checkpoints`: edit modeling/, then run that command; never edit this copy.
"""Configuration of the from-scratch Transformer.

Our own names follow the paper (d_model, n_heads, d_ff, ...); the standard Hugging Face names
(hidden_size, num_attention_heads, num_hidden_layers, intermediate_size) are aliases through
``attribute_map``, so the rest of the ecosystem (generate, caches, pipelines) reads them as usual. A standard name
given to the constructor sets its paper name before any default is derived from it (n_encoder_layers from
num_hidden_layers), so either spelling builds the same model.
"""

import math

from transformers import PretrainedConfig

from .position_encodings import ROPE_SCALINGS

POSITION_ENCODINGS = ("sinusoidal", "learned", "rope", "alibi", "none")
ACTIVATIONS = ("relu", "gelu", "gelu_new", "silu")
NORMS = ("layernorm", "rmsnorm")
FEED_FORWARDS = ("mlp", "gated", "none")


class ScratchTransformerConfig(PretrainedConfig):
    """Hyper-parameters of a decoder-only LM or an encoder-decoder model.

    Args:
        vocab_size: number of token ids.
        d_model: width of every residual stream vector (``hidden_size``).
        n_heads: attention heads per layer; each head works in d_head = d_model / n_heads dimensions (the paper's d_k).
        n_layers: decoder layers (the only stack of a decoder-only model; ``num_hidden_layers``).
        n_encoder_layers: encoder layers of an encoder-decoder model (defaults to ``n_layers``).
        d_ff: inner width of the position-wise feed-forward network (``intermediate_size``; default 1024). None with
            ``feed_forward="none"`` (whatever is given: there is no feed-forward).
        max_position_embeddings: size of the learned position table; for the other encodings the
            context length the model is meant for (they run past it).
        position_encoding: "sinusoidal" (added to the embeddings, the paper), "learned" (a trained
            table, GPT-2), "rope" (q and k rotated in every self-attention), "alibi" (a distance
            penalty on every score) or "none".
        rope_theta: RoPE base; pair i of a head turns by pos * rope_theta^(-2i/d_rotary).
        rope_frequency_scaling: None (RoPE's frequencies as rope_theta gives them), or how they are slowed to read a
            context longer than the one trained at (``position_encodings.rope_frequencies``), as transformers'
            rope_parameters write it: {"rope_type": "linear", "factor": f} or {"rope_type": "llama3", "factor": f,
            "low_freq_factor": a, "high_freq_factor": b, "original_max_position_embeddings": L} (Llama 3.1, 3.2).
        rotary_fraction: the share of each head that RoPE turns: its first d_rotary = int(d_head * rotary_fraction)
            dimensions (an even number); the rest pass unrotated (GPT-NeoX / Pythia: 0.25). 1.0: the whole head.
        n_kv_heads: key/value heads (``num_key_value_heads``); each serves n_heads / n_kv_heads query heads
            (grouped-query attention; 1: multi-query; default n_heads: the paper's multi-head attention).
        norm_first: pre-norm (x + f(LN(x)), GPT-2) when true; post-norm (LN(x + f(x)), the paper) when false.
        norm: "layernorm" (LN(x) = (x - mean) / sqrt(var + eps) * g + b, the paper, GPT-2) or "rmsnorm"
            (x / sqrt(mean(x^2) + eps) * g: no centring, no bias; Llama).
        parallel_residual: x + Attn(LN_1(x)) + FFN(LN_2(x)): attention and feed-forward both read the layer's
            input (GPT-NeoX, GPT-J), instead of the feed-forward reading x + Attn(LN_1(x)). Pre-norm decoder with a
            feed-forward only.
        final_layer_norm: LayerNorm after the last layer of each stack (default: ``norm_first``,
            which pre-norm needs; ``torch.nn.Transformer`` has it in both modes).
        activation: feed-forward non-linearity: "relu", "gelu" (exact), "gelu_new" (tanh approximation) or "silu"
            (x * sigmoid(x)).
        feed_forward: "mlp" (the paper's act(x W_1 + b_1) W_2 + b_2), "gated" (act(x W_gate) * (x W_up), then
            W_2; with silu: SwiGLU, Llama's) or "none": attention-only layers, x + Attn(LN(x)) and nothing more
            (Elhage et al. 2021's attention-only transformers); d_ff, activation, activation_dropout and
            feed_forward_bias then go unused.
        scale_embeddings: multiply token embeddings by sqrt(d_model) as the paper does (GPT-2 does not).
        dropout: dropout on embeddings and on every sublayer output.
        activation_dropout: dropout on the feed-forward hidden act(x W1 + b1) (default: ``dropout``, as in
            ``torch.nn.Transformer``; GPT-2 has none there).
        attention_dropout: dropout on the attention weights.
        bias: whether the LayerNorms have a bias, and the default of the two below.
        attention_bias: whether W^Q, W^K, W^V and W^O have a bias (default ``bias``).
        qkv_bias: whether W^Q, W^K, W^V have a bias (default ``attention_bias``; Qwen2: True with no W^O bias).
        feed_forward_bias: whether the feed-forward's linear layers have a bias (default ``bias``).
        tie_word_embeddings: the LM head reuses the token embedding (logits = h E^T); false: its own matrix.
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
        "num_key_value_heads": "n_kv_heads",
    }

    def __init__(
        self,
        vocab_size: int = 4096,
        d_model: int = 256,
        n_heads: int = 4,
        n_layers: int = 4,
        n_encoder_layers: int | None = None,
        d_ff: int | None = None,
        max_position_embeddings: int = 256,
        position_encoding: str = "sinusoidal",
        rope_theta: float = 10000.0,
        rope_frequency_scaling: dict | None = None,
        rotary_fraction: float = 1.0,
        n_kv_heads: int | None = None,
        norm: str = "layernorm",
        norm_first: bool = True,
        parallel_residual: bool = False,
        final_layer_norm: bool | None = None,
        activation: str = "gelu",
        feed_forward: str = "mlp",
        scale_embeddings: bool = True,
        dropout: float = 0.1,
        activation_dropout: float | None = None,
        attention_dropout: float = 0.0,
        bias: bool = True,
        attention_bias: bool | None = None,
        qkv_bias: bool | None = None,
        feed_forward_bias: bool | None = None,
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
        self.n_kv_heads = n_kv_heads
        for name in [name for name in kwargs if name in self.attribute_map]:
            setattr(self, name, kwargs.pop(name))  # a standard name sets its paper name before defaults read it
        self.n_encoder_layers = self.n_layers if n_encoder_layers is None else n_encoder_layers
        if self.n_kv_heads is None:
            self.n_kv_heads = self.n_heads
        self.position_encoding = position_encoding
        self.rope_theta = rope_theta
        self.rope_frequency_scaling = rope_frequency_scaling
        self.rotary_fraction = rotary_fraction
        self.norm = norm
        self.norm_first = norm_first
        self.parallel_residual = parallel_residual
        self.final_layer_norm = norm_first if final_layer_norm is None else final_layer_norm
        self.activation = activation
        self.feed_forward = feed_forward
        if feed_forward == "none":
            self.d_ff = None  # no feed-forward, no width: a d_ff given is dropped, not saved as if it were used
        elif self.d_ff is None:
            self.d_ff = 1024
        self.scale_embeddings = scale_embeddings
        self.dropout = dropout
        self.activation_dropout = dropout if activation_dropout is None else activation_dropout
        self.attention_dropout = attention_dropout
        self.bias = bias
        self.attention_bias = bias if attention_bias is None else attention_bias
        self.qkv_bias = self.attention_bias if qkv_bias is None else qkv_bias
        self.feed_forward_bias = bias if feed_forward_bias is None else feed_forward_bias
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
        """Width of one attention head: d_model / n_heads (the paper's d_k = d_v)."""
        return self.d_model // self.n_heads

    @property
    def d_rotary(self) -> int:
        """How many dimensions of each head RoPE turns: int(d_head * rotary_fraction), as GPT-NeoX counts them."""
        return int(self.d_head * self.rotary_fraction)

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
        sizes = ("vocab_size", "d_model", "n_heads", "n_kv_heads", "n_layers", "max_position_embeddings")
        for name in sizes + (() if self.feed_forward == "none" else ("d_ff",)):  # no feed-forward: d_ff unused
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
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_kv_heads (num_key_value_heads) must divide n_heads (num_attention_heads): each key/value head "
                f"serves n_heads / n_kv_heads query heads; got {self.n_heads} / {self.n_kv_heads}"
            )
        if self.position_encoding not in POSITION_ENCODINGS:
            raise ValueError(
                f"position_encoding must be one of {', '.join(POSITION_ENCODINGS)}; got {self.position_encoding!r}"
            )
        if self.position_encoding == "sinusoidal" and self.d_model % 2:
            raise ValueError(f"position_encoding 'sinusoidal' needs an even d_model (sin/cos pairs), got {self.d_model}")
        if not _is_number(self.rotary_fraction) or not 0.0 < self.rotary_fraction <= 1.0:
            raise ValueError(f"rotary_fraction must be a number in (0, 1], got {self.rotary_fraction!r}")
        if self.rotary_fraction != 1.0 and self.position_encoding != "rope":
            raise ValueError(f"rotary_fraction applies to position_encoding 'rope' only (it is the share of each head "
                             f"RoPE turns); got {self.rotary_fraction} with {self.position_encoding!r}")
        if self.position_encoding == "rope" and self.d_head % 2:
            raise ValueError(
                f"position_encoding 'rope' needs an even head dimension d_model / n_heads (it rotates pairs), "
                f"got {self.d_model} / {self.n_heads} = {self.d_head}"
            )
        if self.position_encoding == "rope" and (self.d_rotary % 2 or self.d_rotary == 0):
            raise ValueError(
                f"rotary_fraction must leave RoPE an even, positive width int(d_head * rotary_fraction) (it turns "
                f"pairs), got int({self.d_head} * {self.rotary_fraction}) = {self.d_rotary}"
            )
        self._validate_rope_frequency_scaling()
        for name, allowed in (("norm", NORMS), ("feed_forward", FEED_FORWARDS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {getattr(self, name)!r}")
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
        for name in ("norm_first", "final_layer_norm", "scale_embeddings", "bias", "attention_bias", "qkv_bias",
                     "feed_forward_bias", "parallel_residual", "tie_word_embeddings"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.parallel_residual and (not self.norm_first or self.is_encoder_decoder):
            raise ValueError("parallel_residual (x + Attn(LN(x)) + FFN(LN(x))) needs norm_first=True and a "
                             f"decoder-only model (is_encoder_decoder=False); got norm_first={self.norm_first}, "
                             f"is_encoder_decoder={self.is_encoder_decoder}")
        if self.parallel_residual and self.feed_forward == "none":
            with_one = ", ".join(kind for kind in FEED_FORWARDS if kind != "none")
            raise ValueError("parallel_residual (x + Attn(LN(x)) + FFN(LN(x))) adds a feed-forward beside attention: "
                             f"it needs feed_forward one of {with_one}; got feed_forward='none' (attention-only "
                             "layers, x + Attn(LN(x)))")

    def _validate_rope_frequency_scaling(self) -> None:
        scaling = self.rope_frequency_scaling
        if scaling is None:
            return
        kinds = "; ".join(f"{kind}: {', '.join(keys)}" for kind, keys in ROPE_SCALINGS.items())
        if not isinstance(scaling, dict) or scaling.get("rope_type") not in ROPE_SCALINGS:
            raise ValueError(f"rope_frequency_scaling must be None or a dict with rope_type and its numbers ({kinds}); "
                             f"got {scaling!r}")
        if self.position_encoding != "rope":
            raise ValueError(f"rope_frequency_scaling applies to position_encoding 'rope' only (it slows RoPE's "
                             f"frequencies); got it with {self.position_encoding!r}")
        kind, needed = scaling["rope_type"], ROPE_SCALINGS[scaling["rope_type"]]
        if set(scaling) != {"rope_type", *needed}:
            raise ValueError(f"rope_frequency_scaling of rope_type {kind!r} holds exactly rope_type, {', '.join(needed)}; "
                             f"got {', '.join(sorted(scaling))}")
        for name in needed:
            value = scaling[name]
            if not _is_number(value) or not 0.0 < value < math.inf:
                raise ValueError(f"rope_frequency_scaling {name} must be a finite positive number, got {value!r}")
        if kind == "llama3" and not scaling["low_freq_factor"] < scaling["high_freq_factor"]:
            raise ValueError("rope_frequency_scaling needs low_freq_factor < high_freq_factor (the band between "
                             f"them is blended); got {scaling['low_freq_factor']} and {scaling['high_freq_factor']}")


def _is_number(value) -> bool:
    """An int or float (bool is an int in Python, but not a number here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
