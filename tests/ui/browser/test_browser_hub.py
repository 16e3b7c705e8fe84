"""Open a model in headless Chromium at 1366 and 800 px: the panel above the tabs, a Hub repo typed and opened (the
progress, then the opened line), the model picked in the tabs' menus, a view drawn on it; a bad repo's message.
Watch it learn's Hub section: a repo's step<N> revisions opened, every head drawn, another revision picked.
Screenshots go to artifacts/screenshots/hub-*.png (gitignored)."""

import pytest

from support import hub_repos
from support.browser import SHOTS, WIDTHS, assert_no_error_shown, choose, open_page, open_tab, plot_drawn

pytestmark = pytest.mark.browser
REPO = "tiny/gpt2"
PYTHIA = "tiny/pythia-like"
STEPS = (0, 1000, 2000, 3000)  # its revisions step0 … step3000


@pytest.fixture(scope="module")
def hub(app_server, start_fake_hub, tmp_path_factory):
    """The fake Hub (tests/conftest.py) serving REPO, a bad repo, and PYTHIA at every step of STEPS."""
    tmp = tmp_path_factory.mktemp("browser-hub")
    server = start_fake_hub()
    server.add_folder(REPO, hub_repos.save_transformers_repo(tmp / "gpt2", "gpt2"))
    server.add_repo("bad/unknown-architecture", hub_repos.bad_repos(tmp)["bad/unknown-architecture"])
    for seed, step in enumerate(STEPS):
        server.add_folder(PYTHIA, hub_repos.save_transformers_repo(tmp / f"step{step}", "gpt_neox", seed=seed),
                          revision=f"step{step}")
    return server


@pytest.mark.parametrize("width", WIDTHS)
def test_open_a_hub_model_and_see_it_in_every_tab(browser, app_server, hub, width):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = open_page(browser, app_server, width)
    page.wait_for_selector("#catalog-status >> text=model(s) ready")
    page.get_by_text("Open a model:").first.click()
    page.fill("#open-repo input, #open-repo textarea", "bad/unknown-architecture")
    page.click("#open-button")
    page.wait_for_selector("#open-status >> text=families we can open")
    assert "GPT-2 (gpt2)" in page.inner_text("#open-status")
    page.fill("#open-repo input, #open-repo textarea", REPO)
    page.click("#open-button")
    page.wait_for_selector("#open-status >> text=Opened")
    assert "Parity with transformers" in page.inner_text("#open-status")
    page.screenshot(path=SHOTS / f"hub-opened-{width}.png", full_page=True)
    # every menu now shows the opened model, picked: the Generate tab's at once, the Attention heads tab's when shown
    page.wait_for_function("(name) => document.querySelector('#gen-model input').value.startsWith(name)", arg=REPO)
    open_tab(page, "Attention heads")
    page.wait_for_function("(name) => document.querySelector('#att-model input').value.startsWith(name)", arg=REPO)
    page.click("#att-button")
    plot_drawn(page, "plot-head")
    page.wait_for_selector(f"#att-status >> text={REPO}")
    page.screenshot(path=SHOTS / f"hub-attention-{width}.png", full_page=True)
    assert_no_error_shown(page)
    page.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_train_one_yourself_offers_open_and_push_after_training(browser, app_server, hub, width):
    """The test app has no shipped tokenizer, so the job trains on random tokens: its model is saved with one symbol
    per token id, and Open in every tab opens it (for this browser tab alone)."""
    page = open_page(browser, app_server, width)
    page.wait_for_selector("#catalog-status >> text=model(s) ready")
    open_tab(page, "Train one yourself")
    choose(page, "live-data", "Repeating random tokens")
    page.fill("#live-steps input[type=number]", "4")
    page.click("#live-button")
    page.wait_for_selector("#live-status >> text=Done: 4 of 4 steps")
    page.click("#trained-open")
    page.wait_for_selector("#trained-status >> text=Opened")
    assert "this browser tab's menus only" in page.inner_text("#trained-status")
    assert page.is_visible("#trained-push") and page.is_visible("#trained-repo")
    page.screenshot(path=SHOTS / f"hub-trained-{width}.png", full_page=True)
    assert "Traceback" not in page.inner_text("body") and page.errors == []
    page.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_watch_a_hub_repo_learn_and_pick_a_revision(browser, app_server, hub, width):
    page = open_page(browser, app_server, width)
    page.wait_for_selector("#catalog-status >> text=model(s) ready")
    open_tab(page, "Watch it learn")
    page.get_by_text("A real model learning:").first.click()
    page.fill("#hub-timeline-repo input, #hub-timeline-repo textarea", PYTHIA)
    page.evaluate("""() => {  // every text the status line shows, as it streams
        window.__lines = [];
        const status = document.querySelector('#hub-timeline-status');
        new MutationObserver(() => window.__lines.push(status.innerText)).observe(
            status, {childList: true, subtree: true, characterData: true});
    }""")
    page.click("#hub-timeline-button")  # the revisions left empty: the repo's step<N> ones
    page.wait_for_selector("#hub-timeline-status >> text=best induction head")
    streamed = page.evaluate("() => window.__lines")
    assert any(f"revision step{STEPS[-1]} ({len(STEPS)} of {len(STEPS)})" in text for text in streamed), streamed
    line = page.inner_text("#hub-timeline-status")
    assert f"step {STEPS[-1]:,} (commit" in line and f"{len(STEPS)} of {len(STEPS)} opened" in line
    for plot in ("plot-hub-timeline-heads", "plot-hub-timeline-attention"):
        plot_drawn(page, plot)
    assert page.input_value("#hub-timeline-revision input").startswith(f"step {STEPS[-1]:,}")
    choose(page, "hub-timeline-revision", "step 0")
    page.wait_for_selector("#hub-timeline-status >> text=step 0 (commit")
    assert page.input_value("#hub-timeline-guesses textarea") != ""
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")  # nothing overflows sideways
    page.screenshot(path=SHOTS / f"hub-timeline-{width}.png", full_page=True)
    page.locator("#hub-timeline").screenshot(path=SHOTS / f"hub-timeline-section-{width}.png")
    assert_no_error_shown(page)
    page.close()
