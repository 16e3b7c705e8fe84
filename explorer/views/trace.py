"""Inside one forward pass: the shape of every step, in the order the model computed it, read from the text's
recorded run (``with record() as recording``). Nothing is attached to or replaced on the model, so any number of
requests can trace the same shared model at once.
"""

from dataclasses import dataclass, field

from explorer.generation.decoding import DecodingSettings
from explorer.views.architecture import Architecture, describe
from explorer.views.forward_pass import recorded_pass
from explorer.generation.labels import token_labels
from explorer.generation.tokens import FORWARD_MAX_TOKENS


@dataclass(frozen=True)
class TraceStep:
    stack: str  # "decoder", "encoder", or "" for the model's head
    step: str
    source: str  # where the tensor is in the recording, e.g. "recording.decoder.layers[0].self_attention.query"
    shape: tuple[int, ...]
    dims: tuple[str, ...]  # what each dimension is, one name per entry of shape
    meaning: str

    def dims_text(self) -> str:
        if not self.shape:
            return "—"
        return " × ".join(f"{name}={size}" for name, size in zip(self.dims, self.shape))


@dataclass
class ForwardTrace:
    steps: list[TraceStep]
    logits_shape: tuple[int, ...]
    top_next: list[tuple[str, float]]  # (token, probability) after the last position the decoder read
    decoder_tokens: list[str]  # the tokens the decoder read (for an encoder-decoder: the model's own rewrite)
    rewrite: str = ""  # encoder-decoder: that rewrite as text
    decoded_with: str = ""  # encoder-decoder: how it was decoded
    notices: list[str] = field(default_factory=list)


def _broadcast_dims(shape: tuple[int, ...], names: tuple[str, ...], full: tuple[int, ...]) -> tuple[str, ...]:
    """Names for a tensor that broadcasts against ``full``: aligned from the right, '(broadcast)' where size 1."""
    names, full = names[len(names) - len(shape):], full[len(full) - len(shape):]
    return tuple(f"{name} (broadcast)" if size == 1 and want != 1 else name for size, name, want in zip(shape, names, full))


class _Steps(list):
    def add(self, stack, step, source, tensor, dims, meaning):
        shape = tuple(tensor.shape)
        self.append(TraceStep(stack, step, source, shape, dims if len(dims) == len(shape) else ("?",) * len(shape), meaning))


def _attention_rows(steps: _Steps, stack: str, label: str, record, where: str, queries: str, keys: str, config,
                    arch: Architecture) -> None:
    """Rows for one attention sublayer (layer 0 of a stack) from its AttentionRecord."""
    q_dims = ("batch", "heads", queries, "d_head")
    k_dims = ("batch", "key/value heads" if arch.grouped else "heads", keys, "d_head")
    score_dims = ("batch", "heads", queries, keys)
    if arch.parallel_residual:
        norm = (f"{arch.sublayer_input('x')}: parallel residual, attention reads the layer's input x normalised by "
                "its first norm")
    elif arch.pre_norm:
        norm = f"{arch.norm_of('x')}: pre-norm, the sublayer reads the normalised stream"
    else:
        norm = f"x itself: post-norm, {arch.norm} comes after the residual add"
    steps.add(stack, f"{label}: input", f"{where}.input", record.input, ("batch", queries, "d_model"), norm)
    reads = arch.sublayer_input("x")  # the queries' side: what the input row above holds
    source = "the encoder's output (the memory)" if "cross" in label else reads
    shared = f"; {arch.kv_sharing()}" if arch.grouped else ""
    steps.add(stack, f"{label}: Q per head", f"{where}.query", record.query, q_dims,
              f"queries: {arch.projection('q', reads, '')}, split into {arch.n_heads} heads")
    steps.add(stack, f"{label}: K per head", f"{where}.key", record.key, k_dims,
              f"keys: {arch.projection('k', source, '')}, split into {arch.n_kv_heads} heads{shared}")
    steps.add(stack, f"{label}: V per head", f"{where}.value", record.value, k_dims,
              f"values: {arch.projection('v', source, '')}, split into {arch.n_kv_heads} heads")
    if record.query_rotated is not None:
        partial = f" for i < d_rotary/2 = {arch.d_rotary // 2}; the rest of the head unturned" if arch.partial_rotary else ""
        steps.add(stack, f"{label}: Q rotated (RoPE)", f"{where}.query_rotated", record.query_rotated, q_dims,
                  f"R(m) q: pair i of the query at position m turned by m·θ_i{partial}")
        steps.add(stack, f"{label}: K rotated (RoPE)", f"{where}.key_rotated", record.key_rotated, k_dims,
                  "R(n) k: so q·k depends only on the offset m − n")
    if record.bias is not None:
        what = "−slope_h·|i − j| (ALiBi), plus the causal mask where there is one" \
            if config.position_encoding == "alibi" and "cross" not in label \
            else "the mask: 0 where a query may look, a huge negative number where it may not"
        steps.add(stack, f"{label}: bias", f"{where}.bias", record.bias,
                  _broadcast_dims(tuple(record.bias.shape), score_dims, tuple(record.scores.shape)), f"added to every score: {what}")
    steps.add(stack, f"{label}: scores", f"{where}.scores", record.scores, score_dims,
              "q·k / sqrt(d_head) + bias: one score per query-key pair")
    steps.add(stack, f"{label}: weights", f"{where}.weights", record.weights, score_dims,
              "softmax over the keys: each query's weights sum to 1")
    steps.add(stack, f"{label}: heads", f"{where}.heads", record.heads, q_dims,
              "per head: weights @ V" + (" (each query head reads its key/value head's V)" if arch.grouped else ""))
    steps.add(stack, f"{label}: concatenated heads", f"{where}.concatenated", record.concatenated,
              ("batch", queries, "d_model"), "Concat(head_1 … head_H): the heads side by side")
    steps.add(stack, f"{label}: output", f"{where}.output", record.output, ("batch", queries, "d_model"),
              arch.output_formula("Concat(heads)").replace(" W_O^T", " W_O"))


def _after_attention(arch: Architecture) -> str:
    """What layer 0's stream holds once attention's output is added."""
    if arch.parallel_residual:
        return (f"x + attention({arch.sublayer_input('x')}): attention's part of the parallel residual; the feed-forward "
                f"reads x itself, not this sum, and its output is added next")
    if arch.pre_norm:
        return f"the residual stream: x + attention({arch.norm_of('x')})"
    return f"{arch.norm}(x + attention(x))"


def _feed_forward_rows(steps: _Steps, stack: str, first, where: str, tokens: str, dims, arch: Architecture) -> None:
    """Layer 0's feed-forward: its hidden layer and its output, as this model computes them. It reads the stream after
    the sublayer before it: a decoder layer's cross-attention (an encoder-decoder), attention otherwise."""
    before = "cross-attention" if first.cross_attention is not None else "attention"
    reads = (f"reads {arch.norm}_2 of the layer's input x, beside attention (parallel residual)" if arch.parallel_residual
             else f"reads {arch.norm_of('x')} of the stream after {before}" if arch.pre_norm
             else f"reads the stream after {before}'s Add & Norm")
    steps.add(stack, "layer 0: feed-forward hidden", f"{where}.feed_forward_hidden", first.feed_forward_hidden,
              ("batch", tokens, "d_ff"), f"{arch.ffn_hidden_formula()}: widened to d_ff; {reads}")
    steps.add(stack, "layer 0: feed-forward output", f"{where}.feed_forward_output", first.feed_forward_output,
              dims, f"{arch.ffn_formula()}: back to d_model")


def forward_trace(model, tokenizer, text: str, decoding: DecodingSettings, max_tokens: int = FORWARD_MAX_TOKENS) -> ForwardTrace:
    """The shape of every step of one real forward pass over ``text``: the embeddings, layer 0 of each stack
    in detail (attention step by step, the residual add, feed-forward where the model has one), every layer's output,
    the final norm, the logits and the next-token probabilities, all read from the text's recorded run."""
    run = recorded_pass(model, tokenizer, text, decoding, max_tokens)
    read, logits = run.read, run.logits[None]  # (batch 1, tokens, vocab), as the model returned it
    config, arch, steps = model.config, describe(model), _Steps()
    stacks = [("encoder", "input_ids", "source tokens")] if config.is_encoder_decoder else []
    stacks.append(("decoder", "decoder_input_ids" if config.is_encoder_decoder else "input_ids", "tokens"))
    for stack, ids_name, tokens in stacks:
        record = run.recording.stack(stack)
        where = f"recording.{stack}"
        dims = ("batch", tokens, "d_model")
        steps.add(stack, "token ids", ids_name, read.inputs[ids_name], ("batch", tokens), "one integer per token (the tokenizer's output)")
        steps.add(stack, "token embeddings", f"{where}.embeddings.token", record.embeddings.token, dims,
                  f"{arch.embedding_formula('E[x]')}: one learned vector per token id"
                  + ("" if arch.scaled_embeddings else " (not scaled by √d_model)"))
        if record.embeddings.position is not None:
            steps.add(stack, f"positional encodings ({config.position_encoding})", f"{where}.embeddings.position",
                      record.embeddings.position, dims, "one vector per position, added to the token embedding")
        elif config.position_encoding == "none":
            steps.append(TraceStep(stack, "positional encoding (none)", "—", (), (),
                                   "no position signal: only the causal mask tells tokens apart by order" if stack == "decoder"
                                   else "no position signal: without a mask, the encoder sees its tokens as an unordered set"))
        if record.embeddings.position is not None:
            added = "the sum: the input of layer 0"
        elif config.position_encoding == "none":
            added = "the token embeddings alone: the input of layer 0"
        else:
            added = f"no position added here ({config.position_encoding} acts inside attention): the input of layer 0"
        steps.add(stack, "embeddings + positions", f"{where}.embeddings.sum", record.embeddings.sum, dims, added)
        if record.rotary is not None:
            steps.add(stack, "RoPE rotation (cos, sin)", f"{where}.rotary[0]", record.rotary[0],
                      ("batch", "heads (broadcast)", tokens, "d_rotary/2 pairs"),
                      f"cos and sin of m·θ_i for each position m and pair i; rotates q and k in every layer. "
                      f"{arch.rotary_text()}")
        first = record.layers[0]
        label = "layer 0 masked self-attention" if stack == "decoder" else "layer 0 self-attention"
        _attention_rows(steps, stack, label, first.self_attention, f"{where}.layers[0].self_attention", tokens, tokens,
                        config, arch)
        add = "the residual add" if arch.pre_norm else "Add & Norm"  # pre-norm: nothing normalises after the add
        steps.add(stack, f"layer 0: after {add}", f"{where}.layers[0].after_self_attention", first.after_self_attention, dims,
                  _after_attention(arch))
        if first.cross_attention is not None:
            _attention_rows(steps, stack, "layer 0 cross-attention", first.cross_attention,
                            f"{where}.layers[0].cross_attention", tokens, "source tokens", config, arch)
            steps.add(stack, f"layer 0: after cross-attention's {add.removeprefix('the ')}", f"{where}.layers[0].after_cross_attention",
                      first.after_cross_attention, dims, "the residual stream after cross-attention")
        if first.feed_forward_output is not None:  # an attention-only model (feed_forward="none") has none
            _feed_forward_rows(steps, stack, first, f"{where}.layers[0]", tokens, dims, arch)
        if arch.parallel_residual:
            last = f"the parallel residual, {arch.residual_formula()}"
        elif first.feed_forward_output is not None:
            last = f"{add} of its feed-forward"
        else:
            last = f"{add} of its last attention sublayer (attention only: no feed-forward)"
        for i, layer in enumerate(record.layers):
            steps.add(stack, f"layer {i} output", f"{where}.layers[{i}].output", layer.output, dims,
                      f"the residual stream after the layer: {last}")
        if config.final_layer_norm:
            steps.add(stack, f"final {arch.norm}", f"{where}.output", record.output, dims,
                      f"{arch.norm} of the last layer's output" + (": what the LM head reads" if stack == "decoder" else ": the memory cross-attention reads"))
    steps.add("", "logits", "logits", logits, ("batch", "tokens", "vocab"),
              f"{arch.head_formula()}: one score per vocabulary entry, per position")
    probabilities = logits[0, -1].float().softmax(-1)
    steps.append(TraceStep("", "probabilities", "softmax(logits), computed here", tuple(logits.shape),
                           ("batch", "tokens", "vocab"), "the next token's distribution after each position; each row sums to 1"))
    top = probabilities.topk(min(10, probabilities.shape[-1]))
    top_next = list(zip(token_labels(tokenizer, top.indices), [float(p) for p in top.values]))
    return ForwardTrace(steps, tuple(logits.shape), top_next, token_labels(tokenizer, read.target_ids),
                        read.rewrite, read.decoded_with, list(read.notices))
