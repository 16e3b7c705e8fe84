"""What a model is, in the words and formulas the views use: ONE description built from its config and its modules.

``describe(model)`` reads the config (norm, feed-forward, heads, biases, residual, rotary share, embedding scale) and
the modules where they decide (is the LM head the embedding matrix itself?). Every view's prose, formula, step label
and row range comes from it, so a Llama is told as RMSNorm with a gated feed-forward and shared key/value heads, a
GPT-NeoX as a parallel residual that turns a quarter of each head, and ours as shipped as the paper's choices.

    LayerNorm(x) = (x − mean(x)) / √(var(x) + ε) · γ + β     centres, then scales (β where the norm has a bias)
    RMSNorm(x)   = x / √(mean(x²) + ε) · γ                   scales only: its output's mean is not 0
    FFN(x)       = act(x W_1 + b_1) W_2 + b_2                 the paper's (b_1, b_2 where it has biases)
    FFN(x)       = (act(x W_gate) ⊙ (x W_up)) W_2             gated (SwiGLU with silu: Llama's)
"""

from dataclasses import dataclass

from explorer.views.forward_pass import attention_kind

PROJECTIONS = ("q", "k", "v", "o", "ffn")


@dataclass(frozen=True)
class Architecture:
    """One model's choices. ``biases``: the projections with a bias, of ``PROJECTIONS``; ``d_rotary``: how many of a
    head's d_head dimensions RoPE turns (0 without RoPE)."""

    norm: str  # "LayerNorm" or "RMSNorm"
    norm_bias: bool  # LayerNorm's β
    pre_norm: bool
    final_norm: bool
    feed_forward: str  # "mlp", "gated" or "none"
    activation: str
    d_model: int
    d_ff: int | None
    n_heads: int
    n_kv_heads: int
    d_head: int
    biases: frozenset[str]
    tied_head: bool
    parallel_residual: bool
    position_encoding: str
    d_rotary: int
    scaled_embeddings: bool
    encoder_decoder: bool
    rope_scaling: tuple[tuple[str, object], ...] = ()  # the config's rope_frequency_scaling as items (hashable)

    # ------------------------------------------------------------------ the norm
    @property
    def centres(self) -> bool:
        """LayerNorm subtracts the mean; RMSNorm does not."""
        return self.norm == "LayerNorm"

    def norm_of(self, x: str = "x") -> str:
        return f"{self.norm}({x})"

    def norm_formula(self, x: str = "x", named: str | None = None) -> str:
        """The norm of ``x`` written out, its left side ``named`` (say Norm_1(x), one of a parallel layer's two)."""
        named = named or self.norm_of(x)
        if self.centres:
            return f"{named} = ({x} − mean) / √(var + ε) · γ" + (" + β" if self.norm_bias else "")
        return f"{named} = {x} / √(mean({x}²) + ε) · γ"

    def norm_effect(self) -> str:
        """What the norm does to a row, in words."""
        if self.centres:
            return "every row is shifted to mean 0 and scaled to variance 1, then multiplied by γ" + (
                " and shifted by β" if self.norm_bias else "")
        return ("every row is divided by its root mean square (RMSNorm does not subtract the mean: its output's mean "
                "need not be 0), then multiplied by γ")

    # ------------------------------------------------------------------ heads and projections
    def has_bias(self, projection: str) -> bool:
        return projection in self.biases

    @property
    def group_size(self) -> int:
        """Query heads per key/value head (n_heads / n_kv_heads)."""
        return self.n_heads // self.n_kv_heads

    @property
    def grouped(self) -> bool:
        return self.n_kv_heads < self.n_heads

    def kv_head_of(self, head: int) -> int:
        """The key/value head query head ``head`` reads."""
        return head // self.group_size

    def query_heads_of(self, kv_head: int) -> range:
        return range(kv_head * self.group_size, (kv_head + 1) * self.group_size)

    def kv_sharing(self) -> str:
        """Which query heads share each key/value head; "" when every head has its own."""
        if not self.grouped:
            return ""
        if self.n_kv_heads == 1:
            return (f"all {self.n_heads} query heads share one key/value head (multi-query attention): one W_K and one "
                    "W_V for the whole layer")
        groups = "; ".join(f"key/value head {g} serves query heads {_span(self.query_heads_of(g))}"
                           for g in range(self.n_kv_heads))
        return (f"{self.n_heads} query heads share {self.n_kv_heads} key/value heads (grouped-query attention), "
                f"{self.group_size} per key/value head: {groups}")

    def qkv_rows(self) -> dict[str, range]:
        """The rows of ``qkv_proj.weight`` that hold W_Q, W_K and W_V (torch stores a projection as (out, in))."""
        q, kv = self.n_heads * self.d_head, self.n_kv_heads * self.d_head
        return {"q": range(0, q), "k": range(q, q + kv), "v": range(q + kv, q + 2 * kv)}

    def head_rows(self, part: str, head: int) -> range:
        """The rows of ``qkv_proj.weight`` of one head of ``part`` (a key/value head for "k" and "v")."""
        start = self.qkv_rows()[part].start + head * self.d_head
        return range(start, start + self.d_head)

    def projection(self, part: str, x: str, head: str = "h") -> str:
        """"x W_Q^h + b_Q^h" (no ``head``: the whole matrix), the bias only where the model has one."""
        name, head = part.upper(), f"^{head}" if head else ""
        return f"{x} W_{name}{head}" + (f" + b_{name}{head}" if self.has_bias(part) else "")

    def projection_formula(self, part: str, x: str, head: str = "h", result: str | None = None) -> str:
        """"q = x W_Q^h + b_Q^h"; ``result`` names the left side."""
        return f"{result or part} = {self.projection(part, x, head)}"

    def output_formula(self, x: str = "Concat(…)") -> str:
        return f"{x} W_O^T" + (" + b_O" if self.has_bias("o") else "")

    # ------------------------------------------------------------------ the layer
    def ffn_formula(self, x: str = "x") -> str:
        """The feed-forward; "" for an attention-only model."""
        if self.feed_forward == "none":
            return ""
        if self.feed_forward == "gated":
            return f"({self.activation}({x} W_gate) ⊙ ({x} W_up)) W_2"
        b1, b2 = (" + b_1", " + b_2") if self.has_bias("ffn") else ("", "")
        return f"{self.activation}({x} W_1{b1}) W_2{b2}"

    def ffn_hidden_formula(self, x: str = "x") -> str:
        """The feed-forward's d_ff-wide hidden layer."""
        if self.feed_forward == "gated":
            return f"{self.activation}({x} W_gate) ⊙ ({x} W_up)"
        return f"{self.activation}({x} W_1" + (" + b_1)" if self.has_bias("ffn") else ")")

    def ffn_name(self) -> str:
        if self.feed_forward == "none":
            return "no feed-forward (attention-only layers)"
        if self.feed_forward == "gated":
            glu = " (SwiGLU)" if self.activation == "silu" else ""
            return (f"a gated feed-forward{glu}: {self.ffn_formula()}, the gate {self.activation}(x W_gate) scaling x W_up "
                    "unit by unit")
        return f"the paper's feed-forward with {self.activation}: {self.ffn_formula()}"

    def residual_formula(self) -> str:
        """One layer's update of the residual stream x: a decoder layer's, whose cross-attention (an encoder-decoder)
        reads the encoder's output, the memory; an encoder's layer has no cross-attention.

            pre-norm   x ← x + Attn(Norm(x)); then x ← x + CrossAttn(Norm(x), memory); then x ← x + FFN(Norm(x))
            post-norm  x ← Norm(x + Attn(x)); then x ← Norm(x + CrossAttn(x, memory)); then x ← Norm(x + FFN(x))
            parallel   x ← x + Attn(Norm_1(x)) + FFN(Norm_2(x))
        """
        if self.parallel_residual:
            return f"x ← x + Attn({self.norm}_1(x)) + FFN({self.norm}_2(x))"
        sublayers = ["Attn({})"] + (["CrossAttn({}, memory)"] if self.encoder_decoder else []) + (
            ["FFN({})"] if self.feed_forward != "none" else [])
        if self.pre_norm:
            return "; then ".join(f"x ← x + {s.format(self.norm_of('x'))}" for s in sublayers)
        return "; then ".join(f"x ← {self.norm}(x + {s.format('x')})" for s in sublayers)

    def residual_name(self) -> str:
        if self.parallel_residual:
            return ("parallel residual: attention and feed-forward both read the layer's input x, and both outputs "
                    "are added to it")
        if self.pre_norm:
            return "pre-norm, sequential: each sublayer reads the normalised stream and adds its output to the stream"
        return "post-norm, as in the paper: each sublayer's output is added to the stream, then the sum is normalised"

    def sublayer_input(self, x: str = "x") -> str:
        """What a self-attention sublayer reads: Norm(x) (pre-norm), Norm_1(x) (a parallel residual, whose
        feed-forward reads Norm_2(x) of the same x), or x itself (post-norm)."""
        if self.parallel_residual:
            return f"{self.norm}_1({x})"
        return self.norm_of(x) if self.pre_norm else x

    # ------------------------------------------------------------------ embeddings, positions, head
    def embedding_formula(self, token: str = "E[x_t]") -> str:
        return f"{token} · √d_model" if self.scaled_embeddings else token

    @property
    def partial_rotary(self) -> bool:
        return 0 < self.d_rotary < self.d_head

    def rotary_text(self) -> str:
        """How much of each head RoPE turns; "" without RoPE."""
        if self.position_encoding != "rope":
            return ""
        pairs = f"{self.d_rotary // 2} pair" + ("s" if self.d_rotary > 2 else "")
        if self.partial_rotary:
            return (f"RoPE turns the first d_rotary = {self.d_rotary} of each head's d_head = {self.d_head} dimensions "
                    f"({pairs}); the other {self.d_head - self.d_rotary} pass unrotated and carry no position"
                    + (f"; {self.rope_scaling_text()}" if self.rope_scaling else ""))
        whole = f"RoPE turns every dimension of each head: d_head = {self.d_head}, {pairs}"
        return whole + (f"; {self.rope_scaling_text()}" if self.rope_scaling else "")

    def rope_frequency_formula(self) -> str:
        """θ_i, the angle pair i turns by per position, as this model computes it, in one line
        (``modeling.position_encodings.rope_frequencies``; ``rope_scaling_text`` tells the rule)."""
        scaling = dict(self.rope_scaling)
        if not scaling:
            return "θ_i = θ^(−2i/d_rotary)"
        if scaling["rope_type"] == "linear":
            return f"θ_i = θ^(−2i/d_rotary) / {scaling['factor']:g}"
        return "θ_i = θ^(−2i/d_rotary), slowed by Llama 3.1's rule"

    def rope_scaling_text(self) -> str:
        """How RoPE's frequencies are slowed to read a context longer than the one trained at; "" when they are not."""
        scaling = dict(self.rope_scaling)
        if not scaling:
            return ""
        factor = f"{scaling['factor']:g}"
        if scaling["rope_type"] == "linear":
            return f"every pair turns {factor}× slower than θ^(−2i/d_rotary) (linear position interpolation)"
        trained = scaling["original_max_position_embeddings"]
        slow, fast = trained / scaling["low_freq_factor"], trained / scaling["high_freq_factor"]
        return (f"its frequencies are slowed as Llama 3.1's are, to read past the {trained:,.6g} tokens it was first "
                f"trained at: a pair whose wavelength 2π/θ_i is over {slow:,.6g} tokens turns {factor}× slower; one "
                f"under {fast:,.6g} tokens turns as θ^(−2i/d_rotary) says; those between, by a blend of the two")

    def head_formula(self, h: str = "h") -> str:
        """The LM head."""
        return f"{h} E^T (tied: the LM head is the embedding matrix E)" if self.tied_head else \
            f"{h} W_U (untied: the LM head is a matrix of its own, not the embedding)"

    def readout(self) -> str:
        """How the stream is turned into logits: the final norm (if any), then the head."""
        norm = f"{self.norm}_final(h)" if self.final_norm else "h"
        return self.head_formula(norm)

    def tensor_meaning(self, name: str) -> str:
        """What the parameter ``name`` (its state_dict name) is in the formulas, e.g. "W_Q, W_K, W_V stacked: rows
        0–31, 32–47, 48–63" for ``….self_attn.qkv_proj.weight``; "" for a name it does not know."""
        attention = "cross-attention's " if ".cross_attn." in name else ""
        q, k, v = (_span(rows) for rows in self.qkv_rows().values())
        gated, d_ff = self.feed_forward == "gated", self.d_ff or 0
        norm, where = self.norm, {"self_attn_norm": "attention", "cross_attn_norm": "cross-attention",
                                  "feed_forward_norm": "the feed-forward"}
        meanings = {
            "qkv_proj.weight": f"{attention}W_Q, W_K, W_V stacked: rows {q}, {k}, {v}",
            "qkv_proj.bias": f"{attention}b_Q, b_K, b_V stacked: entries {q}, {k}, {v}",
            "out_proj.weight": f"{attention}W_O", "out_proj.bias": f"{attention}b_O",
            "linear1.weight": f"W_gate (rows 0–{d_ff - 1}) and W_up (rows {d_ff}–{2 * d_ff - 1}) stacked" if gated
            else "W_1",
            "linear1.bias": "b_1", "linear2.weight": "W_2", "linear2.bias": "b_2",
            "embed.token.weight": "E, the token embedding" + (", also the LM head (tied)" if self.tied_head else ""),
            "embed.position.weight": "P, the learned position table",
            "lm_head.weight": "the LM head: E itself (tied)" if self.tied_head
            else "W_U, the LM head (untied: a matrix of its own)",
        }
        parallel = {"self_attn_norm": f"{norm}_1", "feed_forward_norm": f"{norm}_2"}  # both read the layer's input
        for sublayer, reader in where.items():
            role = (f"{parallel[sublayer]}, which {reader} reads from the layer's input x"
                    if self.parallel_residual and sublayer in parallel else f"the {norm} {reader} reads" if self.pre_norm
                    else f"the {norm} after {reader}'s residual add (Add & Norm)")
            meanings[f"{sublayer}.norm.weight"], meanings[f"{sublayer}.norm.bias"] = f"γ of {role}", f"β of {role}"
        meanings["stack.norm.weight"], meanings["stack.norm.bias"] = (f"γ of the final {norm}", f"β of the final {norm}")
        return next((meaning for suffix, meaning in meanings.items() if name.endswith(suffix)), "")

    def summary(self) -> list[str]:
        """One line per choice: what this model is."""
        lines = [f"{self.norm}" + (" (centres each row)" if self.centres else " (does not centre: no mean subtracted)")
                 + f"; {self.residual_name()}: {self.residual_formula()}",
                 self.ffn_name()[0].upper() + self.ffn_name()[1:],
                 (self.kv_sharing()[0].upper() + self.kv_sharing()[1:]) if self.grouped
                 else f"Every one of the {self.n_heads} heads has its own W_Q, W_K, W_V",
                 "Biases: " + (", ".join(_BIAS_NAMES[p] for p in PROJECTIONS if self.has_bias(p)) or "none"),
                 "Token embeddings " + ("× √d_model" if self.scaled_embeddings else "not scaled (no × √d_model)"),
                 f"Position: {self.position_encoding}" + (f"; {self.rotary_text()}" if self.rotary_text() else ""),
                 "LM head: " + self.head_formula()]
        if self.encoder_decoder:
            lines.append("Encoder-decoder: the layer above is the decoder's; memory is the encoder's output, and the "
                         "encoder's layers have no cross-attention")
        return lines


_BIAS_NAMES = {"q": "b_Q", "k": "b_K", "v": "b_V", "o": "b_O", "ffn": "the feed-forward's"}


def _span(heads: range) -> str:
    return f"{heads.start}–{heads.stop - 1}" if len(heads) > 1 else str(heads.start)


def describe(model) -> Architecture:
    """The model's architecture from its config, and from its modules where they decide: the biases are those its
    first decoder layer holds, and the LM head is tied when it IS the embedding matrix (the same storage)."""
    c = model.config
    head, embedding = model.get_output_embeddings(), model.get_input_embeddings()
    tied = head is not None and head.weight.data_ptr() == embedding.weight.data_ptr()
    attention, _ = attention_kind(model, "decoder" if c.is_encoder_decoder else "self").modules(model, 0)
    layer = model.model.decoder.stack.layers[0]
    qkv = attention.qkv_proj.bias is not None
    ffn = layer.feed_forward is not None and layer.feed_forward.linear1.bias is not None
    biases = {p for p, present in (("q", qkv), ("k", qkv), ("v", qkv), ("o", attention.out_proj.bias is not None),
                                   ("ffn", ffn)) if present}
    return Architecture(
        norm="RMSNorm" if c.norm == "rmsnorm" else "LayerNorm", norm_bias=c.norm == "layernorm" and c.bias,
        pre_norm=c.norm_first, final_norm=c.final_layer_norm, feed_forward=c.feed_forward, activation=c.activation,
        d_model=c.d_model, d_ff=c.d_ff, n_heads=c.n_heads, n_kv_heads=c.n_kv_heads, d_head=c.d_head,
        biases=frozenset(biases), tied_head=tied, parallel_residual=c.parallel_residual,
        position_encoding=c.position_encoding, d_rotary=c.d_rotary if c.position_encoding == "rope" else 0,
        scaled_embeddings=c.scale_embeddings, encoder_decoder=c.is_encoder_decoder,
        rope_scaling=tuple((c.rope_frequency_scaling or {}).items()) if c.position_encoding == "rope" else ())
