"""The Gradio app: generate, compare positional encodings, look at attention, follow one forward pass.

    python app.py                           # serves on GRADIO_SERVER_NAME:GRADIO_SERVER_PORT (default 127.0.0.1:7860)
    SCRATCH_CHECKPOINTS=DIR python app.py   # checkpoints from DIR instead of ./checkpoints
    SCRATCH_TORCH_THREADS=2 python app.py   # torch threads per request (default 1; see warm_up)

UI wiring only: everything shown is computed in the ``explorer`` package (tested on its own). ``demo`` is
built at import without torch: the page is served in a few seconds, and torch, transformers and the models
load in the background right after launch (or on the first request when imported by a test).
Checkpoints are discovered when a page loads, so a checkpoint trained while the app runs shows up on reload.
"""

import contextlib
import functools
import html
import inspect
import logging
import os
import threading
from dataclasses import replace

import gradio as gr

logger = logging.getLogger("app")

HEAVY = dict(concurrency_id="model", concurrency_limit=2)  # the model events share the 2 cores
FOLIO_EXAMPLE = "Shall I compare thee to a Summers day? Thou art more louely and more temperate:"
PROMPT_EXAMPLE = "Shall I compare thee to a summer's day?"
ENCODINGS = ("sinusoidal", "learned", "rope", "alibi", "none")  # configuration_scratch_transformer.POSITION_ENCODINGS
ATTENTION_EXAMPLE = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer"


def analysis():
    """``explorer.analysis``, imported on first use (torch and transformers take seconds to import)."""
    from explorer import analysis as module

    return module


class InputProblem(Exception):
    """Something the user can fix; shown as a warning and in the status line, never as a traceback."""


def guarded(n_outputs: int):
    """Run an event handler so that any failure ends as a message in its status output (the LAST output) and a
    gr.Warning, the other outputs left as they were. Works for plain and generator (streaming) handlers."""

    def failure(error: Exception):
        if isinstance(error, InputProblem):
            message = str(error)
        else:
            logger.exception("event failed")
            message = f"Something went wrong ({type(error).__name__}: {error}). The app is still running: try other input."
        gr.Warning(message)
        return (*(gr.skip() for _ in range(n_outputs - 1)), f"⚠️ {message}")

    def wrap(fn):
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def run_generator(*args, **kwargs):
                try:
                    yield from fn(*args, **kwargs)
                except Exception as error:  # noqa: BLE001 - every failure becomes a message
                    yield failure(error)
            return run_generator

        @functools.wraps(fn)
        def run(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as error:  # noqa: BLE001
                return failure(error)
        return run

    return wrap


def tokens(n: int) -> str:
    return f"{n} token" + ("" if n == 1 else "s")


def status(*lines: str) -> str:
    return "\n".join(f"- {line}" for line in lines if line)


def checkpoint(name: str):
    """(CheckpointInfo, model, tokenizer) for a model name, or an InputProblem saying what exists."""
    A = analysis()
    catalog = A.discover_checkpoints()
    if not catalog:
        raise InputProblem(f"No checkpoints found in {A.checkpoint_root()}: train them first, or set {A.CHECKPOINTS_ENV}.")
    if name not in catalog:
        raise InputProblem(f"Unknown model {name!r}; pick one of: {', '.join(catalog)}.")
    model, tokenizer = A.load_checkpoint(catalog[name].path)
    return catalog[name], model, tokenizer


def user_text(text: str, what: str = "a prompt") -> tuple[str, list[str]]:
    cleaned, notices = analysis().clean_text(text)
    if not cleaned.strip():
        raise InputProblem(f"Type {what} first: the box is empty" + (" (after removing control characters)." if text else "."))
    return cleaned, notices


# ----------------------------------------------------------------------------------------------
# Event handlers
# ----------------------------------------------------------------------------------------------


@guarded(n_outputs=4)
def load_catalog():
    """Fill every model menu from the checkpoints on disk; say what is missing."""
    A = analysis()
    catalog = A.discover_checkpoints()
    results = A.read_results()
    names = list(catalog)
    causal = [n for n in names if not catalog[n].is_encoder_decoder]
    main = results.main_model if results.main_model in catalog else (causal[0] if causal else (names[0] if names else None))
    notes = []
    if not catalog:
        notes.append(f"No checkpoints found in `{A.checkpoint_root()}`: train them, or set `{A.CHECKPOINTS_ENV}`.")
    missing = [e for e in ENCODINGS if e not in A.encoding_models(catalog)]
    if catalog and missing:
        notes.append(f"No checkpoint yet for: {', '.join(missing)}.")
    if results.notice:
        notes.append(results.notice)
    found = f"{len(names)} model(s) in `{A.checkpoint_root()}`: {', '.join(names)}." if names else ""
    menus = [gr.update(choices=names, value=main) for _ in range(3)]  # one each: gradio consumes an update's value
    return *menus, status(found, *notes)


_stop_flags: dict[str, threading.Event] = {}  # session -> the stop flag of its running generation


@guarded(n_outputs=2)
def generate(prompt, model_name, mode, temperature, top_k, top_p, repetition_penalty, max_new_tokens, seed,
             request: gr.Request = None):
    """Stream the continuation (or, for folio-to-modern, the modern rewrite) token by token."""
    A = analysis()
    text, notices = user_text(prompt)
    settings, more = A.sanitize_decoding(mode, temperature, top_k, top_p, repetition_penalty, max_new_tokens, seed)
    info, model, tokenizer = checkpoint(model_name)
    ids, max_new, cut = A.encode_prompt(model, tokenizer, text, settings.max_new_tokens)
    notices += more + cut
    run = A.start_generation(model, tokenizer, ids, replace(settings, max_new_tokens=max_new))
    session = getattr(request, "session_hash", None)
    if session:
        _stop_flags[session] = run.stop
    output = ""
    try:
        yield "", status(f"Generating with **{info.name}** ({ids.shape[1]} prompt tokens)…", *notices)
        for piece in run.streamer:
            output += piece
            yield output, status(f"{tokens(run.streamer.n_tokens)} · {run.tokens_per_second():.1f} tokens/s", *notices)
    finally:
        stopped = run.stop.is_set()
        run.stop.set()  # a client that went away closes this generator: end generate() too
        if session and _stop_flags.get(session) is run.stop:
            del _stop_flags[session]
    if run.error:
        raise run.error[0]
    first = run.streamer.first_token_at
    latency = f" · first token after {1000 * (first - run.streamer.started):.0f} ms" if first else ""
    if not output.strip():
        notices.append("The model produced no visible text (it may have ended at once, or produced only special tokens).")
    outcome = "Stopped" if stopped else "Done"
    yield output, status(f"{outcome}: **{tokens(run.streamer.n_tokens)}** · **{run.tokens_per_second():.1f} tokens/s**{latency}", *notices)


def stop_generation(request: gr.Request = None) -> None:
    """The Stop button: end this session's running generation after its current token."""
    flag = _stop_flags.get(getattr(request, "session_hash", None))
    if flag is not None:
        flag.set()


def folio_example():
    return FOLIO_EXAMPLE, analysis().SEQ2SEQ_NAME, "Greedy"


@guarded(n_outputs=7)
def encoding_plots():
    """The encoding heatmaps, similarity against distance, and the evaluation's extrapolation curves."""
    A = analysis()
    catalog = A.discover_checkpoints()
    figures, notices = A.encoding_figures(catalog)
    results = A.read_results()
    experiment = set(A.encoding_models(catalog).values())  # the controlled five, not the larger main model
    curves = {name: curve for name, curve in results.extrapolation.items() if name in experiment}
    contexts = {results.training_context[name] for name in curves if name in results.training_context}
    extrapolation = A.extrapolation_figure(curves, contexts.pop() if len(contexts) == 1 else None)
    if results.notice:
        notices.append(results.notice)
    return (figures["sinusoidal"], figures["learned"], figures["rope"], figures["alibi"], figures["similarity"],
            extrapolation, status(*notices) or "Encodings computed from the checkpoints' configs.")


@guarded(n_outputs=2)
def recompute_extrapolation(text, progress=gr.Progress()):
    """bits/char against context length of the five encoding models on the user's own text."""
    A = analysis()
    text, notices = user_text(text, "some text to score")
    catalog = A.discover_checkpoints()
    if not A.encoding_models(catalog):
        raise InputProblem("No decoder-only checkpoints to score with.")
    results = A.read_results()
    lengths = sorted({n for curve in results.extrapolation.values() for n in curve}) or [32, 64, 128, 256, 512]
    curves, more = A.recompute_extrapolation(catalog, text, lengths, progress=lambda f, d: progress(f, desc=d))
    figure = A.extrapolation_figure(curves, title=f"Extrapolation on your text ({len(text):,} characters)")
    return figure, status(f"Scored {len(text):,} characters at context lengths {', '.join(map(str, lengths))}.", *notices, *more)


@guarded(n_outputs=6)
def compare_encodings(prompt, max_new_tokens):
    """One prompt, greedily continued by each of the five encoding models; each box fills as its model finishes."""
    A = analysis()
    text, notices = user_text(prompt)
    settings, more = A.sanitize_decoding("greedy", 1.0, 0, 1.0, 1.0, max_new_tokens, 0, limit=256)
    notices += more
    catalog = A.discover_checkpoints()
    family = A.encoding_models(catalog)
    outputs = ["(no checkpoint with this encoding yet)"] * 5
    for i, encoding in enumerate(ENCODINGS):
        if encoding not in family:
            continue
        outputs[i] = "…"
        yield (*outputs, status(f"Generating with {family[encoding]}…", *notices))
        model, tokenizer = A.load_checkpoint(catalog[family[encoding]].path)
        outputs[i], cut = A.generate_text(model, tokenizer, text, settings)
        notices += [f"{family[encoding]}: {c}" for c in cut]
    yield (*outputs, status(f"Done: {len(family)} models, greedy, {settings.max_new_tokens} new tokens each.", *notices))


_attention_cache: dict = {}
_attention_lock = threading.Lock()


def cached_attention(model_name: str, text: str):
    """Attention maps of (model, text), kept for the head / layer pickers (a few recent inputs)."""
    info, model, tokenizer = checkpoint(model_name)
    key = (str(info.path), text)
    with _attention_lock:
        if key in _attention_cache:
            return info, _attention_cache[key]
    maps = analysis().attention_maps(model, tokenizer, text)
    with _attention_lock:
        _attention_cache[key] = maps
        while len(_attention_cache) > 8:
            _attention_cache.pop(next(iter(_attention_cache)))
    return info, maps


def picked(info, maps, kind, layer, head) -> tuple[str, int, int | None]:
    """The attention kind, layer and head (None: the mean over heads) to show, kept to what the model has."""
    if not info.is_encoder_decoder:
        kind = "self"
    elif kind not in ("encoder", "decoder", "cross"):
        kind = "cross"
    n_layers, n_heads = maps.weights[kind].shape[:2]

    def index(value, size: int) -> int | None:
        try:
            return min(max(int(value), 0), size - 1)
        except (TypeError, ValueError):
            return None

    return kind, index(layer, n_layers) or 0, index(head, n_heads)


KIND_CHOICES = {"self": "self-attention", "encoder": "encoder self-attention",
                "decoder": "decoder masked self-attention", "cross": "cross-attention"}


@guarded(n_outputs=6)
def show_attention(text, model_name, kind, layer, head):
    """Grid of every layer × head, and one head (or the mean over heads) enlarged with token labels."""
    A = analysis()
    text, notices = user_text(text, "some text")
    info, maps = cached_attention(model_name, text)
    kind, layer, head_index = picked(info, maps, kind, layer, head)
    weights = maps.weights[kind]
    n_layers, n_heads = weights.shape[:2]
    kinds = ["encoder", "decoder", "cross"] if info.is_encoder_decoder else ["self"]
    return (
        A.attention_grid_figure(maps, kind),
        A.attention_head_figure(maps, kind, layer, head_index),
        gr.update(choices=[(KIND_CHOICES[k], k) for k in kinds], value=kind),
        gr.update(choices=[str(i) for i in range(n_layers)], value=str(layer)),
        gr.update(choices=["average"] + [str(h) for h in range(n_heads)], value="average" if head_index is None else str(head_index)),
        status(f"{info.name}: {n_layers} layers × {n_heads} heads, {weights.shape[2]} query × {weights.shape[3]} key tokens "
               f"({KIND_CHOICES[kind]}). Hover a cell for query, key and weight.", *notices, *maps.notices),
    )


@guarded(n_outputs=2)
def show_head(text, model_name, kind, layer, head):
    """Only the enlarged head, for the layer / head / kind pickers (the grid stays)."""
    A = analysis()
    text, _ = user_text(text, "some text")
    info, maps = cached_attention(model_name, text)
    return A.attention_head_figure(maps, *picked(info, maps, kind, layer, head)), gr.skip()


@guarded(n_outputs=4)
def trace_forward(text, model_name):
    """The real shape of every step of one forward pass over the user's text."""
    A = analysis()
    text, notices = user_text(text, "some text")
    info, model, tokenizer = checkpoint(model_name)
    trace = A.forward_trace(model, tokenizer, text)
    c = model.config
    summary = (
        f"**{info.name}**: {'encoder-decoder' if c.is_encoder_decoder else 'decoder-only'}, "
        f"position encoding **{c.position_encoding}**, d_model={c.d_model}, heads={c.n_heads} (d_head={c.d_head}), "
        f"layers={c.n_layers}" + (f" (+{c.n_encoder_layers} encoder)" if c.is_encoder_decoder else "")
        + f", d_ff={c.d_ff}, vocab={c.vocab_size}. Logits shape from the model's output: **{trace.logits_shape}**. "
        "Shapes below were recorded by hooks during this forward pass (layer 0 in detail, then every layer's output)."
    )
    return A.trace_table(trace), A.top_tokens_figure(trace.top_next), summary, status(*notices, *trace.notices) or "Forward pass done."


# ----------------------------------------------------------------------------------------------
# Teaching views (issue 11): attention step by step, logit lens, head ablation, sampling
# ----------------------------------------------------------------------------------------------

STEPS_EXAMPLE = "To be, or not to be, that is the question"
SAMPLING_EXAMPLE = "Shall I compare thee to a summer's"
RAW = dict(preprocess=False)  # the explorer checks raw inputs and says what is wrong (issue 12)
TEACH_KINDS = [("self-attention (decoder-only models)", "self"), ("encoder self-attention", "encoder"),
               ("decoder masked self-attention", "decoder"), ("cross-attention", "cross")]


@contextlib.contextmanager
def user_error():
    """A ValueError from the explorer names what was wrong and what is allowed: show it as such (escaped)."""
    try:
        yield
    except ValueError as error:
        raise InputProblem(html.escape(str(error), quote=False)) from None


def clicked(field: str):
    """The handler of a click on a clickable gr.HTML (explorer.teach_html.CLICK_JS): the clicked item's number."""
    def pick(evt: gr.EventData):
        return int(getattr(evt, field))
    pick.__name__ = f"clicked_{field}"
    return pick


def worked_example():
    """The notes' Hello World example, computed with the model's own functions (no model needed)."""
    from explorer import teach_html
    from explorer.worked_example import worked_example as compute

    steps, where_wrong = compute()
    return where_wrong, teach_html.steps_html(steps)


@guarded(n_outputs=3)
def attention_steps(text, model_name, kind, layer, head, query, full_precision):
    """One head, one query token: every step of the attention computation with the model's numbers."""
    from explorer import steps, teach_html

    text, notices = user_text(text, "some text")
    info, model, tokenizer = checkpoint(model_name)
    with user_error():
        view = steps.attention_steps(model, tokenizer, text, kind, layer, head, query)
    return (teach_html.token_strip_html(view.query_tokens, view.query),
            teach_html.steps_html(view.steps, full=bool(full_precision)),
            status(f"**{info.name}**, {dict((v, k) for k, v in TEACH_KINDS)[view.kind]}, layer {view.layer}, head {view.head}, "
                   f"query token {html.escape(view.query_tokens[view.query])}: {len(view.steps)} steps; every number the model "
                   f"also computed matches it within {view.max_difference:.1e}. Click a token above to follow another query.",
                   *notices, *view.notices))


@guarded(n_outputs=4)
def logit_lens(text, model_name, position):
    """Top 5 next tokens per layer at one position; the probability of the actual next token everywhere."""
    from explorer import lens, teach_figures, teach_html

    text, notices = user_text(text, "some text")
    info, model, tokenizer = checkpoint(model_name)
    with user_error():
        result = lens.logit_lens(model, tokenizer, text, position)
    labels = [f"{i}:{t}" for i, t in enumerate(result.tokens)]
    return (teach_html.token_strip_html(labels, result.position), teach_html.lens_table_html(result),
            teach_figures.lens_heatmap(result),
            status(f"**{info.name}**: {len(result.rows)} read-outs (embeddings and {len(result.rows) - 1} layers) of "
                   f"{len(result.tokens)} tokens. The last row is the model's own prediction. Click a token to read after it.",
                   *notices, *result.notices))


@guarded(n_outputs=3)
def ablate_heads(text, model_name, kind, heads):
    """The loss and next-token probabilities with the chosen heads removed."""
    from explorer import ablation, teach_figures

    text, notices = user_text(text, "some text")
    info, model, tokenizer = checkpoint(model_name)
    with user_error():
        result = ablation.ablate_heads(model, tokenizer, text, heads, kind)
    removed = ", ".join(f"L{l}.H{h}" for l, h in result.removed) or "none"
    change = result.loss_after - result.loss_before
    return (teach_figures.ablation_figure(result), teach_figures.token_loss_figure(result),
            status(f"**{info.name}**, heads removed: {removed}. Loss on the text {result.loss_before:.4f} → "
                   f"{result.loss_after:.4f} nats ({change:+.4f}).", *notices, *result.notices))


@guarded(n_outputs=2)
def rank_heads(text, model_name, kind, progress=gr.Progress()):
    """Every head removed alone: the rise in loss, as a layer × head map."""
    from explorer import ablation, teach_figures

    text, notices = user_text(text, "some text")
    info, model, tokenizer = checkpoint(model_name)
    with user_error():
        ranking = ablation.rank_heads(model, tokenizer, text, kind, progress=lambda f, d: progress(f, desc=d))
    top = ", ".join(f"L{l}.H{h} ({teach_figures.signed(v)})" for l, h, v in ranking.order()[:3])
    return teach_figures.ranking_figure(ranking), status(
        f"**{info.name}**: {ranking.increase.size} heads, each removed alone. Costliest: {top}.", *notices, *ranking.notices)


@guarded(n_outputs=2)
def next_token_distribution(prompt, model_name, temperature, top_k, top_p, repetition_penalty):
    """The next-token distribution after temperature, top-k and top-p, as generate samples from it."""
    from explorer import sampling, teach_figures

    text, notices = user_text(prompt)
    info, model, tokenizer = checkpoint(model_name)
    with user_error():
        settings = sampling.SamplingSettings.checked(temperature, top_k, top_p, repetition_penalty)
        d = sampling.next_token_distribution(model, tokenizer, text, settings)
    first = "the first token of the rewrite" if model.config.is_encoder_decoder else "the next token"
    return teach_figures.distribution_figure(d), status(
        f"**{info.name}**: {first} is drawn from {d.n_kept:,} of {d.vocab_size:,} tokens "
        f"({d.kept_mass:.1%} of the probability after temperature, renormalised to 100%).", *notices, *d.notices)


def teach_catalog():
    """The teaching tabs' model menus (decoder-only models first, the main model selected)."""
    A = analysis()
    catalog, results = A.discover_checkpoints(), A.read_results()
    names = list(catalog)
    causal = [n for n in names if not catalog[n].is_encoder_decoder]
    main = results.main_model if results.main_model in causal else (causal[0] if causal else None)
    return tuple(gr.update(choices=choices, value=main) for choices in (names, causal, names, causal))


def build_teaching_tabs(demo: gr.Blocks) -> None:
    """The four teaching tabs; called inside build_demo's Blocks."""
    from explorer import teaching
    from explorer.teach_html import CLICK_JS, CSS as TEACH_CSS

    def clickable(elem_id: str) -> gr.HTML:
        return gr.HTML(elem_id=elem_id, js_on_load=CLICK_JS, css_template=TEACH_CSS)

    with gr.Tab("Attention, step by step", id="steps") as steps_tab:
        gr.Markdown(teaching.STEPS.split("\n\n")[0])
        with gr.Accordion("The notes' worked example, done right (no model needed)", open=True) as example_box:
            gr.Markdown(teaching.WORKED_EXAMPLE)
            example_wrong = gr.Markdown(elem_id="example-wrong")
            example_steps = gr.HTML(elem_id="example-steps", css_template=TEACH_CSS)
        with gr.Row():
            steps_text = gr.Textbox(label="Text", value=STEPS_EXAMPLE, lines=2, scale=4, elem_id="steps-text")
            with gr.Column(scale=2):
                steps_model = gr.Dropdown(label="Model", allow_custom_value=True, elem_id="steps-model")
                steps_kind = gr.Dropdown(TEACH_KINDS, value="self", label="Attention", elem_id="steps-kind")
        with gr.Row():
            steps_layer = gr.Number(value=0, precision=0, label="Layer (−1: last)", elem_id="steps-layer", min_width=100)
            steps_head = gr.Number(value=0, precision=0, label="Head", elem_id="steps-head", min_width=100)
            steps_query = gr.Number(value=-1, precision=0, label="Query token (−1: last)", elem_id="steps-query", min_width=100)
            steps_full = gr.Checkbox(label="Every digit (float32)", value=False, elem_id="steps-full")
            steps_button = gr.Button("Show the steps", variant="primary", elem_id="steps-button")
        steps_tokens = clickable("steps-tokens")
        steps_status = gr.Markdown(elem_id="steps-status", elem_classes="status-line")
        steps_body = gr.HTML(elem_id="steps-body", css_template=TEACH_CSS)
        with gr.Accordion("The concepts behind these steps", open=False):
            gr.Markdown("\n\n".join(teaching.CONCEPTS))
        steps_inputs = [steps_text, steps_model, steps_kind, steps_layer, steps_head, steps_query, steps_full]
        steps_outputs = [steps_tokens, steps_body, steps_status]
        steps_tab.select(worked_example, None, [example_wrong, example_steps], api_name="worked_example")
        steps_button.click(lambda: gr.Accordion(open=False), None, example_box, api_name="steps_fold_example",
                           api_visibility="private")  # the model's steps come next: out of their way
        gr.on([steps_button.click, steps_full.input], attention_steps, steps_inputs, steps_outputs,
              api_name="attention_steps", **HEAVY, **RAW)
        steps_tokens.click(clicked("index"), None, steps_query, api_name="steps_pick_query", api_visibility="private").then(
            attention_steps, steps_inputs, steps_outputs, api_name="attention_steps_query", **HEAVY, **RAW)

    with gr.Tab("Logit lens", id="lens"):
        gr.Markdown(teaching.LENS)
        with gr.Row():
            lens_text = gr.Textbox(label="Text", value=PROMPT_EXAMPLE, lines=2, scale=4, elem_id="lens-text")
            with gr.Column(scale=2):
                lens_model = gr.Dropdown(label="Model", allow_custom_value=True, elem_id="lens-model")
                lens_position = gr.Number(value=-1, precision=0, label="Position (−1: last)", elem_id="lens-position")
                lens_button = gr.Button("Read every layer", variant="primary", elem_id="lens-button")
        lens_tokens = clickable("lens-tokens")
        lens_status = gr.Markdown(elem_id="lens-status", elem_classes="status-line")
        lens_table = gr.HTML(elem_id="lens-table", css_template=TEACH_CSS)
        lens_plot = gr.Plot(label="Probability of the actual next token", elem_id="plot-lens")
        lens_inputs, lens_outputs = [lens_text, lens_model, lens_position], [lens_tokens, lens_table, lens_plot, lens_status]
        lens_button.click(logit_lens, lens_inputs, lens_outputs, api_name="logit_lens", **HEAVY, **RAW)
        lens_tokens.click(clicked("index"), None, lens_position, api_name="lens_pick_position", api_visibility="private").then(
            logit_lens, lens_inputs, lens_outputs, api_name="logit_lens_position", **HEAVY, **RAW)

    with gr.Tab("Head ablation", id="ablation"):
        gr.Markdown(teaching.ABLATION)
        with gr.Row():
            ablation_text = gr.Textbox(label="Text", value=ATTENTION_EXAMPLE, lines=2, scale=4, elem_id="ablation-text")
            with gr.Column(scale=2):
                ablation_model = gr.Dropdown(label="Model", allow_custom_value=True, elem_id="ablation-model")
                ablation_kind = gr.Dropdown(TEACH_KINDS, value="self", label="Attention", elem_id="ablation-kind")
        with gr.Row():
            ablation_heads = gr.Textbox(label="Heads to remove: layer.head, or a layer number for all its heads",
                                        value="0.0, 1.2", scale=3, elem_id="ablation-heads")
            ablation_button = gr.Button("Remove these heads", variant="primary", elem_id="ablation-button")
            rank_button = gr.Button("Rank every head", elem_id="rank-button")
        ablation_status = gr.Markdown(elem_id="ablation-status", elem_classes="status-line")
        with gr.Row():  # side by side when there is room for both, one above the other on narrow pages
            ablation_plot = gr.Plot(label="Next token", elem_id="plot-ablation", min_width=480)
            token_loss_plot = gr.Plot(label="Loss per token", elem_id="plot-token-loss", min_width=480)
        rank_plot = gr.Plot(label="Every head, removed alone", elem_id="plot-rank")
        ablation_inputs = [ablation_text, ablation_model, ablation_kind]
        ablation_button.click(ablate_heads, [*ablation_inputs, ablation_heads], [ablation_plot, token_loss_plot, ablation_status],
                              api_name="ablate_heads", **HEAVY, **RAW)
        rank_button.click(rank_heads, ablation_inputs, [rank_plot, ablation_status], api_name="rank_heads", **HEAVY, **RAW)

    with gr.Tab("Sampling, seen", id="sampling"):
        gr.Markdown(teaching.SAMPLING)
        with gr.Row():
            with gr.Column(scale=3, min_width=520):
                sampling_prompt = gr.Textbox(label="Prompt", value=SAMPLING_EXAMPLE, lines=2, elem_id="sampling-prompt")
                sampling_plot = gr.Plot(label="Next-token distribution", elem_id="plot-sampling")
                sampling_status = gr.Markdown(elem_id="sampling-status", elem_classes="status-line")
            with gr.Column(scale=2):
                sampling_model = gr.Dropdown(label="Model", allow_custom_value=True, elem_id="sampling-model")
                sampling_temperature = gr.Slider(0.05, 5.0, value=1.0, step=0.05, label="Temperature", elem_id="sampling-temperature")
                sampling_top_k = gr.Slider(0, 200, value=0, step=1, label="Top-k (0 = off)", elem_id="sampling-top-k")
                sampling_top_p = gr.Slider(0.01, 1.0, value=1.0, step=0.01, label="Top-p (1 = off)", elem_id="sampling-top-p")
                sampling_penalty = gr.Slider(0.5, 2.0, value=1.0, step=0.05, label="Repetition penalty (1 = off)",
                                             elem_id="sampling-penalty")
                sampling_button = gr.Button("Show the distribution", variant="primary", elem_id="sampling-button")
        sampling_inputs = [sampling_prompt, sampling_model, sampling_temperature, sampling_top_k, sampling_top_p, sampling_penalty]
        gr.on([sampling_button.click, sampling_prompt.submit, sampling_temperature.input, sampling_top_k.input,
               sampling_top_p.input, sampling_penalty.input], next_token_distribution, sampling_inputs,
              [sampling_plot, sampling_status], api_name="next_token_distribution", trigger_mode="always_last", **HEAVY, **RAW)

    demo.load(teach_catalog, None, [steps_model, lens_model, ablation_model, sampling_model], api_name="teach_catalog")


# ----------------------------------------------------------------------------------------------
# Layout
# ----------------------------------------------------------------------------------------------

INTRO = """# A Transformer from scratch
Four views of the same models: **generate** text, **compare** positional encodings (sinusoidal, learned, RoPE,
ALiBi, none), look at **attention heads**, and follow the tensor **shapes through one forward pass**."""

TRACE_HEADERS = ["stack", "step", "shape", "dimensions", "what it is", "read from"]  # analysis.trace_table's columns
CSS = ".status-line {min-height: 1.5em} .plot-row {gap: 8px}"


def build_demo() -> gr.Blocks:
    with gr.Blocks(title="Transformer from scratch") as demo:
        gr.Markdown(INTRO)
        catalog_status = gr.Markdown("Looking for checkpoints…", elem_id="catalog-status")

        with gr.Tab("Generate", id="generate"):
            with gr.Row():
                with gr.Column(scale=3):
                    prompt = gr.Textbox(label="Prompt (for folio-to-modern: First Folio text to rewrite)", lines=4,
                                        value=PROMPT_EXAMPLE, elem_id="gen-prompt")
                    with gr.Row():
                        generate_button = gr.Button("Generate", variant="primary", elem_id="gen-button")
                        stop_button = gr.Button("Stop", variant="stop", elem_id="gen-stop")
                        folio_button = gr.Button("Folio example", size="sm")
                    output = gr.Textbox(label="Output (streamed token by token)", lines=8, elem_id="gen-output")
                    gen_status = gr.Markdown(elem_id="gen-status", elem_classes="status-line")
                with gr.Column(scale=2):
                    gen_model = gr.Dropdown(label="Model", allow_custom_value=True, elem_id="gen-model")
                    mode = gr.Radio(["Sampling", "Greedy"], value="Sampling", label="Decoding")
                    temperature = gr.Slider(0.0, 2.0, value=0.8, step=0.05, label="Temperature (0 = greedy)")
                    top_k = gr.Slider(0, 200, value=40, step=1, label="Top-k (0 = off)")
                    top_p = gr.Slider(0.0, 1.0, value=0.95, step=0.01, label="Top-p (1 = off)")
                    repetition_penalty = gr.Slider(1.0, 2.0, value=1.1, step=0.05, label="Repetition penalty (1 = off)")
                    max_new_tokens = gr.Number(value=80, precision=0, label="Max new tokens (1–512)", elem_id="gen-max-new")
                    seed = gr.Number(value=0, precision=0, label="Seed (sampling)")
            generate_button.click(
                generate, [prompt, gen_model, mode, temperature, top_k, top_p, repetition_penalty, max_new_tokens, seed],
                [output, gen_status], api_name="generate", **HEAVY)
            prompt.submit(
                generate, [prompt, gen_model, mode, temperature, top_k, top_p, repetition_penalty, max_new_tokens, seed],
                [output, gen_status], api_name="generate_submit", **HEAVY)
            stop_button.click(stop_generation, None, None, api_name="stop_generation")
            folio_button.click(folio_example, None, [prompt, gen_model, mode], api_name="folio_example")

        with gr.Tab("Compare encodings", id="encodings") as encodings_tab:
            gr.Markdown("Each encoding at the size of the trained models. Heatmaps: rows are positions, columns are "
                        "dimensions (RoPE: rotation pairs; ALiBi: heads × distance). Hover for values.")
            enc_status = gr.Markdown(elem_id="enc-status", elem_classes="status-line")
            with gr.Row(elem_classes="plot-row"):
                sinusoidal_plot = gr.Plot(label="Sinusoidal", elem_id="plot-sinusoidal")
                learned_plot = gr.Plot(label="Learned", elem_id="plot-learned")
            with gr.Row(elem_classes="plot-row"):
                rope_plot = gr.Plot(label="RoPE", elem_id="plot-rope")
                alibi_plot = gr.Plot(label="ALiBi", elem_id="plot-alibi")
            similarity_plot = gr.Plot(label="Similarity against distance", elem_id="plot-similarity")
            extrapolation_plot = gr.Plot(label="Extrapolation", elem_id="plot-extrapolation")
            with gr.Row():
                own_text = gr.Textbox(label="Your own text, to recompute the extrapolation curves on it", lines=3, scale=4,
                                      elem_id="own-text")
                recompute_button = gr.Button("Recompute on my text", scale=1, elem_id="recompute-button")
            gr.Markdown("### One prompt, five encodings (greedy)")
            with gr.Row():
                compare_prompt = gr.Textbox(label="Prompt", value=PROMPT_EXAMPLE, scale=4)
                compare_tokens = gr.Number(value=40, precision=0, label="Max new tokens", scale=1)
                compare_button = gr.Button("Generate with all five", variant="primary", scale=1, elem_id="compare-button")
            with gr.Row():
                compare_outputs = [gr.Textbox(label=e, lines=6, elem_id=f"compare-{e}") for e in ENCODINGS]
            compare_status = gr.Markdown(elem_id="compare-status", elem_classes="status-line")
            encodings_tab.select(encoding_plots, None, [sinusoidal_plot, learned_plot, rope_plot, alibi_plot,
                                                        similarity_plot, extrapolation_plot, enc_status],
                                 api_name="encoding_plots", **HEAVY)
            recompute_button.click(recompute_extrapolation, own_text, [extrapolation_plot, enc_status],
                                   api_name="recompute_extrapolation", **HEAVY)
            compare_button.click(compare_encodings, [compare_prompt, compare_tokens], [*compare_outputs, compare_status],
                                 api_name="compare_encodings", **HEAVY)

        with gr.Tab("Attention heads", id="attention"):
            with gr.Row():
                attention_text = gr.Textbox(label="Text", value=ATTENTION_EXAMPLE, lines=2, scale=4, elem_id="att-text")
                with gr.Column(scale=2):
                    attention_model = gr.Dropdown(label="Model", allow_custom_value=True, elem_id="att-model")
                    attention_button = gr.Button("Show attention", variant="primary", elem_id="att-button")
            with gr.Row():
                # menus that accept any value: their choices follow the model, and gradio keeps the narrowed
                # choices per session, which would otherwise reject the next model's layers
                kind = gr.Dropdown([(KIND_CHOICES["self"], "self")], value="self", allow_custom_value=True,
                                   label="Attention (folio-to-modern: encoder, decoder, cross)")
                layer = gr.Dropdown(["0"], value="0", label="Layer", allow_custom_value=True)
                head = gr.Dropdown(["average"], value="average", label="Head (or average over heads)", allow_custom_value=True)
            attention_status = gr.Markdown(elem_id="att-status", elem_classes="status-line")
            grid_plot = gr.Plot(label="Every layer × head", elem_id="plot-grid")
            head_plot = gr.Plot(label="One head, enlarged", elem_id="plot-head")
            attention_inputs = [attention_text, attention_model, kind, layer, head]
            attention_button.click(show_attention, attention_inputs, [grid_plot, head_plot, kind, layer, head, attention_status],
                                   api_name="attention", **HEAVY)
            for picker, name in ((layer, "attention_layer"), (head, "attention_head")):
                picker.input(show_head, attention_inputs, [head_plot, attention_status], api_name=name, **HEAVY)
            kind.input(show_attention, attention_inputs, [grid_plot, head_plot, kind, layer, head, attention_status],
                       api_name="attention_kind", **HEAVY)

        with gr.Tab("Inside the forward pass", id="forward"):
            with gr.Row():
                trace_text = gr.Textbox(label="Text", value=PROMPT_EXAMPLE, lines=2, scale=4, elem_id="trace-text")
                with gr.Column(scale=2):
                    trace_model = gr.Dropdown(label="Model", allow_custom_value=True, elem_id="trace-model")
                    trace_button = gr.Button("Run one forward pass", variant="primary", elem_id="trace-button")
            trace_summary = gr.Markdown(elem_id="trace-summary")
            trace_status = gr.Markdown(elem_id="trace-status", elem_classes="status-line")
            trace_table = gr.Dataframe(headers=TRACE_HEADERS, label="Tensor shapes, in the order they were computed",
                                       wrap=True, max_height=2400, column_widths=["7%", "22%", "10%", "21%", "25%", "15%"],
                                       elem_id="trace-table", interactive=False)
            top_plot = gr.Plot(label="Next token", elem_id="plot-top")
            trace_button.click(trace_forward, [trace_text, trace_model], [trace_table, top_plot, trace_summary, trace_status],
                               api_name="forward_trace", **HEAVY)

        build_teaching_tabs(demo)
        demo.load(load_catalog, None, [gen_model, attention_model, trace_model, catalog_status], api_name="catalog")
    demo.queue(default_concurrency_limit=4)
    return demo


demo = build_demo()


def warm_up(threads: int = 1) -> None:
    """Import torch and load every checkpoint right after launch, so the first request does not wait for them.

    One torch thread per request (requests run side by side, two at a time): on a shared 2-core machine two
    OpenMP threads per forward pass wait on each other; measured here, a 128-token forward pass took 0.47 s
    with 2 threads and 0.03 s with 1, and generation ran at 8 against 61 tokens/s."""
    try:
        import torch

        torch.set_num_threads(threads)
        A = analysis()
        catalog, main = A.discover_checkpoints(), A.read_results().main_model
        for info in sorted(catalog.values(), key=lambda info: info.name != main):  # the default model first
            A.load_checkpoint(info.path)
        A.heatmap_figure([[0.0]], "", "", "").to_json()  # plotly imports its validators on first use: not in a request
        A.extrapolation_figure({"": {1: 1.0}}).to_json()
    except Exception:  # noqa: BLE001 - a request will show the problem
        logger.exception("warm-up failed")


if __name__ == "__main__":
    demo.launch(prevent_thread_lock=True, css=CSS)
    warm_up(int(os.environ.get("SCRATCH_TORCH_THREADS", "1")))
    demo.block_thread()
