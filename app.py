"""The Gradio app: generate, compare positional encodings, look at attention, follow one forward pass, learn.

    python app.py                           # serves on GRADIO_SERVER_NAME:GRADIO_SERVER_PORT (default 127.0.0.1:7860)
    SCRATCH_CHECKPOINTS=DIR python app.py   # checkpoints from DIR instead of ./checkpoints
    SCRATCH_TORCH_THREADS=2 python app.py   # torch threads per request (default 1; see warm_up)

This file assembles the tabs (one module each in ``ui.tabs``) and launches; everything shown is computed in the
``explorer`` package (tested on its own). ``demo`` is built at import, with the model menus filled
(discovery reads config files and weight headers, loads no weights): when the page answers, every control
on it works. Importing the explorer imports torch and the model package (a few seconds); the weights load
in the background right after launch (or on the first request when imported by a test). A page load
refreshes the menus, so a checkpoint trained while the app runs shows up on reload. A new tab is one more
module in ``ui.tabs`` with a ``tab(choices, value, decoding)`` that returns its ``TabParts``, and one more name in
``TABS``.
"""

import logging
import os
import signal
import threading

import gradio as gr
from authlib.integrations.base_client import OAuthError  # authlib: gradio[oauth]'s, for Sign in with Hugging Face

from explorer.core import machine
from explorer.generation.labels import LABEL_KEY
from explorer.models import catalog, hub_files, registry, uploads
from explorer.present import figures
from explorer.present.encodings import extrapolation_figure
from ui import events, menus, open_model, style, trained_model
from ui.tab import TabParts
from ui.tabs import ablation, attention, encodings, generate, gradient_step, lens, patching, routes, sampling, steps, \
    trace, train_live, watch_it_learn

logger = logging.getLogger("app")

INTRO = """# A Transformer from scratch
The same models, seen from every side: **generate** text, **compare** positional encodings (sinusoidal, learned,
RoPE, ALiBi, none), look at **attention heads**, follow the tensors **through one forward pass**, then take it
apart with the model's own numbers: **attention step by step**, the **logit lens**, **head ablation**,
**sampling**, **activation patching** and **how the prediction was made** (its routes). Then watch learning
itself: take **one gradient step**, **train one yourself** from scratch, or
**watch it learn**: an induction head forming in a recorded training run.

""" + LABEL_KEY


# the tabs in the page's order; Generate first: the views after it read its decoding controls
TABS = (generate, encodings, attention, trace, steps, lens, ablation, sampling, patching, routes, gradient_step,
        train_live, watch_it_learn)


def build_tabs(choices, value) -> list[TabParts]:
    """Every tab, built in order with the menus' choices and default value and Generate's decoding controls."""
    built, decoding = [], None
    for view in TABS:
        built.append(view.tab(choices, value, decoding))
        decoding = decoding or built[-1].decoding
    return built


UPLOAD_CACHE = (300, 1800)  # gradio's delete_cache: (how often, in s, the cache is swept; the age, in s, that goes)


def build_demo() -> gr.Blocks:
    """The page: the intro, the catalog's status line, Open a model, and the thirteen tabs, each with its own model
    menu (the page load and every opened model refresh them all; Activation patching's and One gradient step's list
    the decoder-only models)."""
    choices, value, note = menus.menus_now()
    # gradio's cache holds what visitors upload and the files served (the trained models' zips): every 5 minutes, those
    # made over 30 minutes ago go (an upload opened is removed as soon as it is unpacked; a trained model's zip serves
    # Open in every tab and Push for its first 30 minutes)
    with gr.Blocks(title="Transformer from scratch", delete_cache=UPLOAD_CACHE) as demo:
        gr.Markdown(INTRO)
        catalog_status = gr.Markdown(note, elem_id="catalog-status")
        opening = open_model.panel()
        with gr.Tabs(overflow_behavior="wrap") as tabs:  # thirteen tabs: on a narrow page they wrap, none hides behind a menu
            built = build_tabs(choices, value)
        page = menus.PageMenus(tuple(m for parts in built for m in parts.menus),
                               tuple(m for parts in built for m in parts.decoder_only), catalog_status)
        demo.load(menus.catalog_event(page), None, page.outputs(), api_name="catalog")
        demo.unload(open_model.visitor_left)  # a closed page's models go (and an upload's files)
        open_model.wire(opening, page)
        for trained in (parts.trained for parts in built if parts.trained):  # Train one yourself's model
            trained_model.wire(trained, page, demo, tabs)
    events.serve_as_visitors(demo)  # every handler, private ones too, answers its own visitor only
    demo.queue(default_concurrency_limit=4)
    return demo


demo = build_demo()
# launch() options: uploads (Open a model's zip) up to the Hub's weight limit and room for the rest; Gradio's own
# errors (e.g. too few arguments in an API call) reach the client with their message; a sign-in the visitor denied
# comes back to the page, not to an error page (ui.trained_model.sign_in_refused)
LAUNCH_OPTIONS = dict(css=style.CSS, head=style.HEAD, max_file_size=uploads.max_upload_bytes(), show_error=True,
                      app_kwargs=dict(exception_handlers={OAuthError: trained_model.sign_in_refused}))


def launch(**overrides):
    """``demo.launch`` with the app's options (tests and ``python app.py`` both start it this way); the host it listens
    on is recorded (``hub_files.serving_on``): the machine's Hub token acts for requests only where it is loopback."""
    launched = demo.launch(**{**LAUNCH_OPTIONS, **overrides})
    hub_files.serving_on(demo.server_name)
    return launched


STOPPING = threading.Event()  # set by SIGTERM: the main thread closes the app


def stop_on_sigterm() -> None:
    """SIGTERM (how a Space stops the app) frees the uploads' disk and stops the app as Ctrl-C does: it interrupts a
    warm-up under way, and sets ``STOPPING``, which ends ``serve`` even where Python swallows the interrupt (it does
    when the signal lands inside a weakref callback or a ``__del__``)."""
    def stop(signum, frame):
        uploads.remove_all()
        STOPPING.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


def serve() -> None:
    """Warm up, then serve until Ctrl-C or SIGTERM; then close the app."""
    try:
        warm_up(int(os.environ.get("SCRATCH_TORCH_THREADS", "1")))
        while demo.is_running and not STOPPING.wait(0.1):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        demo.close()


def warm_up(threads: int = 1) -> None:
    """Load every usable checkpoint right after launch, so the first request does not wait for it.

    One torch thread per request (a view and the generations' one decode thread run side by side): on a
    shared 2-core machine two OpenMP threads per forward pass wait on each other; measured here, a 128-token
    forward pass took 0.47 s with 2 threads and 0.03 s with 1, and generation ran at 8 against 61 tokens/s."""
    try:
        import torch

        torch.set_num_threads(threads)
        found, main = catalog.discover_checkpoints(), catalog.read_results().main_model
        for info in sorted(found.values(), key=lambda info: info.name != main):  # the default model first
            if info.usable:
                registry.shipped_model(info)
        figures.heatmap_figure([[0.0]], "", "", "").to_json()  # plotly imports its validators on first use: not in a request
        extrapolation_figure({"": {1: 1.0}}, {}).to_json()
    except Exception:  # noqa: BLE001 - a request will show the problem
        logger.exception("warm-up failed")


if __name__ == "__main__":
    machine.give_memory_back()
    stop_on_sigterm()
    launch(prevent_thread_lock=True)
    serve()
