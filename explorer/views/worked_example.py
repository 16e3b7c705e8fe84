"""A worked example from the early teaching notes this project grew from, done right with the project's own functions.

"Hello World" as two 4-dimensional embeddings, the sinusoidal encoding added, then two attention heads whose
W_Q, W_K, W_V (4 x 3 each) are the notes' own. The notes' positional encoding was wrong: it used the
DIMENSION index where the formula has the PAIR index. ``notes_positional_encoding`` reproduces their numbers
so the view can show the difference and what it changes downstream.
"""

import numpy as np
import torch

from explorer.views.steps import Step, attend
from modeling.modeling_scratch_transformer import sinusoidal_encoding

TOKENS = ["Hello", "World"]
EMBEDDINGS = [[1, 2, 3, 4], [2, 3, 4, 5]]
D_MODEL = 4
HEADS = {  # the notes' matrices, x @ W (4 x 3): d_head = 3
    1: {"W_Q": [[0, 0, 0], [1, 1, 0], [0, 0, 1], [1, 0, 0]],
        "W_K": [[1, 0, 1], [0, 1, 0], [1, 0, 1], [0, 1, 0]],
        "W_V": [[0, 1, 1], [1, 0, 0], [1, 0, 1], [0, 1, 0]]},
    2: {"W_Q": [[1, 0, 1], [0, 1, 0], [1, 0, 0], [0, 1, 1]],
        "W_K": [[0, 1, 1], [1, 0, 1], [1, 1, 0], [0, 1, 0]],
        "W_V": [[1, 0, 0], [0, 1, 1], [0, 0, 1], [1, 0, 0]]},
}
DIMS = [f"{d} ({'sin' if d % 2 == 0 else 'cos'}, i={d // 2})" for d in range(D_MODEL)]


def notes_positional_encoding(n_positions: int, d_model: int) -> torch.Tensor:
    """THE NOTES' BUG, kept to compare: sin/cos alternate by dimension, but the exponent uses the dimension
    index (2 * dim / d) instead of the pair index (2 * (dim // 2) / d)."""
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]
    dim = torch.arange(d_model, dtype=torch.float64)[None, :]
    angle = pos / 10000 ** (2 * dim / d_model)
    return torch.where(dim % 2 == 0, angle.sin(), angle.cos())


def heads_of(x: torch.Tensor) -> list[dict[str, torch.Tensor]]:
    """Each head's q, k, v, scores, weights and output for input rows x (tokens, 4)."""
    results = []
    for weights in HEADS.values():
        q, k, v = (x @ torch.tensor(weights[name], dtype=x.dtype) for name in ("W_Q", "W_K", "W_V"))
        scores, attention, output = attend(q, k, v)
        results.append(dict(q=q, k=k, v=v, scores=scores, weights=attention, output=output))
    return results


def worked_example() -> tuple[list[Step], str]:
    """The steps, and one paragraph on where the notes went wrong and what it changes (numbers computed here)."""
    E = torch.tensor(EMBEDDINGS, dtype=torch.float64)
    pe = sinusoidal_encoding(torch.arange(len(TOKENS)), D_MODEL).double()
    wrong = notes_positional_encoding(len(TOKENS), D_MODEL)
    x = E + pe
    heads, wrong_heads = heads_of(x), heads_of(E + wrong)
    steps = [
        Step("Token embeddings E", "one row per token (the notes' values)", E.numpy(), TOKENS, DIMS,
             f"The notes add PE to E as it is; the paper and our shipped models add it to E[x]·√d_model "
             f"(×{D_MODEL ** 0.5:g} here): "
             "see 'Token embedding, × √d_model or not' above."),
        Step("Sinusoidal position encoding PE", "PE(pos, 2i) = sin(pos / 10000^(2i/d)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d))",
             pe.numpy(), [f"pos {p}" for p in range(len(TOKENS))], DIMS,
             "i is the PAIR index: dimensions 2i and 2i+1 share one frequency. Position 1 is "
             "[sin 1, cos 1, sin 0.01, cos 0.01]. Computed by the model's own sinusoidal_encoding."),
        Step("What the notes printed instead", "sin/cos of pos / 10000^(2·dim/d): the dimension index in the exponent",
             wrong.numpy(), [f"pos {p}" for p in range(len(TOKENS))], DIMS, "Wrong: see 'Where the notes went wrong' above the steps."),
        Step("Input X = E + PE", "X = E + PE", x.numpy(), TOKENS, DIMS),
    ]
    for h, (weights, result) in enumerate(zip(HEADS.values(), heads), start=1):
        dims = [f"{c}" for c in range(3)]
        for name in ("W_Q", "W_K", "W_V"):
            steps.append(Step(f"Head {h}: {name}", f"{name} (4 × 3), the notes' matrix", np.array(weights[name], dtype=float),
                              [f"in {r}" for r in range(D_MODEL)], dims))
        steps += [
            Step(f"Head {h}: queries Q = X W_Q", "Q = X W_Q", result["q"].numpy(), TOKENS, dims),
            Step(f"Head {h}: keys K = X W_K", "K = X W_K", result["k"].numpy(), TOKENS, dims),
            Step(f"Head {h}: values V = X W_V", "V = X W_V", result["v"].numpy(), TOKENS, dims),
            Step(f"Head {h}: scores", "Q K^T / √d_k,  d_k = 3", result["scores"].numpy(), TOKENS, TOKENS,
                 "Rows: queries; columns: keys. No mask: the notes' example is an encoder (every token sees every token)."),
            Step(f"Head {h}: weights", "softmax over each row", result["weights"].numpy(), TOKENS, TOKENS,
                 "Each row sums to 1. The scores are tens apart (X is not normalised), so softmax puts almost all "
                 "weight on one key; pre-norm models (ours as shipped, GPT-2, Llama, Pythia) normalise the stream "
                 "before attention, which keeps scores small."),
            Step(f"Head {h}: output", "weights · V", result["output"].numpy(), TOKENS, dims),
        ]
    concat = torch.cat([r["output"] for r in heads], dim=-1)
    wrong_concat = torch.cat([r["output"] for r in wrong_heads], dim=-1)
    steps.append(Step("Both heads concatenated", "Concat(head_1, head_2)  (2 × 6)", concat.numpy(), TOKENS,
                      [f"h1.{c}" for c in range(3)] + [f"h2.{c}" for c in range(3)],
                      "A real layer multiplies this by W_O (6 × 4 here) to return to d_model; the notes stop here."))
    steps.append(Step("With the notes' PE instead", "the same computation on E + the notes' PE", wrong_concat.numpy(),
                      TOKENS, [f"h1.{c}" for c in range(3)] + [f"h2.{c}" for c in range(3)]))
    change = float((concat - wrong_concat).abs().max())
    right_freq = [10000 ** (-2 * (d // 2) / D_MODEL) for d in range(D_MODEL)]
    wrong_freq = [10000 ** (-2 * d / D_MODEL) for d in range(D_MODEL)]
    where_wrong = (
        f"**Where the notes went wrong.** They wrote 10000^(2i/d) with i the dimension index (0, 1, 2, 3) instead of "
        f"the pair index (0, 0, 1, 1), so the four dimensions turned at frequencies {_numbers(wrong_freq)} instead of "
        f"{_numbers(right_freq)}: position 1 became {_numbers(wrong[1].tolist())} instead of {_numbers(pe[1].tolist())}. "
        f"It matters because a sine and a cosine sharing one frequency make PE(pos + k) a fixed rotation of PE(pos), "
        f"which is what lets attention read relative offsets; with the wrong frequencies three of the four dimensions "
        f"barely move with position, so the encoding carries little position at all. Here it changes the heads' "
        f"outputs by up to {change:.2f}."
    )
    return steps, where_wrong


def _numbers(values) -> str:
    return "[" + ", ".join(f"{v:.5g}" for v in values) + "]"
