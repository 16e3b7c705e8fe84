"""HTML every view shares: the click handler and style of clickable items, the token strip. Everything that came
from a user or a tokenizer goes through ``html.escape``.
"""

import html


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
.head-grid .name { display: block; font-size: 11px; white-space: nowrap; }
.head-grid .badge { display: inline-block; font-size: 10px; background: #ebf8ff; color: #2c5282; border-radius: 3px; padding: 0 3px; margin: 1px; }
.token-strip { display: flex; flex-wrap: wrap; gap: 3px; font-size: 14px; padding: 4px 0; }
.token-strip span { border: 1px solid var(--border-color-primary); border-radius: 4px; padding: 1px 4px; cursor: pointer; white-space: pre; }
.token-strip span.selected { background: #2b6cb0; color: white; }
.token-strip span:hover { border-color: #2b6cb0; }
table.lens td { text-align: left; }
.head-types { font-size: 13px; } .head-types ul { margin: 2px 0 6px 18px; } .head-types .base { color: var(--body-text-color-subdued); }
table.lens td.p { text-align: right; color: #4a5568; }
"""


def token_strip_html(labels: list[str], selected: int | None = None) -> str:
    """The tokens as clickable chips (index-prefixed labels, as the plots show them)."""
    chips = "".join(f'<span data-index="{i}" class="{"selected" if i == selected else ""}" title="token {i}">'
                    f"{html.escape(label)}</span>" for i, label in enumerate(labels))
    return f'<div class="token-strip">{chips}</div>'
