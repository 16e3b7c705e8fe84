"""Attention, step by step: the steps as HTML with their numbers, and the teaching text.
"""

import html

import numpy as np

from explorer.core.parity import PARITY_TOLERANCE
from explorer.views.architecture import Architecture
from explorer.views.steps import MASKED_BELOW, Step
from explorer.present.concepts import ADD_NORM, ATTENTION, EMBEDDING, MASKS

ROUNDING = f"{PARITY_TOLERANCE:.0e}".replace("e-0", "e-")  # '1e-4'
FITTING_COLUMNS = 10  # a table's columns of three-decimal numbers that an 800 px page shows whole (11 at most, measured)

STEPS = f"""### Attention, step by step
- **What you see:** one head of one layer computing the output for one query token, with the real numbers of
  the model. Every line was recomputed here from the layer's input and weights and compared with the number
  the model itself computed in the same forward pass: "matches" gives the largest difference (float32 keeps about
  7 digits, so a difference up to {ROUNDING} of the numbers' size, or {ROUNDING} for numbers below 1, is rounding).
- **How to read it:** vectors of d_model numbers are shown one head's width (d_k) per row; tables list one row
  per token, the query's own row highlighted. Masked keys show "masked" and get weight exactly 0. Click a token to follow it.

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


def number(value: float, full: bool) -> str:
    """Rounded (3 decimals; small numbers in exponent form) or every digit of its float type."""
    if value < MASKED_BELOW:
        return "masked"
    if full:
        return np.format_float_positional(value, unique=True, trim="-")
    if value != 0 and abs(value) < 1e-3:
        mantissa, exponent = f"{value:.1e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    return f"{value:.3f}"


def values_table(step: Step, full: bool) -> str:
    values = step.values if step.values.ndim == 2 else step.values[None]
    rows = step.rows or [""] * len(values)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in (step.columns or [str(i) for i in range(values.shape[1])]))
    body = []
    for i, (label, row) in enumerate(zip(rows, values)):
        cells = "".join('<td class="masked">masked</td>' if v < MASKED_BELOW else f"<td>{number(v, full)}</td>" for v in row)
        body.append(f'<tr{" class=hl" if i == step.highlight else ""}><th>{html.escape(label)}</th>{cells}</tr>')
    return (f'<div class="teach-scroll"><table class="teach-values"><thead><tr><th></th>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


def shape_text(step: Step) -> str:
    """The quantity's true shape, as torch writes it ("(256,)", "(12, 32)"), then how the table arranges it, and
    where the table is wider than an 800 px page shows (``FITTING_COLUMNS``), that it scrolls sideways."""
    shape = "(" + ", ".join(map(str, step.shape)) + ("," if len(step.shape) == 1 else "") + ")"
    columns = step.values.shape[-1] if step.values.ndim else 1
    scrolls = f"; scroll sideways for all {columns} columns →" if columns > FITTING_COLUMNS else ""
    return f"shape {shape}" + (f", {step.layout}" if step.layout else "") + scrolls


def model_html(architecture: Architecture) -> str:
    """What the model in front of the learner is, one line per choice (``Architecture.summary``)."""
    lines = "".join(f"<li>{html.escape(line)}</li>" for line in architecture.summary())
    return f'<div class="teach-model note"><b>This model:</b><ul>{lines}</ul></div>'


def steps_html(steps: list[Step], full: bool = False, architecture: Architecture | None = None) -> str:
    """Each step: title, formula, shape, the check against the model's own number, note, values; first, when
    ``architecture`` is given, what the model is."""
    parts = [] if architecture is None else [model_html(architecture)]
    for i, step in enumerate(steps, start=1):
        shape = html.escape(shape_text(step))
        match = ""
        if step.model_parity is not None:
            ok = step.model_parity.rounding
            match = (f'<span class="match {"ok" if ok else "bad"}">{"✓ matches" if ok else "✗ differs from"} the model\'s own '
                     f"number (max difference {step.model_parity.gap:.1e})</span>")
        note = f'<div class="note">{html.escape(step.note)}</div>' if step.note else ""
        parts.append(f'<div class="teach-step"><h4>{i}. {html.escape(step.title)}</h4>'
                     f'<span class="formula">{html.escape(step.formula)}</span><span class="shape">{shape}</span>{match}'
                     f"{note}{values_table(step, full)}</div>")
    return f'<div class="teach-steps">{"".join(parts)}</div>'
