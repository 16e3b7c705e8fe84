"""The Transformer's concepts, explained once for every view that shows them (Attention, step by step lists them).
The teaching text writes a head's width as the paper does, d_k; ``ATTENTION`` says once that it is the code's d_head.
"""



EMBEDDING = """**Token embedding, × √d_model or not.** Each token id picks one row of the embedding matrix E. The
paper and our shipped models multiply it by √d_model; GPT-2, Llama, Qwen2, Mistral and Pythia do not (the token
embedding step says whether the model in front of you does, and by how much). Why the paper's factor: in our shipped
models E is shared with the output layer (the LM head is E itself, *tied*), which keeps its entries small
(initialised with standard deviation 0.02); the factor brings a token vector to the size of the position encoding
added to it (sinusoidal values lie in [−1, 1]), so neither drowns the other. With RoPE, ALiBi or no encoding nothing
is added here, and the factor only sets how large the token vector is against what the layers add to the stream."""


ENCODINGS = """**Position encodings.** Attention by itself ignores order, so position must come from somewhere:
- *sinusoidal* (the paper), added to the embedding once: PE(pos, 2i) = sin(pos / 10000^(2i/d)),
  PE(pos, 2i+1) = cos(pos / 10000^(2i/d)). **i is the pair index**: dimensions 2i and 2i+1 share one frequency,
  so PE(pos + k) is a fixed rotation of PE(pos) for every pos;
- *learned*: a trained table P[pos], added once; it has no row past its last position;
- *RoPE*: nothing is added; inside every self-attention layer each pair (q_2i, q_2i+1) of a query or key at
  position m is turned by the angle m·θ_i, θ_i = 10000^(−2i/d_k) (d_k: one head's width, see multi-head attention),
  so q_m · k_n depends on n − m only; a model made to read past the length it was trained at may turn its slow pairs
  slower still (Llama 3.1 and 3.2: the model's own steps say how);
- *ALiBi*: nothing is added; every self-attention score gets −slope_h · |i − j|, one slope per head
  (2^(−8h/H), h = 1..H, when H is a power of two; the paper's interleaving rule otherwise), so far tokens weigh
  less;
- *none*: a decoder can still tell order from the causal mask (token t sees t+1 tokens), an encoder cannot.

Cross-attention gets no RoPE or ALiBi in our models: its keys are another sequence."""


ATTENTION = """**Multi-head attention.** Each head h projects the (normalised) stream into queries, keys and values of
d_k = d_model / H dimensions (the paper's d_k is one head's width; the code and the model's config call it d_head):
q = x W_Q^h, k = x W_K^h, v = x W_V^h, plus a bias b_Q^h, b_K^h, b_V^h where the model has one (the paper, GPT-2,
Pythia and ours: yes; Llama and Mistral: none; Qwen2: on q, k, v only). Its output is softmax(q k^T / √d_k + bias) v:
every query mixes the values of the keys it may see, weighted by how well its query matches their keys. √d_k keeps
the scores from growing with the width. The H heads run side by side; their outputs are concatenated and multiplied
by W_O: MultiHead(x) = Concat(head_1, …, head_H) W_O. *Grouped-query attention* (Llama, Qwen2, Mistral) projects
fewer key/value heads than query heads: each W_K, W_V serves H / n_kv_heads query heads (one for all of them:
multi-query attention), a smaller cache for the same formula."""


MASKS = """**Masks.** A mask is part of the bias added to the scores. *Causal*: in a decoder, query t may not see
keys after t; those scores get the most negative float, so their softmax weight is exactly 0. *Padding*: when
texts of different lengths are batched, the short ones are padded and the padded keys are blocked the same
way. The app runs one text at a time, so you will see causal masks (and ALiBi's penalty), never padding."""


ADD_NORM = """**The residual add and the norm: pre- and post-norm, LayerNorm and RMSNorm.** Every sublayer (attention,
feed-forward) sits on a residual connection. The paper's *Add & Norm* is *post-norm*: x ← LayerNorm(x + sublayer(x)).
Our shipped models, GPT-2, Llama and Pythia are *pre-norm*: x ← x + sublayer(Norm(x)); the stream itself is never
normalised between layers, which keeps a clean path for gradients in deep stacks, and one final norm comes before
the LM head. Pythia (GPT-NeoX) adds its two sublayers in *parallel*: x ← x + Attn(Norm_1(x)) + FFN(Norm_2(x)), the
feed-forward reading the layer's input rather than the stream after attention.
LayerNorm(x) = (x − mean(x)) / √(var(x) + ε) · γ + β centres and scales (the paper, GPT-2, Pythia, ours);
RMSNorm(x) = x / √(mean(x²) + ε) · γ only scales (Llama, Qwen2, Mistral): it subtracts no mean, so its output's mean
is not 0. Both work over the d_model numbers of one token."""


FEED_FORWARD = """**Feed-forward network.** After attention mixes information between tokens, the same network runs on
every position alone. The paper's: FFN(x) = act(x W_1 + b_1) W_2 + b_2, widened to d_ff and back; the paper used
ReLU, our shipped models, GPT-2 and Pythia GELU. Llama, Qwen2 and Mistral use a *gated* one with
no biases: FFN(x) = (silu(x W_gate) ⊙ (x W_up)) W_2 (SwiGLU), where the gate decides, unit by unit, how much of
x W_up passes. A model trained *attention only* (the induction preset of Train one yourself) has none: each of its
layers is x + Attn(Norm(x)) alone."""


SHIFTED_RIGHT = """**Outputs shifted right.** Training feeds the target sequence shifted one step right: the decoder
reads [start, y_1, …, y_{n−1}] and must predict [y_1, …, y_n], so with the causal mask position t predicts
token t+1 from tokens up to t only. A decoder-only model does the same with its own text: the logits at
position t are scored against token t+1. For folio-to-modern the decoder's first token is the start token
<|endoftext|>."""


CROSS_ATTENTION = """**Cross-attention** (encoder-decoder only). In each decoder layer, after its masked
self-attention, the queries come from the decoder's stream and the keys and values from the encoder's output
(after its final norm, where it has one; the paper's post-norm stack ends on its last Add & Norm), the *memory*.
There is no causal mask: every output token may look at every source token. This is how folio-to-modern reads
the Folio spelling while it writes the modern one."""


CONCEPTS = (EMBEDDING, ENCODINGS, ATTENTION, MASKS, ADD_NORM, FEED_FORWARD, SHIFTED_RIGHT, CROSS_ATTENTION)
