"""The Gradio app: generate, compare positional encodings, look at attention, follow one forward pass.

    python app.py                           # serves on GRADIO_SERVER_NAME:GRADIO_SERVER_PORT (default 127.0.0.1:7860)
    SCRATCH_CHECKPOINTS=DIR python app.py   # checkpoints from DIR instead of ./checkpoints
    SCRATCH_TORCH_THREADS=2 python app.py   # torch threads per request (default 1; see warm_up)

UI wiring only: everything shown is computed in the ``explorer`` package (tested on its own). ``demo`` is
built at import without torch: the page is served in a few seconds, and torch, transformers and the models
load in the background right after launch (or on the first request when imported by a test).
Checkpoints are discovered when a page loads, so a checkpoint trained while the app runs shows up on reload.
"""

import functools
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
