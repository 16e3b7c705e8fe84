"""The page's CSS (``app.LAUNCH_OPTIONS`` hands it to ``launch``): fonts, status lines, plot rows, monospace and
aligned text boxes, the experiment's tables, the model notes, the trace table, one colour per position encoding."""

from explorer.present import figures

CSS = "\n".join([
    # the theme's first font, Source Sans Pro, may arrive as a subset with a few glyphs in its semibold cut: a heading
    # then mixes two fonts ("A" in one, the rest in another); the system's sans-serif has every glyph in every weight
    ":root, .gradio-container {--font: ui-sans-serif, system-ui, sans-serif !important}",
    ".status-line {min-height: 1.5em}",
    ".plot-row {gap: 8px}",
    ".monospace textarea {font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace !important}",
    # lines aligned token under token (the guesses) scroll sideways rather than wrap out of alignment
    ".aligned textarea {white-space: pre !important; overflow-x: auto !important}",
    "#experiment-tables table {display: block; overflow-x: auto; max-width: 100%}",
    "#experiment-tables td, #experiment-tables th {white-space: nowrap; word-break: normal !important}",
    ".model-note {font-size: 0.85em; color: var(--body-text-color-subdued)}",
    "#trace-table [role=gridcell], #trace-table [role=gridcell] *, #trace-table [role=columnheader] * {font-family: var(--font)"
    " !important; font-size: 13px; word-break: normal !important; overflow-wrap: normal !important}",
    *(f"#compare-{e} textarea {{border-left: 5px solid {c}}} #compare-{e} label span {{color: {c}; font-weight: 600}}"
      for e, c in figures.ENCODING_COLOURS.items()),
])
