"""Train one yourself: the live loss curve, a head's attention on the probe, the induction scores, and the teaching
text.
"""


import numpy as np
import plotly.graph_objects as go

from explorer.generation.labels import TEXT_MARKS
from explorer.present.figures import AFTER, BEFORE, LAYOUT, heatmap_figure, wrapped_title
from explorer.learning.live_settings import TEXT_KINDS
from explorer.learning.live_snapshots import SAMPLE_PROMPT, SAMPLE_PROMPT_TOKENS, Snapshot


def sample_label(data: str) -> str:
    """The sample box's label for the kind of data trained on: what its prompt is, as ``live_snapshots.sample``
    takes it."""
    if data in TEXT_KINDS:
        prompt = (f"the first {SAMPLE_PROMPT_TOKENS} tokens of your text" if data == "own-text"
                  else f"“{SAMPLE_PROMPT.strip()}”")
        return f"{SAMPLE_LABEL}. It continues {prompt}"
    return (f"{SAMPLE_LABEL}. The prompt is the probe's first copy of random tokens and 3 tokens of its second; under "
            "what the model writes, what a copy would be")


SAMPLE_LABEL = f"A sample from the current weights (greedy; {TEXT_MARKS})"

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
  `AutoModelForCausalLM.from_pretrained("my-model", trust_remote_code=True)` and `AutoTokenizer` (a model of random
  tokens reads one symbol per token id: `0`-`9`, `A`-`Z`, `a`-`z`, then other letters). "Open in every tab" opens it
  in every tab, Activation patching with an example in its symbols."""


def loss_curve_figure(logged_steps: list[int], losses: list[float], steps: int, uniform: float | None = None,
                      copies_only: bool = False) -> go.Figure:
    """The loss of every step, from step 0 (the fresh model), on an x axis as long as the job; ``uniform``: the
    loss of a model guessing every token of the vocabulary equally, ln V; ``copies_only``: the loss counts only
    the copyable tokens (said in the title)."""
    fig = go.Figure(go.Scatter(x=logged_steps, y=losses, mode="lines", name="training loss",
                               hovertemplate="step %{x}<br>loss %{y:.3f} nats<extra></extra>"))
    if uniform is not None:
        fig.add_hline(y=uniform, line_dash="dash", line_color=BEFORE,
                      annotation_text=f"guessing uniformly: ln V = {uniform:.2f}", annotation_position="top right")
    top = max([*losses, uniform or 0.0], default=1.0)
    fig.update_layout(title="Training loss on the copied tokens only" if copies_only else "Training loss (every step)",
                      xaxis_title="step", yaxis_title="loss (nats per token)", height=340,
                      xaxis=dict(range=[0, steps]), yaxis=dict(range=[0, top * 1.1 if np.isfinite(top) else None]), **LAYOUT)
    return fig


PROBE_PLOT_PX = 230  # px of the probe's attention map, below a title of any length


def probe_attention_figure(s: Snapshot) -> go.Figure:
    """(2L, 2L) attention of the watched head on the probe: random tokens r_0..r_{L-1}, then the same again.
    An induction head lights the diagonal L−1 below the main one: from r_i's copy to r_{i+1}'s first place. Lines
    mark where the second copy starts."""
    fig = heatmap_figure(s.attention, "", "key position", "query position", colorscale="Blues", zmid=None,
                         hover="weight %{z:.3f}")
    L = s.copy_start
    fig.add_hline(y=L - 0.5, line_color=AFTER, line_width=1)
    fig.add_vline(x=L - 0.5, line_color=AFTER, line_width=1)
    fig.add_annotation(x=0, y=L - 0.5, text="second copy starts", showarrow=False, xanchor="left", yanchor="top",
                       font=dict(color=AFTER, size=11))
    title, top = wrapped_title(f"L{s.layer}.H{s.head}: {s.watched or 'the head shown'}", "on the probe: random tokens, twice")
    fig.update_layout(title=title, height=PROBE_PLOT_PX + top + LAYOUT["margin"]["b"], margin=dict(LAYOUT["margin"], t=top))
    return fig


def induction_figure(scores: list[list[float]], baseline: float) -> go.Figure:
    """Layer x head: each head's induction score (its least over three offsets), the value in each cell."""
    z = np.asarray(scores, dtype=float)
    n_layers, n_heads = z.shape
    fig = go.Figure(go.Heatmap(
        z=z, x=[f"H{h}" for h in range(n_heads)], y=[f"L{l}" for l in range(n_layers)], colorscale="Blues", zmin=0,
        zmax=1, text=[[f"{v:.2f}" for v in row] for row in z], texttemplate="%{text}", colorbar=dict(title="score"),
        hovertemplate="layer %{y}, head %{x}<br>induction score %{z:.3f}<extra></extra>"))
    fig.update_layout(title=f"Induction score of every head<br>(spread evenly: {baseline:.2f})", xaxis_title="head",
                      yaxis_title="layer", height=max(240, 150 + 50 * n_layers), **{**LAYOUT, "margin": dict(LAYOUT["margin"], t=80)})
    fig.update_yaxes(autorange="reversed")
    return fig
