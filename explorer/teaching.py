"""The short explanations shown beside each view: what you see, how to read it, the formula.

One home for the app's teaching text. Every claim is about OUR models and was checked against
``modeling/modeling_scratch_transformer.py``: pre-norm layers with a final LayerNorm, token embeddings scaled
by sqrt(d_model) and tied to the LM head, sinusoidal / learned encodings added once at the input, RoPE applied
to q and k inside every self-attention layer, ALiBi added to the scores of every self-attention layer,
GELU feed-forward networks. Where the paper differs, the text says so.
"""

EMBEDDING = """**Token embedding × √d_model.** Each token id picks one row of the embedding matrix E, and our models
multiply it by √d_model (16 for d_model = 256), as the paper does. Why: E is shared with the output layer (the
LM head is E itself, *tied*), which keeps its entries small (initialised with standard deviation 0.02); the
factor brings a token vector to the size of the position encoding added to it (sinusoidal values lie in
[−1, 1]), so neither drowns the other. With RoPE, ALiBi or no encoding nothing is added here, and the factor only
sets how large the token vector is against what the layers add to the stream."""

ENCODINGS = """**Position encodings.** Attention by itself ignores order, so position must come from somewhere:
- *sinusoidal* (the paper), added to the embedding once: PE(pos, 2i) = sin(pos / 10000^(2i/d)),
  PE(pos, 2i+1) = cos(pos / 10000^(2i/d)). **i is the pair index**: dimensions 2i and 2i+1 share one frequency,
  so PE(pos + k) is a fixed rotation of PE(pos) for every pos;
- *learned*: a trained table P[pos], added once; it has no row past its last position;
- *RoPE*: nothing is added; inside every self-attention layer each pair (q_2i, q_2i+1) of a query or key at
  position m is turned by the angle m·θ_i, θ_i = 10000^(−2i/d_k), so q_m · k_n depends on n − m only;
- *ALiBi*: nothing is added; every self-attention score gets −slope_h · |i − j|, one slope per head
  (2^(−8h/H), h = 1..H, when H is a power of two; the paper's interleaving rule otherwise), so far tokens weigh
  less;
- *none*: a decoder can still tell order from the causal mask (token t sees t+1 tokens), an encoder cannot.

Cross-attention gets no RoPE or ALiBi in our models: its keys are another sequence."""

ATTENTION = """**Multi-head attention.** Each head h projects the (normalised) stream into queries, keys and values of
d_k = d_model / H dimensions: q = x W_Q^h, k = x W_K^h, v = x W_V^h. Its output is
softmax(q k^T / √d_k + bias) v: every query mixes the values of the keys it may see, weighted by how well
its query matches their keys. √d_k keeps the scores from growing with the width. The H heads run side by side;
their outputs are concatenated and multiplied by W_O: MultiHead(x) = Concat(head_1, …, head_H) W_O."""

MASKS = """**Masks.** A mask is part of the bias added to the scores. *Causal*: in a decoder, query t may not see
keys after t; those scores get the most negative float, so their softmax weight is exactly 0. *Padding*: when
texts of different lengths are batched, the short ones are padded and the padded keys are blocked the same
way. The app runs one text at a time, so you will see causal masks (and ALiBi's penalty), never padding."""

ADD_NORM = """**The residual add and LayerNorm: pre- and post-norm.** Every sublayer (attention, feed-forward) sits on a residual
connection. The paper's *Add & Norm* is *post-norm*: x ← LayerNorm(x + sublayer(x)). Our models are *pre-norm*, like GPT-2:
x ← x + sublayer(LayerNorm(x)); the stream itself is never normalised between layers, which keeps a clean path
for gradients in deep stacks, and one final LayerNorm comes before the LM head.
LayerNorm(x) = (x − mean(x)) / √(var(x) + ε) · γ + β, over the d_model numbers of one token."""

FEED_FORWARD = """**Feed-forward network.** After attention mixes information between tokens, the same two-layer
network runs on every position alone: FFN(x) = act(x W_1 + b_1) W_2 + b_2, widened to d_ff (4 × d_model in our
models) and back. Ours use GELU where the paper used ReLU. A model trained *attention only* (the induction preset of
Train one yourself) has none: each of its layers is x + Attn(LayerNorm(x)) alone."""

SHIFTED_RIGHT = """**Outputs shifted right.** Training feeds the target sequence shifted one step right: the decoder
reads [start, y_1, …, y_{n−1}] and must predict [y_1, …, y_n], so with the causal mask position t predicts
token t+1 from tokens up to t only. A decoder-only model does the same with its own text: the logits at
position t are scored against token t+1. For folio-to-modern the decoder's first token is the start token
<|endoftext|>."""

CROSS_ATTENTION = """**Cross-attention** (encoder-decoder only). In each decoder layer, after its masked
self-attention, the queries come from the decoder's stream and the keys and values from the encoder's output
(after its final LayerNorm), the *memory*. There is no causal mask: every output token may look at every
source token. This is how folio-to-modern reads the Folio spelling while it writes the modern one."""

FOLIO_REWRITE = """**folio-to-modern** (the *Folio example* button) rewrites First Folio spelling into modern spelling,
one line at a time, as it was trained: its encoder reads one line, its decoder writes the modern line token by
token. A passage is rewritten line by line; the output keeps your line breaks."""

STEPS = f"""### Attention, step by step
- **What you see:** one head of one layer computing the output for one query token, with the real numbers of
  the model. Every line was recomputed here from the layer's input and weights and compared with the number
  the model itself computed in the same forward pass: "matches" gives the largest difference (float32;
  anything below 1e-5 is rounding).
- **How to read it:** vectors of d_model numbers are shown d_k per row; tables list one row per token, the
  query's own row highlighted. Masked keys show "masked" and get weight exactly 0. Click a token to follow it.

{ATTENTION}

{MASKS}

{ADD_NORM}"""

WORKED_EXAMPLE = f"""### A worked example: attention on "Hello World", done right
This project grew from early teaching notes on the Transformer, which work one example of attention by hand on
the two tokens "Hello World"; here it is recomputed with the model's own functions, the notes' one mistake shown
and corrected. Two tokens, d_model = 4, two heads with d_k = 3 whose W_Q, W_K, W_V are the notes' own (4 × 3), no mask (an
encoder), no W_O (the notes stop at the concatenation). The position encoding is computed by the model's own
`sinusoidal_encoding`.

{EMBEDDING}"""

LENS = """### Logit lens: what the model would say if it stopped after each layer
- **What you see:** for each layer, the 5 most likely next tokens after the chosen position (click a token),
  and a heatmap of the probability each layer gives to the token that really came next, at every position.
- **How it works:** the stream after layer l is read out the way the model reads its last one:
  p_l = softmax(LayerNorm_final(h_l) · E^T), with the final LayerNorm and the tied LM head (the embedding
  matrix E). The last row IS the model's prediction (a test holds it equal, bit for bit). The *embeddings* row
  reads the stream before any layer: with a tied head it mostly predicts the current token itself.
- **How to read it:** top to bottom, the prediction forming layer by layer; in the heatmap, a column turns
  dark at the layer where the model "knows" the next token."""

ABLATION = """### Head ablation: switch heads off
- **What you see:** the loss on your text (mean −log p of each next token, in nats) and the next-token
  probabilities, with and without the heads you remove; per token, how much harder the text became.
- **How it works:** removing head h multiplies its output softmax(q k^T/√d_k + bias) v by 0 before the heads
  are concatenated, so its slice of the input of W_O is zero (an edit at the heads' site, `modeling.ablate_heads`). *Rank every head*
  removes each head alone, one forward pass each, and draws the rise in loss as a layer × head map.
- **How to read it:** red cells are heads the model needs on this text; near-zero ones it can do without
  here. A removal can also lower the loss: no head is tuned to one text."""

SAMPLING = """### Sampling, seen
- **What you see:** the distribution of the next token after your prompt, redrawn as you move the controls.
  Bars: the probability after temperature, before any cut; the number on a bar is its height. Grey bars are
  the tokens top-k or top-p cut; hover a bar for the renormalised probability it is drawn with (its height
  divided by the kept tokens' sum, in the status line). Diamonds: the model's own probability at temperature 1.
  Below: the probabilities summed, most likely token first, over the whole vocabulary; the dashed line is
  where top-k or top-p cut (top-p 0.9 can keep hundreds of tokens, far past the bars above).
- **The formula:** p_i = exp(z_i / T) / Σ_j exp(z_j / T) for the logits z. T < 1 sharpens (T → 0 is greedy),
  T > 1 flattens. In this order (transformers' own processors, as `generate` applies them): the repetition
  penalty, temperature, *top-k* keeps the k most likely, *top-p* keeps the most likely tokens until their
  probability reaches p (of what top-k kept), and the kept ones are renormalised to sum to 1."""

HEADS = """### What each head does
- **Grid:** every layer (rows) × head (columns) of the attention on your text; each thumbnail is coloured from
  0 (white) to its own largest weight (dark). Click one to enlarge it.
- **Token view:** click a token to see what it attends to in every head of the layer.
- **Head types**, where the evidence is clear: the score is the average weight the head puts, over the
  queries (from the third token on), where its type says it looks: the *previous token* (t−1), the *first
  token* (a "sink" that holds weight a head does not need elsewhere), the *same token* (t), or, for
  *induction*, the token that followed the earlier occurrence of the current token, on random tokens repeated
  twice. A label appears when the score reaches the threshold; the baseline is what a head spreading its
  weight evenly would score.
- **Look for the induction circuit** in shakespeare-main, which learned to copy from its context: an induction
  head in layer 4 and, in the layer below, the previous-token head whose output its keys read. Give it a text that
  repeats (a line, then the same line again) and its induction head looks, from each token of the repeat, at the
  token that followed the same token the first time. The position-encoding models never learned this: no induction
  label there."""

EXPERIMENT = """### The experiment: five encodings, two seeds each
- **What you see:** five decoder-only models that are identical (size, data, steps) except for the position
  encoding, each trained twice with different seeds. The plot is the picture the length-extrapolation papers
  draw: the mean loss of the token at position p of a long window (p tokens of context before it; windows
  8 times the training context, over the whole test split), for the seed the app serves. The tables give
  bits per character for every seed, and the perplexity ratios at longer windows beside the published ones.
- **How it works:** up to the training context a token with more context before it is easier to predict, so
  every curve falls. Past the dotted line the model meets what it never trained on: combinations of sines and
  cosines no training position had, as the slow dimensions move on (sinusoidal); distances between query and
  key, so rotation angles, beyond any in training (RoPE); more tokens to average over (none, whose only clue
  to position is that count). ALiBi meets only larger distance penalties, which push attention further
  towards the nearby tokens it was trained on. A learned table has no row past its end: its curve stops there.
- **How to read it:** a curve that rises past the dotted line belongs to an encoding that does not extend;
  a flat one does. A gap between two encodings means something only when it is larger than the spread between
  two seeds of the same encoding: the tables say which gaps are."""

CONCEPTS = (EMBEDDING, ENCODINGS, ATTENTION, MASKS, ADD_NORM, FEED_FORWARD, SHIFTED_RIGHT, CROSS_ATTENTION)

GRADIENT_STEP = """### One gradient step: where learning pushes
- **The loss** is L = −log p(target | tokens 0..position of your text), in nats: near 0 when the model is sure
  of the target, large when it finds the target unlikely.
- **What a gradient is:** ∇L holds one number per weight, how fast L rises when that weight rises a little.
  The maps below draw its size (the L2 norm) for every parameter tensor, by its `state_dict` name, and for
  each head's slice of W_Q, W_K, W_V and W_O: the weights this one example pushes hardest.
- **Why the loss falls:** plain SGD moves every weight against its gradient, θ ← θ − lr·∇L, on a copy of the
  model (the model everyone uses never changes). For a small step the loss falls by about lr·‖∇L‖², because
  minus the gradient is the direction in which L falls fastest.
- **What the learning rate does:** it is the size of the step. The status line prints ‖∇L‖, the first-order
  prediction −lr·‖∇L‖² and the change measured, for the model and text shown. While the step is small the two
  agree; try 0.001, then 0.01, 1 and 10 on the example: the measured change leaves the prediction behind, the
  loss may end above where it started (the step overshot) and another token takes over. Far below 1e-9 nothing
  changes at all: the update is smaller than float32 can register.
- **The target is one token,** with its leading space: after a space the model predicts ` day`, and `day` is
  another token (the status says so when you type it).
- **The head maps** outline the model's induction head, when it has one (measured on random tokens read twice):
  the head that copies from the context is often among those a step on a copyable target pushes hardest."""

TRAIN_LIVE = """### Train one yourself
- **What happens:** a Transformer with random weights learns to predict the next token. Each step reads a
  batch of sequences, computes the loss (the mean −log p of every next token), and AdamW moves every weight a
  little against its gradient, averaged over recent steps and scaled by their recent size (a constant learning
  rate, no weight decay).
- **Why the loss falls:** each step follows the slope of the loss on the batch it read; new batches keep it
  honest, so what is learnt is what the data have in common. The curve starts at step 0, the fresh model, near
  ln V (guessing every token of the vocabulary equally, the dashed line), and shows the loss of every step.
- **The learning rate** scales every step: too small and the curve falls slowly; too large and the steps
  overshoot, so the curve stalls or jumps about. Try the default and the largest allowed on Shakespeare.
- **An induction head** completes a pattern seen before: having read "… A B … A", it predicts B. Two heads in
  two layers make it: one marks each token's predecessor, the other finds the earlier occurrence of the current
  token and copies what came next. On the probe (L random tokens, then the same L again; the lines mark where
  the second copy starts) it draws a stripe L−1 below the main diagonal. Its score is the weight on that stripe,
  the least over three lengths L, so a head that looks a fixed distance back scores low.
- **The induction preset** sets the ingredients that favour it: random tokens of a large vocabulary (only
  copying predicts them, and a token seldom recurs by chance), half of them copies at varying offsets, attention
  only (no feed-forward to learn token statistics with), and the loss counted on the copyable tokens alone, so the
  curve is the loss on the copies. The sample shows the prompt, what the model writes and, under it, what a copy
  would be. Expect a plateau near ln V (the dashed line), then the sudden drop as the heads form: the status line
  names the step at which one first passed the label threshold. A longer recorded run is on the *Watch it learn* tab.
- **Keep it:** when a job ends, download the zip, unzip it into a folder `my-model`, and load it with
  `AutoModelForCausalLM.from_pretrained("my-model", trust_remote_code=True)` (and `AutoTokenizer`, for text)."""

TIMELINE = """### Watch it learn: an induction head forms
- **What you see:** a two-layer Transformer that reads one token per byte, trained from scratch and saved at
  snapshots along the way. The slider picks a snapshot: the curves mark its step, and the attention grid and
  the sample are computed by that snapshot's weights on your text.
- **An induction head** completes a pattern seen before: having read "… A B … A", it predicts B. It is how a
  model copies from its context, so a passage read a second time costs far less than the first time (the
  *repeated-passage ratio*: the loss on the second copy over the loss on the first).
- **Two heads in two layers make it.** A *previous-token head* in layer 0 attends from each token to the one
  before and writes "the token before me was A" into that token's stream. An *induction head* in layer 1 reads
  this through its keys (*K-composition*: its keys are computed from the stream layer 0 wrote into). At a
  token A, its query matches the key of the token that came after an earlier A; it attends there and copies that
  token, B, into the prediction. These models add no position to the stream: RoPE turns the queries and keys
  inside each attention layer, which is how the layer-0 head finds the token before; what it passes on is which
  token that was.
- **Why it appears suddenly:** neither head helps alone. A previous-token head that nothing reads does not change
  the prediction, and an induction head has nothing to match until the previous-token head writes it. So the
  loss on what could be copied stays flat while the model learns which bytes follow which; once both heads begin
  to form, each makes the other useful, they grow together, and that loss drops: a *phase change*
  (Olsson et al. 2022).
- **What to look for:** in the curves, layer-1 heads' induction scores jumping (the status line names every
  head that forms, and when) at the steps where a layer-0 head's previous-token score rises; in the lowest plot,
  the pair that makes the circuit rising with them: how much of a layer-1 head's induction score it loses when
  that layer-0 head is removed (K-composition, measured on the probe: with RoPE the weights alone cannot say);
  and the training loss of timeline-repeats dropping there (four in five of its sequences are random tokens,
  which only copying predicts). In the grid, on the default text (a line, then the
  same line again cut a few words in): a layer-0 stripe just below the diagonal (each token looks at the one
  before), and in layer 1, in the rows of the repeat, a stripe L − 1 below the diagonal (L = 39: the bytes from
  one copy's start to the next), each token looking at the token after its first occurrence. Under the sample, the
  next bytes the snapshot guesses right as it reads your text, each under its byte: after the phase change more
  of the repeat than of the first line (the status line counts both). This small model copies random tokens almost perfectly but text only in part (it read few
  repeated passages, and repeats at most 64 bytes apart), so on text its greedy sample copies a few words at best.
  timeline-plain, the same model trained on the plays alone, is the control: its best head (dashed) stays low and
  its guesses are no better in the repeat, so the data decide.
- **Scores and losses:** the head scores are measured on a fixed probe, random tokens read twice (the standard
  induction score), not on your text. The validation loss is on the same held-out plays for both runs; each
  training loss is on its run's own data.
- **A real model learning** (the section at the foot of this tab): Pythia publishes the checkpoints of its training as
  revisions of its Hub repo (`step0` … `step143000`). Name a repo and the revisions, and each is downloaded once,
  converted into this app's Transformer and measured on the same probe: every head's scores over training, and for
  the revision you pick, its best induction head on your text, its sample and its guesses."""

HUB_TIMELINE = """A repo that publishes its training checkpoints as revisions, as Pythia does (`step0` … `step143000`;
EleutherAI/pythia-14m is small enough for this CPU): each revision asked for is downloaded once (then cached for
everyone), converted into this app's Transformer, and measured as the recorded runs are: every head's induction and
previous-token score on the probe (random tokens read twice), and on your text above (read with the repo's own
tokenizer) the attention of the revision's best induction head, its greedy sample and its right guesses."""
