"""HTML of the teaching views: the steps with their numbers, the clickable head grid, the token strip, the
logit-lens table. Everything that came from a user or a tokenizer goes through ``html.escape``.

The clickable parts carry ``data-layer`` / ``data-head`` / ``data-index`` attributes; ``CLICK_JS`` (a
``gr.HTML`` component's ``js_on_load``) turns a click on one into a ``click`` event carrying them.
"""

import base64
import html
import io

import numpy as np
from PIL import Image

from .heads import HeadTypes
from .lens import LogitLens
from .steps import MASKED_BELOW, Step

CLICK_JS = """
element.addEventListener('click', (event) => {
  const target = event.target.closest('[data-head], [data-index]');
  if (!target) return;
  element.querySelectorAll('.selected').forEach((item) => item.classList.remove('selected'));
  target.classList.add('selected');
  if (target.dataset.head !== undefined) trigger('click', {layer: Number(target.dataset.layer), head: Number(target.dataset.head)});
  else trigger('click', {index: Number(target.dataset.index)});
});
"""

CSS = """
.teach-steps { display: flex; flex-wrap: wrap; gap: 6px 28px; align-items: flex-start; }
.teach-step { margin: 0 0 10px 0; flex: 0 1 auto; max-width: 100%; min-width: 0; }
.teach-step h4 { margin: 0 0 2px 0; font-size: 15px; }
.teach-step .formula { font-family: ui-monospace, monospace; font-size: 13px; background: var(--background-fill-secondary); padding: 1px 6px; border-radius: 4px; }
.teach-step .shape, .teach-step .match { font-size: 12px; color: var(--body-text-color-subdued); margin-left: 8px; }
.teach-step .match.ok { color: #2f855a; }
.teach-step .match.bad { color: #c53030; font-weight: bold; }
.teach-step .note { font-size: 13px; margin: 2px 0 4px 0; }
.teach-scroll { overflow: auto; max-width: 100%; max-height: 420px; border: 1px solid var(--border-color-primary); border-radius: 4px;
  background: linear-gradient(to left, var(--background-fill-primary) 40%, transparent) right center / 36px 100% no-repeat local,
              radial-gradient(farthest-side at 100% 50%, rgba(43, 108, 176, 0.45), transparent) right center / 16px 100% no-repeat scroll; }
table.teach-values { border-collapse: collapse; font-family: ui-monospace, monospace; font-size: 12px; }
table.teach-values th, table.teach-values td { padding: 1px 4px; white-space: nowrap; border-bottom: 1px solid var(--border-color-primary); }
table.teach-values td { text-align: right; font-variant-numeric: tabular-nums; }
table.teach-values thead th { position: sticky; top: 0; background: var(--background-fill-primary); font-weight: normal; color: var(--body-text-color-subdued); }
table.teach-values tbody th { position: sticky; left: 0; background: var(--background-fill-primary); text-align: left; font-weight: normal; }
table.teach-values tr.hl th, table.teach-values tr.hl td { background: #fefcbf; }
table.teach-values td.masked { color: var(--body-text-color-subdued); }
.head-grid { display: grid; gap: 6px; align-items: start; }
.head-grid .colhead, .head-grid .rowhead { font-size: 12px; color: var(--body-text-color-subdued); text-align: center; align-self: center; }
.head-grid button { border: 2px solid transparent; border-radius: 6px; padding: 2px; background: none; cursor: pointer; min-width: 0; }
.head-grid button:hover { border-color: #90cdf4; }
.head-grid button.selected { border-color: #2b6cb0; }
.head-grid img { width: 100%; aspect-ratio: 1; image-rendering: pixelated; border: 1px solid var(--border-color-primary); display: block; }
.head-grid .name { display: block; font-size: 11px; }
.head-grid .badge { display: inline-block; font-size: 10px; background: #ebf8ff; color: #2c5282; border-radius: 3px; padding: 0 3px; margin: 1px; }
.token-strip { display: flex; flex-wrap: wrap; gap: 3px; font-size: 14px; padding: 4px 0; }
.token-strip span { border: 1px solid var(--border-color-primary); border-radius: 4px; padding: 1px 4px; cursor: pointer; white-space: pre; }
.token-strip span.selected { background: #2b6cb0; color: white; }
.token-strip span:hover { border-color: #2b6cb0; }
table.lens td { text-align: left; }
.head-types { font-size: 13px; } .head-types ul { margin: 2px 0 6px 18px; } .head-types .base { color: var(--body-text-color-subdued); }
table.lens td.p { text-align: right; color: #4a5568; }
"""


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
    """The quantity's true shape, as torch writes it ("(256,)", "(12, 32)"), then how the table arranges it."""
    shape = "(" + ", ".join(map(str, step.shape)) + ("," if len(step.shape) == 1 else "") + ")"
    return f"shape {shape}" + (f", {step.layout}" if step.layout else "")


def steps_html(steps: list[Step], full: bool = False) -> str:
    """Each step: title, formula, shape, the check against the model's own number, note, values."""
    parts = []
    for i, step in enumerate(steps, start=1):
        shape = html.escape(shape_text(step))
        match = ""
        if step.model_difference is not None:
            ok = step.model_difference <= 1e-5
            match = (f'<span class="match {"ok" if ok else "bad"}">{"✓ matches" if ok else "✗ differs from"} the model\'s own '
                     f"number (max difference {step.model_difference:.1e})</span>")
        note = f'<div class="note">{html.escape(step.note)}</div>' if step.note else ""
        parts.append(f'<div class="teach-step"><h4>{i}. {html.escape(step.title)}</h4>'
                     f'<span class="formula">{html.escape(step.formula)}</span><span class="shape">{shape}</span>{match}'
                     f"{note}{values_table(step, full)}</div>")
    return f'<div class="teach-steps">{"".join(parts)}</div>'


def _png(weights: np.ndarray) -> str:
    """A data URI: one pixel per (query, key), white at 0 to dark blue at the map's largest weight (a 256-colour
    palette image: a third of the bytes of RGB)."""
    levels = np.rint(weights / max(float(weights.max()), 1e-12) * 255).astype(np.uint8)
    ramp = np.linspace(0.0, 1.0, 256)[:, None]
    palette = (np.array([255.0, 255.0, 255.0]) + ramp * (np.array([8.0, 48.0, 107.0]) - 255.0)).astype(np.uint8)
    image = Image.frombytes("P", (levels.shape[1], levels.shape[0]), np.ascontiguousarray(levels).tobytes())
    image.putpalette(palette.flatten().tolist())
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def head_grid_html(weights: np.ndarray, types: HeadTypes | None, selected: tuple[int, int] | None = None) -> str:
    """Every layer x head as a clickable thumbnail of its attention, with its type labels (score, threshold).

    weights: (layers, heads, queries, keys)."""
    n_layers, n_heads = weights.shape[:2]
    cells = ['<div></div>'] + [f'<div class="colhead">H{h}</div>' for h in range(n_heads)]
    for layer in range(n_layers):
        cells.append(f'<div class="rowhead">L{layer}</div>')
        for head in range(n_heads):
            found = types.labels(layer, head) if types is not None else []
            badges = "".join(f'<span class="badge">{html.escape(kind)} {score:.2f}</span>' for kind, score in found)
            tip = f"layer {layer}, head {head}" + "".join(
                f"; {kind} {score:.2f} (threshold {types.threshold:g})" for kind, score in found)
            chosen = " selected" if selected == (layer, head) else ""
            cells.append(f'<button class="cell{chosen}" data-layer="{layer}" data-head="{head}" title="{html.escape(tip)}" '
                         f'aria-label="{html.escape(tip)}"><img alt="" src="{_png(weights[layer, head])}">'
                         f'<span class="name">L{layer} H{head}</span>{badges}</button>')
    style = f"grid-template-columns: 2.2em repeat({n_heads}, minmax(0, 1fr));"
    return f'<div class="head-grid" style="{style}">{"".join(cells)}</div>'


def head_types_html(types: HeadTypes) -> str:
    """One line per head type: the heads that reach the threshold with their scores, or the strongest head
    when none does, and the uniform baseline for scale."""
    lines = []
    for kind, scores in types.scores.items():
        found = sorted(((float(scores[l, h]), l, h) for l in range(scores.shape[0]) for h in range(scores.shape[1])
                        if scores[l, h] >= types.threshold), reverse=True)
        if found:
            heads = ", ".join(f"L{l}.H{h} {s:.2f}" for s, l, h in found)
        else:
            layer, head, score = types.strongest(kind)
            heads = f"none reaches it (strongest: L{layer}.H{head} {score:.2f})"
        lines.append(f"<li><b>{html.escape(kind)}</b>: {heads} <span class=base>(even spread: {types.baseline[kind]:.2f})</span></li>")
    for kind, why in types.unmeasured.items():
        lines.append(f"<li><b>{html.escape(kind)}</b>: not measured ({html.escape(why)})</li>")
    return f'<div class="head-types">Head types, threshold {types.threshold:g}:<ul>{"".join(lines)}</ul></div>'


def token_strip_html(labels: list[str], selected: int | None = None) -> str:
    """The tokens as clickable chips (index-prefixed labels, as the plots show them)."""
    chips = "".join(f'<span data-index="{i}" class="{"selected" if i == selected else ""}" title="token {i}">'
                    f"{html.escape(label)}</span>" for i, label in enumerate(labels))
    return f'<div class="token-strip">{chips}</div>'


def lens_table_html(lens: LogitLens) -> str:
    """Rows: embeddings, layer 0, ...; cells: the top tokens with their probabilities."""
    body = []
    for row, labels, probs in zip(lens.rows, lens.top_labels, lens.top_probs):
        cells = "".join(f"<td>{html.escape(label)}</td><td class=p>{p:.3f}</td>" for label, p in zip(labels, probs))
        body.append(f"<tr><th>{html.escape(row)}</th>{cells}</tr>")
    head = "".join(f"<th>#{k + 1}</th><th>p</th>" for k in range(lens.top_probs.shape[1]))
    caption = f"Top {lens.top_probs.shape[1]} next tokens after {html.escape(lens.tokens[lens.position])} (position {lens.position})"
    return (f'<div class="note">{caption}</div><div class="teach-scroll"><table class="teach-values lens">'
            f"<thead><tr><th>read after</th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>")
