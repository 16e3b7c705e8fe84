"""The page's CSS (``app.LAUNCH_OPTIONS`` hands it to ``launch``): fonts, status lines, plot rows, monospace and
aligned text boxes, the experiment's tables, the model notes, the trace table, one colour per position encoding; and
the page's head script (``HEAD``): every plotly figure of every tab fails alone (``PLOTLY_GUARD_JS``)."""

from explorer.present import figures

CSS = "\n".join([
    # the theme's first font, Source Sans Pro, may arrive as a subset with a few glyphs in its semibold cut: a heading
    # then mixes two fonts ("A" in one, the rest in another); the system's sans-serif has every glyph in every weight
    ":root, .gradio-container {--font: ui-sans-serif, system-ui, sans-serif !important}",
    ".status-line {min-height: 1.5em}",
    # a status's table (the estimate against the exact grids) breaks between words, never inside one ("correla-tion")
    ".status-line table th, .status-line table td {word-break: normal !important; overflow-wrap: normal !important; "
    "padding: 4px 10px !important}",
    ".plot-row {gap: 8px}",
    ".results-row:not(:has(.js-plotly-plot)) {display: none !important}",  # a row of plots none of which is drawn yet
    ".monospace textarea {font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace !important}",
    # lines aligned token under token (the guesses) scroll sideways rather than wrap out of alignment
    ".aligned textarea {white-space: pre !important; overflow-x: auto !important}",
    "#experiment-tables table {display: block; overflow-x: auto; max-width: 100%}",
    "#experiment-tables td, #experiment-tables th {white-space: nowrap; word-break: normal !important}",
    # a narrow page: headers wrap between words and the numbers are set smaller, so that every column is in sight
    # (at 800 px the seeds table was 1,196 px wide in a 702 px box, its ratios cut off at the edge)
    "@media (max-width: 1000px) {#experiment-tables th {white-space: normal; overflow-wrap: normal !important}"
    " #experiment-tables td, #experiment-tables th {padding: 3px 4px !important; font-size: 11.5px !important}}",
    # a model's line is longer than its menu: cut it with an ellipsis before the arrow, which gradio lays over the text
    ".model-menu input {text-overflow: ellipsis; padding-right: var(--size-8) !important}",
    ".model-note {font-size: 0.85em; color: var(--body-text-color-subdued)}",
    "#trace-table [role=gridcell], #trace-table [role=gridcell] *, #trace-table [role=columnheader] * {font-family: var(--font)"
    " !important; font-size: 13px; word-break: normal !important; overflow-wrap: normal !important}",
    *(f"#compare-{e} textarea {{border-left: 5px solid {c}}} #compare-{e} label span {{color: {c}; font-weight: 600}}"
      for e, c in figures.ENCODING_COLOURS.items()),
])


PLOTLY_GUARD_JS = """
// (every tab: the page head runs it before plotly loads) A figure plotly cannot draw throws from gr.Plot's update: uncaught, it stops the page's updates (progress stuck,
// tabs no longer switch). Plotly.react is wrapped so that such a figure fails alone: its plot stays empty with a
// line saying so, and the page goes on. gr.Plot loads plotly with the first plot, as window.Plotly, and calls
// that object's react: it is wrapped as it is set (or now, if a plot of another tab loaded it already).
const guardPlotly = (plotly) => {
  if (!plotly || plotly.__guarded) return;
  const react = plotly.react, resize = plotly.Plots && plotly.Plots.resize;
  const note = (div, error) => {
    console.warn('A figure could not be drawn:', error);
    if (!div || !div.parentElement || div.parentElement.querySelector(':scope > .figure-failed')) return;
    const line = document.createElement('p');
    line.className = 'figure-failed';
    line.textContent = 'This figure could not be drawn (' + String(error && error.message || error) +
      '). The rest of the page works; press the button again, or reload the page if it stays blank.';
    div.parentElement.insertBefore(line, div);
  };
  plotly.react = function (div, ...rest) {
    div && div.parentElement && div.parentElement.querySelectorAll(':scope > .figure-failed').forEach((n) => n.remove());
    try {
      const drawn = react.call(this, div, ...rest);
      return drawn && drawn.catch ? drawn.catch((error) => { note(div, error); return div; }) : drawn;
    } catch (error) { note(div, error); return Promise.resolve(div); }
  };
  if (resize) plotly.Plots.resize = function (div) {
    try { const done = resize.call(this, div); return done && done.catch ? done.catch(() => div) : done; }
    catch (error) { return Promise.resolve(div); }
  };
  plotly.__guarded = true;
};
if (window.Plotly) guardPlotly(window.Plotly);
else if (!Object.getOwnPropertyDescriptor(window, 'Plotly')) {
  let loaded;
  Object.defineProperty(window, 'Plotly', {configurable: true, enumerable: true, get: () => loaded,
                                           set: (plotly) => { guardPlotly(plotly); loaded = plotly; }});
}
"""
HEAD = f"<script>{PLOTLY_GUARD_JS}</script>"
