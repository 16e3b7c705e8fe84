"""app.py in headless Chromium (Debian's /usr/bin/chromium, driven by Playwright): every tab renders and
behaves as a learner meets it. Every wait waits on something the page shows, never on a fixed time.

Screenshots of every tab at 1366 and 800 px go to artifacts/screenshots/ (gitignored): look at them after a
change to the layout. Without Chromium these tests skip; with the environment variable CI set they fail.
"""

import pytest

from support.browser import SHOTS, WIDTHS, app_page, assert_no_error_shown, click_for_new_status, open_page, open_tab, pick, plot_drawn, settled
from support.fixtures_checkpoints import SLOW_MODEL
from ui.controls import PROMPT_EXAMPLE
from ui.tabs.generate import FOLIO_EXAMPLE

pytestmark = pytest.mark.browser


@pytest.fixture
def page(browser, app_server):
    """A fresh page at 1366 px for each of this module's tests (conftest's ``page`` opens one at each width)."""
    page = app_page(browser, app_server)
    yield page
    page.close()


def record_values(page, selector: str):
    """Record every distinct value the element takes, from now on, in the page (window.__seen)."""
    page.evaluate("""(selector) => {
        window.__seen = [];
        const watch = () => {
            const value = document.querySelector(selector).value;
            if (value && window.__seen[window.__seen.length - 1] !== value) window.__seen.push(value);
        };
        clearInterval(window.__watcher);
        window.__watcher = setInterval(watch, 5);
    }""", selector)


def recorded(page) -> list[str]:
    return page.evaluate("() => { clearInterval(window.__watcher); return window.__seen; }")


def screenshots(page, name: str, before=None):
    """Full-page screenshots of the current tab at each width (``before`` runs after each resize)."""
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        settled(page)
        if before is not None:
            before()
        page.screenshot(path=SHOTS / f"{name}-{width}.png", full_page=True)
    page.set_viewport_size({"width": WIDTHS[0], "height": 900})


def test_the_model_menu_works_before_anything_else_has_run(browser, app_server):
    """Nothing clickable that cannot work yet: Generate at once, before the catalog refresh has answered."""
    page = open_page(browser, app_server)
    page.wait_for_selector("#gen-button")
    assert page.input_value("#gen-model input").startswith("shakespeare-rope · rope positions · ")
    page.fill("#gen-max-new input", "5")
    page.click("#gen-button")
    page.wait_for_selector("#gen-status >> text=Done")
    assert "Unknown model" not in page.inner_text("#gen-status")
    page.close()


def test_page_loads_with_a_line_per_model(page):
    page.click("#gen-model input")
    options = page.get_by_role("option").all_inner_texts()
    assert len(options) == 9 and all(" · " in option for option in options), options  # the tests' 9 checkpoints
    page.keyboard.press("Escape")
    note = page.inner_text("#gen-model-note")  # the whole line, which the menu itself cuts short
    assert note.startswith("shakespeare-rope · rope positions · ") and note.endswith("bits/char")
    screenshots(page, "01-generate")
    assert_no_error_shown(page)


def menu_text_clear_of_its_arrow(page, menu_id: str) -> dict:
    """Where a menu's text ends (the input's right edge less its right padding) and where its arrow begins."""
    return page.evaluate("""(id) => {
        const input = document.querySelector(`#${id} input`), arrow = document.querySelector(`#${id} .icon-wrap`);
        const box = input.getBoundingClientRect(), padding = parseFloat(getComputedStyle(input).paddingRight);
        return {text_ends: box.right - padding, arrow_starts: arrow.getBoundingClientRect().left,
                overflow: getComputedStyle(input).textOverflow, cut: input.scrollWidth > input.clientWidth};
    }""", menu_id)


def test_a_long_model_line_ends_before_the_menus_arrow(page):
    """The menu shows the start of the chosen model's line, cut with an ellipsis before the arrow (it ran under the
    arrow and out beyond it at 800 px), at both widths."""
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        settled(page)
        measured = menu_text_clear_of_its_arrow(page, "gen-model")
        assert measured["cut"], measured  # the line is longer than the menu at both widths: what this test is about
        assert measured["text_ends"] <= measured["arrow_starts"], (width, measured)
        assert measured["overflow"] == "ellipsis", (width, measured)
    page.set_viewport_size({"width": WIDTHS[0], "height": 900})


def test_generation_shows_the_prompt_then_streams_into_the_output(page):
    pick(page, "gen-model", SLOW_MODEL)  # a real configuration (shakespeare-main's size), slow enough to watch
    page.wait_for_selector(f"#gen-model-note >> text={SLOW_MODEL} · rope positions · 4.8M parameters")
    page.fill("#gen-prompt textarea", "Shall I compare thee")
    page.fill("#gen-max-new input", "100")  # a few seconds of streaming
    record_values(page, "#gen-output textarea")
    click_for_new_status(page, "#gen-button", "#gen-status", "Done")
    seen = recorded(page)
    assert "Done: **" not in page.inner_text("#gen-status")  # rendered as markdown
    assert "tokens/s" in page.inner_text("#gen-status")
    assert all(value.startswith("Shall I compare thee") for value in seen)  # the prompt first, then its continuation
    assert len(seen) >= 3, seen  # the text arrived in pieces, not at the end
    assert all(later.startswith(earlier) for earlier, later in zip(seen, seen[1:]))
    screenshots(page, "02-generated")
    assert_no_error_shown(page)


def test_stop_button_ends_generation(page):
    """Stop is small, grey and disabled while nothing runs; it is enabled while a generation runs and ends it."""
    stop, generate = page.locator("#gen-stop"), page.locator("#gen-button")
    assert stop.is_disabled() and stop.bounding_box()["height"] < generate.bounding_box()["height"]
    colour = "(el) => getComputedStyle(el).backgroundColor"
    assert stop.evaluate(colour) != generate.evaluate(colour)
    red, green, blue = (int(c) for c in stop.evaluate(colour).split("(")[1].split(")")[0].split(",")[:3])
    assert not (red > 150 and green < 120 and blue < 120), stop.evaluate(colour)  # not the red of a danger button
    pick(page, "gen-model", SLOW_MODEL)  # shakespeare-main's size: 512 tokens take 2 s or more here
    page.fill("#gen-max-new input", "512")
    page.click("#gen-button")
    # a status of the generation under way (a finished one's "Done: ... tokens/s" would find Stop disabled again)
    page.wait_for_function("() => { const t = document.querySelector('#gen-status').innerText; "
                           "return t.includes('tokens/s') && !t.includes('Done'); }")
    assert stop.is_enabled()
    page.click("#gen-stop")
    page.wait_for_selector("#gen-status >> text=Stopped")
    page.wait_for_function("() => document.querySelector('#gen-stop').disabled")
    assert_no_error_shown(page)


def test_greedy_decoding_disables_the_sampling_controls(page):
    sampling_controls = ["#gen-temperature input[type=number]", "#gen-top-k input[type=number]", "#gen-top-p input[type=number]",
                         "#gen-seed input"]
    assert all(page.is_enabled(c) for c in sampling_controls)
    page.click("#gen-folio")
    page.wait_for_function("() => document.querySelector('#gen-temperature input[type=number]').disabled")
    assert not any(page.is_enabled(c) for c in sampling_controls)
    assert page.input_value("#gen-model input").startswith("folio-to-modern")
    page.wait_for_selector("#gen-output >> text=Rewrite in modern spelling")
    assert page.is_visible("#gen-folio-note") and "First Folio lines" in page.inner_text("#gen-prompt")
    page.fill("#gen-max-new input", "12")
    click_for_new_status(page, "#gen-button", "#gen-status", "Done")
    assert "ignores" not in page.inner_text("#gen-status") and "greedy" in page.inner_text("#gen-status")
    page.get_by_label("Sampling").first.check()
    page.wait_for_function("() => !document.querySelector('#gen-temperature input[type=number]').disabled")
    pick(page, "gen-model", "shakespeare-rope")
    page.wait_for_selector("#gen-output >> text=Prompt and continuation")
    assert not page.is_visible("#gen-folio-note") and "Folio" not in page.inner_text("#gen-prompt")
    # the Folio example's lines give way to the modern example, and back; a text the learner typed stays
    page.wait_for_function("(text) => document.querySelector('#gen-prompt textarea').value === text", arg=PROMPT_EXAMPLE)
    pick(page, "gen-model", "folio-to-modern")
    page.wait_for_function("(text) => document.querySelector('#gen-prompt textarea').value === text", arg=FOLIO_EXAMPLE)
    page.fill("#gen-prompt textarea", "Thou art more louely")
    pick(page, "gen-model", "shakespeare-rope")
    page.wait_for_selector("#gen-output >> text=Prompt and continuation")
    assert page.input_value("#gen-prompt textarea") == "Thou art more louely"


def test_an_error_shows_next_to_its_button_and_clears_the_old_output(page):
    page.fill("#gen-prompt textarea", "")
    page.click("#gen-button")
    page.wait_for_selector("#gen-status >> text=Type a prompt first")
    assert page.input_value("#gen-output textarea") == ""  # the previous answer is not left standing
    assert page.locator(".toast-body").count() == 0  # no pop-up over the buttons
    button, status = page.locator("#gen-button").bounding_box(), page.locator("#gen-status").bounding_box()
    assert 0 <= status["y"] - (button["y"] + button["height"]) < 40
    screenshots(page, "03-error")
    page.fill("#gen-prompt textarea", "Shall I compare thee")


def test_encodings_tab_draws_each_encoding_in_its_colour_and_marks_the_training_context(page, app_server):
    from explorer.present import figures

    open_tab(page, "Compare encodings")
    for elem_id in ("plot-sinusoidal", "plot-learned", "plot-rope", "plot-alibi", "plot-similarity", "plot-extrapolation"):
        plot_drawn(page, elem_id)
    assert page.locator("#plot-extrapolation .scatterlayer .trace").count() == 5
    strokes = page.eval_on_selector_all("#plot-extrapolation .scatterlayer .trace .js-line",
                                        "lines => lines.map(l => getComputedStyle(l).stroke)")
    expected = {rgb(c) for c in figures.ENCODING_COLOURS.values()}
    assert set(strokes) == expected

    def marker_at_its_tick():
        line = page.locator("#plot-extrapolation .shapelayer path").first.bounding_box()
        tick = page.locator("#plot-extrapolation .xtick text", has_text="64").first.bounding_box()
        assert abs(line["x"] + line["width"] / 2 - (tick["x"] + tick["width"] / 2)) < 3  # at 64 on the log axis
    marker_at_its_tick()
    page.get_by_label("Greedy").last.check()  # the comparison's own Decoding radio: greedy needs no seed
    page.wait_for_function("() => document.querySelector('#compare-seed input').disabled")
    page.get_by_label("Sampling").last.check()
    page.wait_for_function("() => !document.querySelector('#compare-seed input').disabled")
    page.click("#compare-button")
    page.wait_for_selector("#compare-status >> text=Done: 5 models")
    for encoding, colour in figures.ENCODING_COLOURS.items():
        assert page.input_value(f"#compare-{encoding} textarea").startswith("Shall I compare")
        assert page.eval_on_selector(f"#compare-{encoding} textarea", "t => getComputedStyle(t).borderLeftColor") == rgb(colour)
    page.fill("#own-text textarea", "Shall I compare thee to a summer's day? Thou art more lovely. " * 6)
    page.click("#recompute-button")
    page.wait_for_selector("#recompute-status >> text=Scored 30 of 30.")
    plot_drawn(page, "plot-extrapolation")
    marker_at_its_tick()
    button, status = page.locator("#recompute-button").bounding_box(), page.locator("#recompute-status").bounding_box()
    assert 0 <= status["y"] - (button["y"] + button["height"]) < 60  # the status line right under its button
    screenshots(page, "04-encodings")
    assert_no_error_shown(page)


def rgb(hex_colour: str) -> str:
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


def test_the_encoding_tables_show_every_column_at_both_widths(page):
    """The seeds table and the published ratios: no column beyond the edge of the page at 1366 or 800 px (at 800 the
    seeds table was 1,196 px wide in a 702 px box, with only a cut edge to say so)."""
    open_tab(page, "Compare encodings")
    page.wait_for_selector("#experiment-tables table")
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        settled(page)
        widths = page.evaluate("() => [...document.querySelectorAll('#experiment-tables table')]"
                               ".map(t => [t.scrollWidth, t.clientWidth, t.querySelectorAll('thead th').length])")
        assert len(widths) == 2 and all(columns >= 5 for *_, columns in widths), widths
        assert all(scroll <= client + 1 for scroll, client, _ in widths), (width, widths)
        cell = page.locator("#experiment-tables td").first.evaluate("(el) => parseFloat(getComputedStyle(el).fontSize)")
        assert cell >= 11, cell  # smaller, never too small to read
    page.set_viewport_size({"width": WIDTHS[0], "height": 900})


def test_attention_grid_appears(page):
    open_tab(page, "Attention heads")
    assert page.input_value("#att-model input").startswith("shakespeare-rope")
    page.click("#att-button")
    page.wait_for_selector("#att-status >> text=layers ×")
    page.wait_for_selector("#att-grid button[data-head]")
    plot_drawn(page, "plot-head")
    assert page.locator("#att-grid button[data-head]").count() == 2 * 4  # one clickable thumbnail per layer x head
    cells = page.locator("#plot-head .nsewdrag").first
    cells.scroll_into_view_if_needed()
    box = cells.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.2, box["y"] + box["height"] * 0.8)  # below the diagonal
    page.wait_for_selector("#plot-head .hoverlayer .hovertext", state="attached")
    hover = page.locator("#plot-head .hoverlayer").text_content()
    assert "query" in hover and "key" in hover and "weight" in hover, hover
    page.evaluate("window.scrollTo(0, 0)")
    screenshots(page, "05-attention")
    assert_no_error_shown(page)
    # the plotly gr.Plot loaded (here, before Activation patching was ever opened) is guarded: a figure it cannot
    # draw fails alone, on every tab (ui.style.PLOTLY_GUARD_JS, in the page's head)
    assert page.evaluate("() => window.Plotly && window.Plotly.__guarded === true")


def test_user_text_echoed_on_the_page_is_text_not_html(page):
    """A value typed into a menu comes back in the status line; it must not become an element."""
    attack = "<img src=x onerror=window.__pwned=1>"
    open_tab(page, "Attention heads")
    page.fill("#att-head input", attack)
    page.keyboard.press("Enter")
    page.wait_for_selector("#att-status >> text=is not a whole number")
    assert attack in page.inner_text("#att-status")
    assert page.locator("#att-status img").count() == 0 and page.evaluate("() => window.__pwned") is None


def test_attention_of_folio_to_modern_shows_the_whole_rewrite(page):
    open_tab(page, "Attention heads")
    pick(page, "att-model", "folio-to-modern")
    page.click("#att-button")
    page.wait_for_selector("#att-status >> text=folio-to-modern: 2 layers")
    status = page.inner_text("#att-status")
    assert "cross-attention" in status and "The decoder read the model's own rewrite" in status
    plot_drawn(page, "plot-head")
    screenshots(page, "05b-cross-attention")
    assert_no_error_shown(page)


def trace_table_is_whole_and_words_unbroken(page):
    """The forward pass's table: no scroll box inside it, no word laid out on two lines (broken only where a hyphen
    allows), no text running past its cell or cut off by it."""
    inner_scroll = page.evaluate("""() => [...document.querySelectorAll('#trace-table *')].some(
        e => e.scrollHeight > e.clientHeight + 2 && ['auto', 'scroll'].includes(getComputedStyle(e).overflowY))""")
    assert not inner_scroll
    split = page.evaluate(r"""() => {
        const split = [];  // words (broken only where a hyphen allows) laid out on more than one line, or cut off
        for (const cell of document.querySelectorAll('#trace-table [role=gridcell], #trace-table [role=columnheader]')) {
            if (cell.scrollWidth > cell.clientWidth + 1) split.push('overflow: ' + cell.innerText);
            const box = cell.getBoundingClientRect();
            const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
            for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                const re = /[^\s-]+-?/g;
                for (let m = re.exec(node.data); m; m = re.exec(node.data)) {
                    const range = document.createRange();
                    range.setStart(node, m.index);
                    range.setEnd(node, m.index + m[0].length);
                    const rects = [...range.getClientRects()];
                    const lines = new Set(rects.map(r => Math.round(r.top)));
                    if (lines.size > 1) split.push(m[0]);
                    if (rects.some(r => r.right > box.right + 1)) split.push('cut off: ' + m[0]);
                }
            }
        }
        return split;
    }""")
    assert split == [], split[:10]


def test_forward_pass_tab_shows_the_shapes_without_an_inner_scroll_box_or_split_words(page):
    open_tab(page, "Inside the forward pass")
    assert page.input_value("#trace-model input").startswith("shakespeare-rope")
    page.click("#trace-button")
    page.wait_for_selector("#trace-status >> text=Forward pass done")
    table = page.inner_text("#trace-table")
    for step in ("token ids", "token embeddings", "Q per head", "Q rotated (RoPE)", "scores", "weights",
                 "concatenated heads", "feed-forward hidden", "layer 1 output", "logits", "probabilities"):
        assert step in table, step
    plot_drawn(page, "plot-top")
    assert page.locator("#plot-top text.bartext").count() == 10  # every bar has its probability printed

    screenshots(page, "06-forward-pass", before=lambda: trace_table_is_whole_and_words_unbroken(page))
    assert_no_error_shown(page)


def test_forward_pass_of_folio_to_modern_names_the_decoder_tokens(page):
    open_tab(page, "Inside the forward pass")
    pick(page, "trace-model", "folio-to-modern")
    page.click("#trace-button")
    page.wait_for_selector("#trace-summary >> text=The decoder read the model's own rewrite")
    plot_drawn(page, "plot-top")
    assert "the last token the decoder read" in page.inner_text("#plot-top")
    # its stack column ("encoder", "decoder") and its sites (after_cross_attention) fit their cells
    screenshots(page, "06b-forward-pass-seq2seq", before=lambda: trace_table_is_whole_and_words_unbroken(page))
    assert_no_error_shown(page)
