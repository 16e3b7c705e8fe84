"""The tabs of learning in headless Chromium, at 1366 and 800 px wide: a tiny training job streams its loss
curve and ends with the JSON and an enabled download; one gradient step draws its plots; Watch it learn follows its
slider; a second browser sees its place in the queue, and a page closed mid-job ends the trainer's thread.
Screenshots: artifacts/screenshots/teach-{train-live,gradient-step,watch-it-learn}-<width>.png and learn-queued.png
(look at them)."""

import zipfile

import pytest

from support.browser import SHOTS, TIMEOUT_MS, assert_no_error_shown, choose, fill, open_page, open_tab, plot_drawn, set_tiny_job, shot, \
    type_text

pytestmark = pytest.mark.browser


def test_a_tiny_training_job_streams_its_loss_and_ends_with_the_json_and_the_model(page):
    open_tab(page, "Train one yourself")
    assert "induction preset" in page.inner_text("#live-teaching") and "Watch it learn" in page.inner_text("#live-teaching")
    # "More choices" first: a box the accordion has just drawn can take its initial value back from under a fill
    page.get_by_text("More choices").click()
    page.locator("#live-seed input[type=number]").wait_for(state="visible")
    choose(page, "live-data", "Repeating random tokens")
    for elem_id, value in (("live-n-heads", 2), ("live-d-model", 16), ("live-steps", 12)):
        fill(page, elem_id, value)
    for elem_id, value in (("live-batch-size", 4), ("live-context-length", 16), ("live-log-every", 3)):
        fill(page, elem_id, value)
    for elem_id, value in (("live-n-heads", 2), ("live-d-model", 16), ("live-steps", 12), ("live-batch-size", 4)):
        assert page.input_value(f"#{elem_id} input[type=number]") == str(value), elem_id
    assert page.locator("#live-download").is_disabled()
    page.click("#live-button")
    page.wait_for_selector("#live-status >> text=Done: 12 of 12 steps", timeout=TIMEOUT_MS)
    plot_drawn(page, "plot-live-loss")
    plot_drawn(page, "plot-live-induction")
    # the loss of every step, from step 0: a line of 13 points (no markers), starting at x = 0
    assert page.evaluate("() => document.querySelector('#plot-live-loss .js-plotly-plot').data[0].x.length") == 13
    page.wait_for_function("() => !document.querySelector('#live-download').disabled")
    with page.expect_download() as download:
        page.click("#live-download")
    assert download.value.suggested_filename == "model.zip" and zipfile.is_zipfile(download.value.path())
    assert page.locator("#live-json").count() == 0 or not page.locator("#live-json").is_visible()  # no raw JSON box
    assert "Writes:" in page.input_value("#live-sample textarea") and "A copy:" in page.input_value("#live-sample textarea")
    assert page.locator("#live-stop").is_disabled()
    assert page.input_value("#live-batch-size input[type=number]") == "4"  # the choices stay as they were
    shot(page, "train-live")
    assert_no_error_shown(page)


def test_one_gradient_step_draws_before_and_after_and_where_the_gradient_is(page):
    open_tab(page, "One gradient step")
    type_text(page, "grad-target", " the")
    page.click("#grad-button")
    page.wait_for_selector("#grad-status >> text=p(target)")
    for plot in ("plot-grad-tokens", "plot-grad-heads", "plot-grad-tensors"):
        plot_drawn(page, plot)
    assert page.locator("#plot-grad-heads .heatmaplayer .hm").count() == 5  # W_Q, W_K, W_V, W_O, all four
    # the target's "p → p" above its bars stands apart from the probability axis' numbers (centred on the bars, it was
    # pushed against the axis and read on as one line with its "1": "1 0.34% → 94.97%")
    label = page.locator("#plot-grad-tokens .annotation").bounding_box()
    numbers = page.locator("#plot-grad-tokens .ytick text")
    axis_ends = max(box["x"] + box["width"] for box in (numbers.nth(i).bounding_box() for i in range(numbers.count())))
    assert "→" in page.locator("#plot-grad-tokens .annotation").text_content() and label["x"] >= axis_ends + 8, (label, axis_ends)
    bars = page.locator("#plot-grad-tokens .bars .point path")  # and crosses no bar (the target may be a short one)
    for box in (bars.nth(i).bounding_box() for i in range(bars.count())):
        assert box is None or box["y"] >= label["y"] + label["height"] or box["x"] + box["width"] <= label["x"] \
            or box["x"] >= label["x"] + label["width"], (label, box)
    # the tensor map's slanted names end above the second part's title ("The rest"), never across it
    names = page.locator("#plot-grad-tensors .xtick text")
    lowest = max(box["y"] + box["height"] for box in (names.nth(i).bounding_box() for i in range(names.count())))
    rest = page.locator("#plot-grad-tensors .annotation", has_text="The rest").bounding_box()
    assert lowest <= rest["y"], (lowest, rest)
    # the head maps' colour bar (short on this 2-layer model) keeps its numbers apart: four once stood in 50 px
    ticks = page.locator("#plot-grad-heads .colorbar .cbaxis text")
    tops = sorted(ticks.nth(i).bounding_box()["y"] for i in range(ticks.count()))
    assert len(tops) >= 2 and min(b - a for a, b in zip(tops, tops[1:])) >= 24, tops
    shot(page, "gradient-step")
    assert_no_error_shown(page)


def test_watch_it_learn_follows_the_slider_and_keeps_its_explanation_in_sight(page):
    open_tab(page, "Watch it learn")  # opening the tab shows the first snapshot
    page.wait_for_selector("#timeline-status >> text=snapshot 0 of 0–2")
    page.locator("#timeline-snapshot input[type=range]").focus()
    for _ in range(2):
        page.keyboard.press("ArrowRight")
    page.wait_for_selector("#timeline-status >> text=Step 20")
    assert "snapshot 2 of 0–2" in page.inner_text("#timeline-status")
    page.wait_for_selector("#timeline-snapshot >> text=Snapshot 2 of 0–2: step 20 of 20")  # the slider shows the step
    for plot in ("plot-timeline-loss", "plot-timeline-heads", "plot-timeline-grid", "plot-timeline-previous",
                 "plot-timeline-induction"):
        plot_drawn(page, plot)
    assert page.locator("#plot-timeline-grid .heatmaplayer .hm").count() == 8  # 2 layers x 4 heads
    assert page.input_value("#timeline-sample textarea") != ""
    assert "K-composition" in page.inner_text("#timeline-teaching")
    teaching, curves = (page.locator(f"#{i}").bounding_box() for i in ("timeline-teaching", "plot-timeline-loss"))
    if page.width >= 1366:  # beside the curves
        assert teaching["x"] > curves["x"] + curves["width"] - 1
    else:  # a narrow page: below them, full width
        assert teaching["y"] > curves["y"] + curves["height"] - 1 and teaching["width"] > 0.8 * page.width
    shot(page, "watch-it-learn")
    assert_no_error_shown(page)
    page.fill("#timeline-text textarea", "")
    page.click("#timeline-button")
    page.wait_for_selector("#timeline-status >> text=Type some text first")
    page.fill("#timeline-text textarea", "To be, or not to be")
    page.click("#timeline-button")
    page.wait_for_selector("#timeline-status >> text=Step 20")
    page.get_by_label("timeline-plain").check()  # the other run: same snapshots, the slider stays where it was
    page.wait_for_selector("#timeline-status >> text=timeline-plain trained on")
    assert page.input_value("#timeline-snapshot input[type=range]") == "2"
    assert_no_error_shown(page)


def test_a_second_browser_sees_its_place_in_the_queue_and_runs_after_stop(browser, app_server):
    first, second = open_page(browser, app_server), open_page(browser, app_server)
    for page in (first, second):
        page.wait_for_selector("#catalog-status >> text=model(s) ready")
        open_tab(page, "Train one yourself")
    set_tiny_job(first, 3000)
    set_tiny_job(second, 2)
    first.click("#live-button")
    first.wait_for_selector("#live-status >> text=Step ")
    second.click("#live-button")
    second.wait_for_selector("#plot-live-loss >> text=queue: 1/1")  # gradio's own line: its place in the queue
    # and ours: what it waits for (Gradio's counter alone does not say another learner's job holds the machine)
    second.wait_for_selector("#live-status >> text=another learner's training job is running")
    second.screenshot(path=SHOTS / "learn-queued.png", full_page=True)
    first.click("#live-stop")
    first.wait_for_selector("#live-status >> text=Stopped:")
    second.wait_for_selector("#live-status >> text=Done: 2 of 2 steps")
    for page in (first, second):
        assert_no_error_shown(page)
        page.close()


def test_closing_the_page_mid_job_ends_the_trainer_thread(browser, app_server):
    import threading

    page = open_page(browser, app_server)
    page.wait_for_selector("#catalog-status >> text=model(s) ready")
    open_tab(page, "Train one yourself")
    set_tiny_job(page, 3000)
    page.click("#live-button")
    page.wait_for_selector("#live-status >> text=Step ")
    (thread,) = [t for t in threading.enumerate() if t.name == "live-training" and t.is_alive()]
    page.close()
    thread.join(timeout=60)  # gradio notices the page has gone, closes the handler, which stops the Trainer
    assert not thread.is_alive()
