"""The Gradio app: generate, compare positional encodings, look at attention, follow one forward pass.

    python app.py                           # serves on GRADIO_SERVER_NAME:GRADIO_SERVER_PORT (default 127.0.0.1:7860)
    SCRATCH_CHECKPOINTS=DIR python app.py   # checkpoints from DIR instead of ./checkpoints
    SCRATCH_TORCH_THREADS=2 python app.py   # torch threads per request (default 1; see warm_up)

UI wiring only: everything shown is computed in the ``explorer`` package (tested on its own). ``demo`` is
built at import, with the model menus filled (discovery reads config files and weight headers, loads no
weights): when the page answers, every control on it works. Importing the explorer imports torch and the
model package (a few seconds); the weights load in the background right after launch (or on the first
request when imported by a test). A page load refreshes the menus, so a checkpoint trained while the app
runs shows up on reload.

Every event is named (its ``api_name`` is the Space's public API), takes its inputs unprocessed
(``preprocess=False``: the explorer checks them and says what is wrong instead of a bare error), and ends
any failure as a message in its status line, clearing the results of the request before.
Each tab is one function below; a new tab is one more function called from ``build_demo``.
"""

import functools
import inspect
import logging
import os
import time
from dataclasses import dataclass, replace

import gradio as gr

from explorer import (ablation, attention, catalog, encodings, experiment, figures, generation, heads, inputs, lens, sampling,
                      steps, teach_figures, teach_html, teaching, trace)
from explorer.tokens import numbered
from explorer.worked_example import worked_example as compute_worked_example
from explorer.inputs import InputProblem
from modeling import POSITION_ENCODINGS

logger = logging.getLogger("app")

# concurrency: the interactive events share two slots (the machine has 2 cores); the long jobs get a slot
# each of their own, so that however many are queued, a click on Generate starts at once
INTERACTIVE = dict(concurrency_id="model", concurrency_limit=2)
EXTRAPOLATION = dict(concurrency_id="extrapolation", concurrency_limit=1)
COMPARISON = dict(concurrency_id="comparison", concurrency_limit=1)
UNCHECKED = dict(preprocess=False)  # the explorer validates raw inputs and explains what is wrong

FOLIO_EXAMPLE = "Shall I compare thee to a Summers day?\nThou art more louely and more temperate:"  # rewritten line by line
PROMPT_EXAMPLE = "Shall I compare thee to a summer's day?"
ATTENTION_EXAMPLE = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer"
DEFAULTS = generation.DecodingSettings(True, temperature=0.8, top_k=40, top_p=0.95, repetition_penalty=1.1,
                                       max_new_tokens=80, seed=0)  # what the Generate tab starts with
COMPARE_MAX_NEW_TOKENS = 256  # per model in "one prompt, five encodings": five generations in one request


# ----------------------------------------------------------------------------------------------
# Event plumbing
# ----------------------------------------------------------------------------------------------


NO_FIGURE, NO_TEXT = None, ""  # what a plot or table, and a text box, show after a failed request: nothing
KEPT = gr.skip()  # a menu keeps its value


def guarded(*on_failure):
    """Run an event handler whose LAST output is a status line so that any failure ends as a message there
    (what was wrong, what is allowed), never a traceback, and the other outputs take ``on_failure`` (one
    value each): results of an earlier request are cleared rather than left looking like the answer to this
    one. Works for plain and generator (streaming) handlers."""

    def failure(error: Exception):
        if isinstance(error, InputProblem):
            message = str(error)
        else:
            logger.exception("event failed")
            message = f"Something went wrong ({inputs.error_text(error)}). The app is still running: try other input."
        return (*(dict(value) if isinstance(value, dict) else value for value in on_failure), f"⚠️ {message}")

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


def decoding_of(decoding: tuple):
    """The Generate tab's decoding controls as passed to another tab's event (its defaults when left out)."""
    return generation.sanitize_decoding(*decoding) if decoding else (DEFAULTS, [])


# ----------------------------------------------------------------------------------------------
# Event handlers
# ----------------------------------------------------------------------------------------------


def menus_now():
    """(choices, default value, status line) of the model menus, from the checkpoints on disk now."""
    found, results = catalog.discover_checkpoints(), catalog.read_results()
    notes = [] if found else [catalog.no_checkpoints_message()]
    damaged = [f"⚠ {info.name} cannot be used: {'; '.join(info.problems)}"
               for info in found.values() if not info.usable]
    missing = [e for e in POSITION_ENCODINGS if e not in catalog.encoding_models(found)]
    if found and missing:
        notes.append(f"No usable checkpoint yet for: {', '.join(missing)}.")
    if results.notice:
        notes.append(results.notice)
    usable = [name for name, info in found.items() if info.usable]
    summary = f"{len(usable)} model(s) ready: {', '.join(usable)}." if usable else ""
    return catalog.menu_choices(found, results), catalog.default_model(found, results), status(summary, *damaged, *notes)


def catalog_event(n_menus: int):
    """The page-load event: refresh ``n_menus`` model menus from the checkpoints on disk and say what is
    missing or damaged (the page was built with them filled; this picks up checkpoints added since)."""

    @guarded(*[KEPT] * n_menus)
    def load_catalog():
        choices, value, note = menus_now()
        return *(gr.update(choices=choices, value=value) for _ in range(n_menus)), note

    return load_catalog


stops = generation.StopRegistry()


@guarded(NO_TEXT)
def generate(prompt, model_name, mode, temperature, top_k, top_p, repetition_penalty, max_new_tokens, seed,
             request: gr.Request = None):
    """Stream the prompt and its continuation (or, for an encoder-decoder, the rewrite) token by token. An
    encoder-decoder rewrites a passage line by line (``generation.rewrite_lines``), one generate call a line."""
    text, notices = inputs.require_text(prompt)
    settings, more = generation.sanitize_decoding(mode, temperature, top_k, top_p, repetition_penalty, max_new_tokens, seed)
    info, model, tokenizer = catalog.resolve(model_name)
    notices += more
    sources, cut = generation.rewrite_lines(text) if info.is_encoder_decoder else ([text], [])
    notices += cut
    output = "" if info.is_encoder_decoder else text  # a continuation is shown after its prompt; a rewrite alone
    session = getattr(request, "session_hash", None)
    n_tokens, seconds, first_latency, stopped = 0, 0.0, None, False
    for k, source in enumerate(sources):
        ids, max_new, cut = generation.encode_prompt(model, tokenizer, source, settings.max_new_tokens)
        notices += [note for note in cut if note not in notices]
        run = generation.start_generation(model, tokenizer, ids, replace(settings, max_new_tokens=max_new))
        stops.register(session, run.stop)
        output += "\n" if k else ""
        line = f"line {k + 1} of {len(sources)}, " if len(sources) > 1 else ""
        try:
            yield output, status(f"Generating with **{info.name}** ({line}{tokens(ids.shape[1])} of prompt, "
                                 f"{settings.describe()})…", *notices)
            for piece in run.streamer:
                output += piece
                yield output, status(f"{line}{tokens(n_tokens + run.streamer.n_tokens)} · "
                                     f"{run.tokens_per_second():.1f} tokens/s", *notices)
        finally:
            stopped = run.stop.is_set()
            run.stop.set()  # a client that went away closes this generator: end generate() too
            stops.release(session, run.stop)
        if run.error:
            raise run.error[0]
        n_tokens += run.streamer.n_tokens
        seconds += time.perf_counter() - run.streamer.started
        if first_latency is None and run.streamer.first_token_at:
            first_latency = run.streamer.first_token_at - run.streamer.started
        if stopped:
            break
    latency = f" · first token after {1000 * first_latency:.0f} ms" if first_latency is not None else ""
    if not output.strip() or output == ("" if info.is_encoder_decoder else text):
        notices.append("The model produced no visible text (it may have ended at once, or produced only special tokens).")
    outcome = "Stopped" if stopped else "Done"
    speed = n_tokens / max(seconds, 1e-9) if n_tokens else 0.0
    yield output, status(f"{outcome}: **{tokens(n_tokens)}** · **{speed:.1f} tokens/s**{latency} · {settings.describe()}",
                         *notices)


def stop_generation(request: gr.Request = None) -> None:
    """The Stop button: end this session's running generation after its current token."""
    stops.stop(getattr(request, "session_hash", None))


def folio_example():
    """Two First Folio lines, the encoder-decoder model, and greedy decoding without a repetition penalty: how
    its figures (results.json, the model menu) were measured. A rewrite repeats its source's words by design."""
    return FOLIO_EXAMPLE, catalog.seq2seq_model(catalog.discover_checkpoints()) or gr.skip(), "Greedy", 1.0


def sampling_controls(n: int):
    """An event handler for a Decoding radio: in Greedy mode its ``n`` sampling controls (temperature, top-k,
    top-p, seed) are disabled, since greedy decoding takes the most likely token and they do nothing."""

    def toggle(mode):
        update = gr.update(interactive=not (isinstance(mode, str) and mode.strip().lower().startswith("greedy")))
        return update if n == 1 else tuple(dict(update) for _ in range(n))

    return toggle


@guarded(*[NO_FIGURE] * 6)
def encoding_plots():
    """The encoding heatmaps, similarity against distance, and the evaluation's extrapolation curves."""
    found = catalog.discover_checkpoints()
    shown, notices = figures.encoding_figures(found)
    results = catalog.read_results()
    family = {name: encoding for encoding, name in catalog.encoding_models(found).items()}
    curves = {name: results.extrapolation[name] for name in family if name in results.extrapolation}  # the controlled five
    contexts = {results.training_context[name] for name in curves if name in results.training_context}
    extrapolation = figures.extrapolation_figure(curves, family, contexts.pop() if len(contexts) == 1 else None)
    if results.notice:
        notices.append(results.notice)
    return (shown["sinusoidal"], shown["learned"], shown["rope"], shown["alibi"], shown["similarity"],
            extrapolation, status(*notices) or "Encodings computed from the checkpoints' configs.")


@guarded(NO_FIGURE, NO_TEXT)
def encoding_experiment():
    """The experiment as evaluated: loss at each position of long windows (the shipped seed of each encoding),
    and the tables over every seed, with the published ratios beside ours."""
    found = catalog.discover_checkpoints()
    results = catalog.read_results()
    family = {name: encoding for encoding, name in catalog.encoding_models(found).items()}
    curves = {name: results.position_loss[name] for name in family if name in results.position_loss}
    contexts = {results.training_context[name] for name in curves if name in results.training_context}
    figure = figures.position_loss_figure(curves, family, contexts.pop() if len(contexts) == 1 else None)
    configs = [found[name].config for name in family]
    tables = experiment.experiment_markdown(results.experiment, results.published, configs[0] if configs else None)
    return figure, tables, status(results.notice or "Figures from results.json, as `python -m training.evaluate` wrote them.")


@guarded(NO_FIGURE)
def recompute_extrapolation(text):
    """bits/char against context length of the encoding models on the user's own text, drawn as it is
    computed; leaving the page stops it (gradio closes the generator at its next step)."""
    text, notices = inputs.require_text(text, "some text to score")
    found = catalog.discover_checkpoints()
    family = catalog.encoding_models(found)
    if not family:
        raise InputProblem("No usable decoder-only checkpoints to score with.")
    contexts = {found[name].config.context_length for name in family.values()}
    context = contexts.pop() if len(contexts) == 1 else None
    title = f"Extrapolation on your text ({len(text):,} characters)"
    for state in encodings.recompute_extrapolation(found, text):
        figure = figures.extrapolation_figure(state.curves, state.encodings, context, title)
        progress = (f"Scored {state.done} of {state.total}" + ("." if state.finished else "…")
                    + f" Context lengths {', '.join(map(str, state.lengths))} tokens.")
        yield figure, status(progress, *notices, *state.notices)


@guarded(*[NO_TEXT] * len(POSITION_ENCODINGS))
def compare_encodings(prompt, max_new_tokens, mode="Sampling", seed=0):
    """One prompt continued by each encoding model with the same settings; each box fills as its model finishes."""
    text, notices = inputs.require_text(prompt)
    settings, more = generation.sanitize_decoding(mode, DEFAULTS.temperature, DEFAULTS.top_k, DEFAULTS.top_p,
                                                  DEFAULTS.repetition_penalty, max_new_tokens, seed, COMPARE_MAX_NEW_TOKENS)
    notices += more
    found = catalog.discover_checkpoints()
    family = catalog.encoding_models(found)
    outputs = {encoding: "(no usable checkpoint with this encoding yet)" for encoding in POSITION_ENCODINGS}
    for encoding, name in family.items():
        outputs[encoding] = "…"
        yield (*outputs.values(), status(f"Generating with {name}…", *notices))
        info, model, tokenizer = catalog.resolve(name)
        continuation, cut = generation.generate_text(model, tokenizer, text, settings)
        outputs[encoding] = text + continuation
        notices += [f"{name}: {c}" for c in cut]
    yield (*outputs.values(), status(f"Done: {len(family)} models, {settings.max_new_tokens} new tokens each, "
                                     f"{settings.describe()}.", *notices))


def attention_of(text, model_name, decoding):
    """(info, maps) of a text, read from its recorded run (recorded once per (checkpoint, text, decoding))."""
    text, notices = inputs.require_text(text, "some text")
    settings, more = decoding_of(decoding)
    info, model, tokenizer = catalog.resolve(model_name)
    maps = attention.attention_maps(model, tokenizer, text, settings)
    return info, maps, notices + (more if info.is_encoder_decoder else [])


def decoder_read(rewrite: str, decoded_with: str) -> str:
    return f"The decoder read the model's own rewrite ({decoded_with}, set on the Generate tab): «{inputs.echo(rewrite, 300)}»."


def head_types_of(model_name, maps, kind: str):
    """The head types of ``kind`` (None for cross-attention, which has none), scored on the maps' text."""
    if attention.SITES[kind].is_cross:
        return None
    _, model, _ = catalog.resolve(model_name)
    return heads.head_types(model, maps.weights[kind], kind)


def head_labels(types, layer: int, head: int | None) -> str:
    """'Layer 4, head 2: previous token 0.58 (threshold 0.4).' for the status line of an enlarged head."""
    if types is None or head is None:
        return ""
    found = types.labels(layer, head)
    what = "; ".join(f"{kind} {score:.2f}" for kind, score in found) or "no type reaches the threshold"
    return f"Layer {layer}, head {head}: {what} (threshold {types.threshold:g})."


@guarded(NO_TEXT, NO_FIGURE, KEPT, KEPT, KEPT)
def show_attention(text, model_name, kind, layer, head, *decoding):
    """Every layer × head as a clickable grid with the heads' types, and one head (or the mean over heads)
    enlarged with token labels."""
    info, maps, notices = attention_of(text, model_name, decoding)
    view, more = attention.pick_view(maps, kind, layer, head)
    weights = maps.weights[view.kind]
    n_layers, n_heads = weights.shape[:2]
    kinds = attention.kinds_of(info.is_encoder_decoder)
    rewrite = decoder_read(maps.rewrite, maps.decoded_with) if info.is_encoder_decoder else ""
    types = head_types_of(model_name, maps, view.kind)
    grid = teach_html.head_grid_html(weights, types, None if view.head is None else (view.layer, view.head))
    return (
        grid if types is None else teach_html.head_types_html(types) + grid,
        figures.attention_head_figure(maps, view),
        gr.update(choices=[(attention.ATTENTION_KINDS[k], k) for k in kinds], value=view.kind),
        gr.update(choices=[str(i) for i in range(n_layers)], value=str(view.layer)),
        gr.update(choices=["average"] + [str(h) for h in range(n_heads)], value="average" if view.head is None else str(view.head)),
        status(f"{info.name}: {n_layers} layers × {n_heads} heads, {weights.shape[2]} query × {weights.shape[3]} key "
               f"tokens ({attention.ATTENTION_KINDS[view.kind]}). Click a head in the grid to enlarge it; hover a cell "
               "for query, key and weight.", head_labels(types, view.layer, view.head), rewrite, *notices, *more, *maps.notices),
    )


@guarded(NO_FIGURE)
def show_head(text, model_name, kind, layer, head, *decoding):
    """Only the enlarged head, for the layer and head pickers and the grid (the grid stays)."""
    info, maps, notices = attention_of(text, model_name, decoding)
    view, more = attention.pick_view(maps, kind, layer, head)
    labels = head_labels(head_types_of(model_name, maps, view.kind), view.layer, view.head)
    return figures.attention_head_figure(maps, view), status(labels, *notices, *more) or gr.skip()


@guarded(NO_TEXT, NO_FIGURE)
def attention_token(text, model_name, kind, layer, query, *decoding):
    """Token-centred: what one query token attends to in every head of a layer."""
    info, maps, notices = attention_of(text, model_name, decoding)
    view, more = attention.pick_view(maps, kind, layer, "average")
    queries = maps.query_labels[view.kind]
    last = query is None or str(query).strip() == "-1"  # the default: the last token, whatever the text's length
    t, moved = (len(queries) - 1, []) if last else inputs.index(query, len(queries), "query token")
    more += moved
    types = head_types_of(model_name, maps, view.kind)
    figure = teach_figures.token_centred_figure(maps.weights[view.kind][view.layer, :, t, :], queries[t],
                                                maps.key_labels[view.kind], view.layer, types)
    return teach_html.token_strip_html(queries, t), figure, status(
        f"Layer {view.layer}: what {inputs.echo(queries[t])} attends to in each of its {figure.data[0].z.shape[0]} heads. "
        "Click another token to follow it.", *notices, *more)


@guarded(NO_FIGURE, NO_FIGURE, NO_TEXT)
def trace_forward(text, model_name, *decoding):
    """The real shape of every step of one forward pass over the user's text, and the next-token chart."""
    text, notices = inputs.require_text(text, "some text")
    settings, more = decoding_of(decoding)
    info, model, tokenizer = catalog.resolve(model_name)
    steps = trace.forward_trace(model, tokenizer, text, settings)
    last = steps.decoder_tokens[-1] if steps.decoder_tokens else ""
    summary = [catalog.config_summary(info.name, model.config),
               f"Logits from the model's output: **{steps.logits_shape}**. Every shape below is read from the recording "
               "of this pass (`with record() as recording: model(...)`): layer 0 in detail, then every "
               "layer's output. The last column says where: `layers[0] › self_attention › query` is "
               "`recording.decoder.layers[0].self_attention.query`."]
    if info.is_encoder_decoder:
        summary.append(decoder_read(steps.rewrite, steps.decoded_with))
        notices += more
    chart = figures.top_tokens_figure(steps.top_next, f"“{last}” (the last token the decoder read)")
    return (figures.trace_table(steps), chart, "\n\n".join(summary),
            status(*notices, *steps.notices) or "Forward pass done.")


# ----------------------------------------------------------------------------------------------
# Teaching views: attention step by step, logit lens, head ablation, sampling
# ----------------------------------------------------------------------------------------------

STEPS_EXAMPLE = "To be, or not to be, that is the question"
SAMPLING_EXAMPLE = "Shall I compare thee to a summer's"


def kind_choices(model_name, current=None):
    """The attention kinds of the picked model for a kind menu (keeping the current one where it exists)."""
    info = catalog.discover_checkpoints().get(model_name) if isinstance(model_name, str) else None
    kinds = attention.kinds_of(bool(info and info.is_encoder_decoder))
    return gr.update(choices=[(attention.ATTENTION_KINDS[k], k) for k in kinds],
                     value=current if current in kinds else kinds[-1])


def clicked(field: str):
    """The handler of a click on a clickable gr.HTML (``teach_html.CLICK_JS``): the clicked item's number."""
    def pick(evt: gr.EventData):
        return int(getattr(evt, field))
    pick.__name__ = f"clicked_{field}"
    return pick


def clicked_head(evt: gr.EventData):
    """A click on a head of the grid: its layer and head, as the layer and head menus hold them."""
    return str(int(evt.layer)), str(int(evt.head))


def teaching_inputs(text, model_name, decoding):
    """(text, info, model, tokenizer, decoding settings, notices) for a teaching view."""
    text, notices = inputs.require_text(text, "some text")
    settings, more = decoding_of(decoding)
    info, model, tokenizer = catalog.resolve(model_name)
    return text, info, model, tokenizer, settings, notices + (more if info.is_encoder_decoder else [])


def worked_example():
    """The notes' Hello World example, computed with the model's own functions (no model needed)."""
    steps, where_wrong = compute_worked_example()
    return where_wrong, teach_html.steps_html(steps)


@guarded(NO_TEXT, NO_TEXT)
def attention_steps(text, model_name, kind, layer, head, query, full_precision, *decoding):
    """One head, one query token: every step of the attention computation with the model's numbers."""
    text, info, model, tokenizer, settings, notices = teaching_inputs(text, model_name, decoding)
    view = steps.attention_steps(model, tokenizer, text, kind, layer, head, query, settings)
    return (teach_html.token_strip_html(view.query_tokens, view.query),
            teach_html.steps_html(view.steps, full=full_precision is True),
            status(f"**{info.name}**, {attention.ATTENTION_KINDS[view.kind]}, layer {view.layer}, head {view.head}, query "
                   f"token {inputs.echo(view.query_tokens[view.query])}: {len(view.steps)} steps; every number the model "
                   f"also computed matches it within {view.max_difference:.1e}. Click a token to follow another query.",
                   *notices, *view.notices))


@guarded(NO_TEXT, NO_TEXT, NO_FIGURE)
def logit_lens(text, model_name, position, *decoding):
    """Top 5 next tokens per layer at one position; the probability of the actual next token everywhere."""
    text, info, model, tokenizer, settings, notices = teaching_inputs(text, model_name, decoding)
    result = lens.logit_lens(model, tokenizer, text, position, settings)
    return (teach_html.token_strip_html(numbered(result.tokens), result.position), teach_html.lens_table_html(result),
            teach_figures.lens_heatmap(result),
            status(f"**{info.name}**: {len(result.rows)} read-outs (the embeddings and {len(result.rows) - 1} layers) of "
                   f"{len(result.tokens)} tokens; the last row is the model's own prediction. Click a token to read after it.",
                   *notices, *result.notices))


@guarded(NO_FIGURE, NO_FIGURE)
def ablate_heads(text, model_name, kind, heads, *decoding):
    """The loss and next-token probabilities with the chosen heads removed, and the same removal's effect on
    the fixed passages beside it (``ablation.loss_change_spread``)."""
    text, info, model, tokenizer, settings, notices = teaching_inputs(text, model_name, decoding)
    result = ablation.ablate_heads(model, tokenizer, text, heads, kind, settings)
    removed = ", ".join(f"L{l}.H{h}" for l, h in result.removed) or "none"
    change = result.loss_after - result.loss_before
    spread = ablation.loss_change_spread(model, tokenizer, heads, kind, settings).line() if result.removed else ""
    return (teach_figures.ablation_figure(result), teach_figures.token_loss_figure(result),
            status(f"**{info.name}**, {attention.ATTENTION_KINDS[result.kind]} heads removed: {removed}. Loss on the text "
                   f"{result.loss_before:.4f} → {result.loss_after:.4f} nats ({change:+.4f}).", spread, *notices,
                   *result.notices))


@guarded(NO_FIGURE)
def rank_heads(text, model_name, kind, *decoding, progress=gr.Progress()):
    """Every head removed alone: the rise in loss, as a layer × head map."""
    text, info, model, tokenizer, settings, notices = teaching_inputs(text, model_name, decoding)
    ranking = ablation.rank_heads(model, tokenizer, text, kind, settings, progress=lambda f, d: progress(f, desc=d))
    top = ", ".join(f"L{l}.H{h} ({teach_figures.signed(v)})" for l, h, v in ranking.order()[:3])
    return teach_figures.ranking_figure(ranking), status(
        f"**{info.name}**: {ranking.increase.size} heads, each removed alone. Costliest: {top}.", *notices, *ranking.notices)


@guarded(NO_FIGURE)
def next_token_distribution(prompt, model_name, temperature, top_k, top_p, repetition_penalty):
    """The next-token distribution after temperature, top-k and top-p, as generate samples from it."""
    text, notices = inputs.require_text(prompt)
    settings = sampling.sampling_settings(temperature, top_k, top_p, repetition_penalty)
    info, model, tokenizer = catalog.resolve(model_name)
    d = sampling.next_token_distribution(model, tokenizer, text, settings)
    first = "the first token of the rewrite" if info.is_encoder_decoder else "the next token"
    return teach_figures.distribution_figure(d), status(
        f"**{info.name}**: {first} is drawn from {d.n_kept:,} of {d.vocab_size:,} tokens "
        f"({d.kept_mass:.1%} of the probability after temperature, renormalised to 100%).", *notices, *d.notices)


# ----------------------------------------------------------------------------------------------
# Layout: one function per tab
# ----------------------------------------------------------------------------------------------

INTRO = """# A Transformer from scratch
The same models, seen from every side: **generate** text, **compare** positional encodings (sinusoidal, learned,
RoPE, ALiBi, none), look at **attention heads**, follow the tensors **through one forward pass**, then take it
apart with the model's own numbers: **attention step by step**, the **logit lens**, **head ablation** and
**sampling**."""

TRACE_HEADERS = ["stack", "step", "shape", "dimensions", "what it is", "where in the model's output"]  # figures.trace_table's columns
GREEDY_LOOPS = ("Sampling with a fixed seed by default: greedy decoding always takes the most likely token, and a small "
                "model's most likely token soon repeats what it just wrote, so greedy output falls into loops.")
CSS = "\n".join([
    # the theme's first font, Source Sans Pro, may arrive as a subset with a few glyphs in its semibold cut: a heading
    # then mixes two fonts ("A" in one, the rest in another); the system's sans-serif has every glyph in every weight
    ":root, .gradio-container {--font: ui-sans-serif, system-ui, sans-serif !important}",
    ".status-line {min-height: 1.5em}",
    ".plot-row {gap: 8px}",
    "#experiment-tables table {display: block; overflow-x: auto; max-width: 100%}",
    "#experiment-tables td, #experiment-tables th {white-space: nowrap; word-break: normal !important}",
    ".model-note {font-size: 0.85em; color: var(--body-text-color-subdued)}",
    "#trace-table [role=gridcell], #trace-table [role=gridcell] *, #trace-table [role=columnheader] * {font-family: var(--font)"
    " !important; font-size: 13px; word-break: normal !important; overflow-wrap: normal !important}",
    *(f"#compare-{e} textarea {{border-left: 5px solid {c}}} #compare-{e} label span {{color: {c}; font-weight: 600}}"
      for e, c in figures.ENCODING_COLOURS.items()),
])


@dataclass
class DecodingControls:
    """The Generate tab's decoding widgets; the other tabs' encoder-decoder views decode with them too."""

    mode: gr.Radio
    temperature: gr.Slider
    top_k: gr.Slider
    top_p: gr.Slider
    repetition_penalty: gr.Slider
    max_new_tokens: gr.Number
    seed: gr.Number

    def all(self) -> list:
        return [self.mode, self.temperature, self.top_k, self.top_p, self.repetition_penalty, self.max_new_tokens, self.seed]


def model_note(name) -> str:
    """The chosen model's line in full, under its menu (a menu shows only the start of a long line)."""
    lines = {value: label for label, value in catalog.menu_choices(catalog.discover_checkpoints(), catalog.read_results())}
    return lines.get(name, "") if isinstance(name, str) else ""


def model_menu(elem_id: str, choices, value) -> gr.Dropdown:
    """A model menu with its chosen model's line written out beneath it."""
    menu = gr.Dropdown(choices=choices, value=value, label="Model", elem_id=elem_id)
    note = gr.Markdown(dict((v, label) for label, v in choices).get(value, ""), elem_id=f"{elem_id}-note",
                       elem_classes="model-note")
    menu.change(model_note, menu, note, api_name=f"{elem_id.replace('-', '_')}_note", api_visibility="private", **UNCHECKED)
    return menu


def rewrites(name) -> bool:
    """Whether the model called ``name`` is an encoder-decoder (folio-to-modern), which rewrites its input."""
    info = catalog.discover_checkpoints().get(name) if isinstance(name, str) else None
    return bool(info and info.is_encoder_decoder)


def generate_labels(name) -> generation.GenerateLabels:
    """The Generate tab's labels for the model called ``name`` (a rewrite for an encoder-decoder)."""
    return generation.GenerateLabels.of(rewrites(name))


def generate_boxes(name):
    """The prompt's and the output's labels and the rewrite note, following the model menu."""
    labels = generate_labels(name)
    return gr.update(label=labels.prompt), gr.update(label=labels.output), gr.update(visible=labels.rewrite_note)


def generate_tab(choices, value) -> tuple[gr.Dropdown, DecodingControls]:
    with gr.Tab("Generate", id="generate"):
        with gr.Row():
            with gr.Column(scale=3):
                labels = generate_labels(value)
                prompt = gr.Textbox(label=labels.prompt, lines=4, value=PROMPT_EXAMPLE, elem_id="gen-prompt")
                with gr.Row():
                    generate_button = gr.Button("Generate", variant="primary", elem_id="gen-button")
                    # small and grey, clickable only while a generation runs (generate_and_stop below)
                    stop_button = gr.Button("Stop", variant="secondary", size="sm", interactive=False, elem_id="gen-stop")
                    folio_button = gr.Button("Folio example", size="sm", elem_id="gen-folio")
                gen_status = gr.Markdown(elem_id="gen-status", elem_classes="status-line")
                output = gr.Textbox(label=labels.output, lines=10, elem_id="gen-output")
                folio_note = gr.Markdown(teaching.FOLIO_REWRITE, visible=labels.rewrite_note, elem_id="gen-folio-note")
            with gr.Column(scale=2):
                menu = model_menu("gen-model", choices, value)
                decoding = DecodingControls(
                    gr.Radio(["Sampling", "Greedy"], value="Sampling", label="Decoding", elem_id="gen-mode"),
                    gr.Slider(0.0, 2.0, value=DEFAULTS.temperature, step=0.05, label="Temperature (0 = greedy)", elem_id="gen-temperature"),
                    gr.Slider(0, 200, value=DEFAULTS.top_k, step=1, label="Top-k (0 = off)", elem_id="gen-top-k"),
                    gr.Slider(0.0, 1.0, value=DEFAULTS.top_p, step=0.01, label="Top-p (1 = off)", elem_id="gen-top-p"),
                    gr.Slider(1.0, 2.0, value=DEFAULTS.repetition_penalty, step=0.05, label="Repetition penalty (1 = off)"),
                    gr.Number(value=DEFAULTS.max_new_tokens, precision=0, minimum=1, maximum=generation.MAX_NEW_TOKENS,
                              label=f"Max new tokens (1–{generation.MAX_NEW_TOKENS})", elem_id="gen-max-new"),
                    gr.Number(value=DEFAULTS.seed, precision=0, minimum=inputs.SEED_RANGE[0], maximum=inputs.SEED_RANGE[1],
                              label=f"Seed (sampling; 0–{inputs.SEED_RANGE[1]:,})", elem_id="gen-seed"),
                )
    request = [prompt, menu, *decoding.all()]
    for trigger, name in ((generate_button.click, "generate"), (prompt.submit, "generate_submit")):
        trigger(lambda: gr.update(interactive=True), None, stop_button, api_name=f"{name}_stop_on", api_visibility="private",
                queue=False)
        trigger(generate, request, [output, gen_status], api_name=name, **INTERACTIVE, **UNCHECKED).then(
            lambda: gr.update(interactive=False), None, stop_button, api_name=f"{name}_stop_off", api_visibility="private")
    menu.change(generate_boxes, menu, [prompt, output, folio_note], api_name="generate_labels", api_visibility="private",
                **UNCHECKED)
    stop_button.click(stop_generation, None, None, api_name="stop_generation")
    folio_button.click(folio_example, None, [prompt, menu, decoding.mode, decoding.repetition_penalty],
                       api_name="folio_example")
    decoding.mode.change(sampling_controls(4), decoding.mode, [decoding.temperature, decoding.top_k, decoding.top_p, decoding.seed],
                         api_name="decoding_mode", api_visibility="private", **UNCHECKED)
    return menu, decoding


def encodings_tab() -> None:
    with gr.Tab("Compare encodings", id="encodings") as tab:
        gr.Markdown("Each encoding at the size of the trained models, in its own colour in every plot. Heatmaps: rows "
                    "are positions, columns are dimensions (RoPE: rotation pairs; ALiBi: heads × distance). Hover for values.")
        plots_status = gr.Markdown(elem_id="enc-status", elem_classes="status-line")
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
                                  info=encodings.length_needs(catalog.discover_checkpoints()), elem_id="own-text")
            with gr.Column(scale=1):
                recompute_button = gr.Button("Recompute on my text", elem_id="recompute-button")
                recompute_status = gr.Markdown(elem_id="recompute-status", elem_classes="status-line")
        gr.Markdown(teaching.EXPERIMENT)
        experiment_status = gr.Markdown(elem_id="experiment-status", elem_classes="status-line")
        position_loss_plot = gr.Plot(label="Loss by position", elem_id="plot-position-loss")
        experiment_tables = gr.Markdown(elem_id="experiment-tables")
        gr.Markdown("### One prompt, five encodings\n" + GREEDY_LOOPS)
        with gr.Row():
            compare_prompt = gr.Textbox(label="Prompt", value=PROMPT_EXAMPLE, scale=4, elem_id="compare-prompt")
            compare_tokens = gr.Number(value=40, precision=0, minimum=1, maximum=COMPARE_MAX_NEW_TOKENS,
                                       label=f"Max new tokens (1–{COMPARE_MAX_NEW_TOKENS})", scale=1)
            compare_mode = gr.Radio(["Sampling", "Greedy"], value="Sampling", label="Decoding", scale=1, elem_id="compare-mode")
            compare_seed = gr.Number(value=0, precision=0, minimum=inputs.SEED_RANGE[0], maximum=inputs.SEED_RANGE[1],
                                     label="Seed", scale=1, elem_id="compare-seed")
            compare_button = gr.Button("Generate with all five", variant="primary", scale=1, elem_id="compare-button")
        compare_status = gr.Markdown(elem_id="compare-status", elem_classes="status-line")
        with gr.Row():
            compare_outputs = [gr.Textbox(label=e, lines=6, elem_id=f"compare-{e}") for e in POSITION_ENCODINGS]
    tab.select(encoding_plots, None, [sinusoidal_plot, learned_plot, rope_plot, alibi_plot, similarity_plot,
                                      extrapolation_plot, plots_status], api_name="encoding_plots", **INTERACTIVE)
    tab.select(encoding_experiment, None, [position_loss_plot, experiment_tables, experiment_status],
               api_name="encoding_experiment", **INTERACTIVE)
    recompute_button.click(recompute_extrapolation, own_text, [extrapolation_plot, recompute_status],
                           api_name="recompute_extrapolation", **EXTRAPOLATION, **UNCHECKED)
    compare_button.click(compare_encodings, [compare_prompt, compare_tokens, compare_mode, compare_seed],
                         [*compare_outputs, compare_status], api_name="compare_encodings", **COMPARISON, **UNCHECKED)
    compare_mode.change(sampling_controls(1), compare_mode, compare_seed, api_name="compare_mode", api_visibility="private",
                        **UNCHECKED)


def attention_tab(choices, value, decoding: DecodingControls) -> gr.Dropdown:
    with gr.Tab("Attention heads", id="attention"):
        with gr.Row():
            text = gr.Textbox(label="Text", value=ATTENTION_EXAMPLE, lines=2, scale=4, elem_id="att-text")
            with gr.Column(scale=2):
                menu = model_menu("att-model", choices, value)
                button = gr.Button("Show attention", variant="primary", elem_id="att-button")
        status_line = gr.Markdown(elem_id="att-status", elem_classes="status-line")
        with gr.Row():
            # menus that accept any value: their choices follow the model
            kind = gr.Dropdown([(attention.ATTENTION_KINDS["self"], "self")], value="self", allow_custom_value=True,
                               label="Attention", elem_id="att-kind")
            layer = gr.Dropdown(["0"], value="0", label="Layer", allow_custom_value=True, elem_id="att-layer")
            head = gr.Dropdown(["average"], value="average", label="Head (or average over heads)", allow_custom_value=True,
                               elem_id="att-head")
        decoder_note = gr.Markdown("For folio-to-modern the decoder reads the model's own rewrite of your text, decoded "
                                   "with the settings of the Generate tab.", visible=rewrites(value), elem_id="att-decoder-note")
        with gr.Accordion("How to read this view", open=False):
            gr.Markdown(teaching.HEADS)
        grid = clickable("att-grid")
        head_plot = gr.Plot(label="One head, enlarged", elem_id="plot-head")
        gr.Markdown("### One token, every head\nClick a token: what it attends to in each head of the layer chosen above.")
        query = gr.Number(value=-1, precision=0, visible=False)
        token_strip = clickable("att-tokens")
        token_status = gr.Markdown(elem_id="att-token-status", elem_classes="status-line")
        token_plot = gr.Plot(label="One token, every head of the layer", elem_id="plot-token")
    request = [text, menu, kind, layer, head, *decoding.all()]
    token_request, token_outputs = [text, menu, kind, layer, query, *decoding.all()], [token_strip, token_plot, token_status]
    everything = [grid, head_plot, kind, layer, head, status_line]
    menu.change(lambda name: gr.update(visible=rewrites(name)), menu, decoder_note, api_name="attention_decoder_note",
                api_visibility="private", **UNCHECKED)
    button.click(show_attention, request, everything, api_name="attention", **INTERACTIVE, **UNCHECKED).then(
        attention_token, token_request, token_outputs, api_name="attention_token", **INTERACTIVE, **UNCHECKED)
    for picker, name in ((layer, "attention_layer"), (head, "attention_head")):
        picker.input(show_head, request, [head_plot, status_line], api_name=name, **INTERACTIVE, **UNCHECKED)
    layer.input(attention_token, token_request, token_outputs, api_name="attention_token_layer", **INTERACTIVE, **UNCHECKED)
    grid.click(clicked_head, None, [layer, head], api_name="attention_pick_head", api_visibility="private").then(
        show_head, request, [head_plot, status_line], api_name="attention_grid_head", **INTERACTIVE, **UNCHECKED)
    token_strip.click(clicked("index"), None, query, api_name="attention_pick_token", api_visibility="private").then(
        attention_token, token_request, token_outputs, api_name="attention_token_query", **INTERACTIVE, **UNCHECKED)
    kind.input(show_attention, request, everything, api_name="attention_kind", **INTERACTIVE, **UNCHECKED).then(
        attention_token, token_request, token_outputs, api_name="attention_token_kind", **INTERACTIVE, **UNCHECKED)
    return menu


def forward_tab(choices, value, decoding: DecodingControls) -> gr.Dropdown:
    with gr.Tab("Inside the forward pass", id="forward"):
        with gr.Row():
            text = gr.Textbox(label="Text", value=PROMPT_EXAMPLE, lines=2, scale=4, elem_id="trace-text")
            with gr.Column(scale=2):
                menu = model_menu("trace-model", choices, value)
                button = gr.Button("Run one forward pass", variant="primary", elem_id="trace-button")
        status_line = gr.Markdown(elem_id="trace-status", elem_classes="status-line")
        summary = gr.Markdown(elem_id="trace-summary")
        top_plot = gr.Plot(label="Next token", elem_id="plot-top")
        table = gr.Dataframe(headers=TRACE_HEADERS, label="Tensor shapes, in the order they were computed", wrap=True,
                             max_height=100_000, column_widths=["8%", "18%", "10%", "20%", "24%", "20%"],
                             elem_id="trace-table", interactive=False)
    button.click(trace_forward, [text, menu, *decoding.all()], [table, top_plot, summary, status_line],
                 api_name="forward_trace", **INTERACTIVE, **UNCHECKED)
    return menu


def clickable(elem_id: str) -> gr.HTML:
    """A gr.HTML whose items (data-layer/data-head, data-index) send click events (``teach_html.CLICK_JS``)."""
    return gr.HTML(elem_id=elem_id, js_on_load=teach_html.CLICK_JS, css_template=teach_html.CSS)


def steps_tab(choices, value, decoding: DecodingControls) -> gr.Dropdown:
    with gr.Tab("Attention, step by step", id="steps") as tab:
        gr.Markdown(teaching.STEPS.split("\n\n")[0])
        with gr.Accordion("Worked example: attention on “Hello World” by hand (no model needed)", open=True) as example_box:
            gr.Markdown(teaching.WORKED_EXAMPLE)
            example_wrong = gr.Markdown(elem_id="example-wrong")
            example_steps = gr.HTML(elem_id="example-steps", css_template=teach_html.CSS)
        with gr.Row():
            text = gr.Textbox(label="Text", value=STEPS_EXAMPLE, lines=2, scale=4, elem_id="steps-text")
            with gr.Column(scale=2):
                menu = model_menu("steps-model", choices, value)
                kind = gr.Dropdown([(attention.ATTENTION_KINDS["self"], "self")], value="self", allow_custom_value=True,
                                   label="Attention", elem_id="steps-kind")
        with gr.Row():
            layer = gr.Number(value=0, precision=0, label="Layer (−1: last)", elem_id="steps-layer", min_width=100)
            head = gr.Number(value=0, precision=0, label="Head", elem_id="steps-head", min_width=100)
            query = gr.Number(value=-1, precision=0, label="Query token (−1: last)", elem_id="steps-query", min_width=100)
            full = gr.Checkbox(label="Every digit (float32)", value=False, elem_id="steps-full")
            button = gr.Button("Show the steps", variant="primary", elem_id="steps-button")
        strip = clickable("steps-tokens")
        status_line = gr.Markdown(elem_id="steps-status", elem_classes="status-line")
        body = gr.HTML(elem_id="steps-body", css_template=teach_html.CSS)
        with gr.Accordion("The concepts behind these steps", open=False):
            gr.Markdown("\n\n".join(teaching.CONCEPTS))
    request, outputs = [text, menu, kind, layer, head, query, full, *decoding.all()], [strip, body, status_line]
    tab.select(worked_example, None, [example_wrong, example_steps], api_name="worked_example")
    menu.change(kind_choices, [menu, kind], kind, api_name="steps_kinds", api_visibility="private", **UNCHECKED)
    gr.on([button.click, full.input], attention_steps, request, outputs, api_name="attention_steps", **INTERACTIVE, **UNCHECKED)
    button.click(lambda: gr.Accordion(open=False), None, example_box, api_name="steps_fold_example", api_visibility="private")
    strip.click(clicked("index"), None, query, api_name="steps_pick_query", api_visibility="private").then(
        attention_steps, request, outputs, api_name="attention_steps_query", **INTERACTIVE, **UNCHECKED)
    return menu


def lens_tab(choices, value, decoding: DecodingControls) -> gr.Dropdown:
    with gr.Tab("Logit lens", id="lens"):
        gr.Markdown(teaching.LENS)
        with gr.Row():
            text = gr.Textbox(label="Text", value=PROMPT_EXAMPLE, lines=2, scale=4, elem_id="lens-text")
            with gr.Column(scale=2):
                menu = model_menu("lens-model", choices, value)
                position = gr.Number(value=-1, precision=0, label="Position (−1: last)", elem_id="lens-position")
                button = gr.Button("Read every layer", variant="primary", elem_id="lens-button")
        strip = clickable("lens-tokens")
        status_line = gr.Markdown(elem_id="lens-status", elem_classes="status-line")
        table = gr.HTML(elem_id="lens-table", css_template=teach_html.CSS)
        plot = gr.Plot(label="Probability of the actual next token", elem_id="plot-lens")
    request, outputs = [text, menu, position, *decoding.all()], [strip, table, plot, status_line]
    button.click(logit_lens, request, outputs, api_name="logit_lens", **INTERACTIVE, **UNCHECKED)
    strip.click(clicked("index"), None, position, api_name="lens_pick_position", api_visibility="private").then(
        logit_lens, request, outputs, api_name="logit_lens_position", **INTERACTIVE, **UNCHECKED)
    return menu


def ablation_tab(choices, value, decoding: DecodingControls) -> gr.Dropdown:
    with gr.Tab("Head ablation", id="ablation"):
        gr.Markdown(teaching.ABLATION)
        with gr.Row():
            text = gr.Textbox(label="Text", value=ablation.DEFAULT_TEXT, lines=2, scale=4, elem_id="ablation-text")
            with gr.Column(scale=2):
                menu = model_menu("ablation-model", choices, value)
                kind = gr.Dropdown([(attention.ATTENTION_KINDS["self"], "self")], value="self", allow_custom_value=True,
                                   label="Attention", elem_id="ablation-kind")
        with gr.Row():
            heads = gr.Textbox(label="Heads to remove: layer.head, or a layer number for all its heads", value=ablation.DEFAULT_HEADS,
                               scale=3, elem_id="ablation-heads")
            button = gr.Button("Remove these heads", variant="primary", elem_id="ablation-button")
            rank_button = gr.Button("Rank every head", elem_id="rank-button")
        status_line = gr.Markdown(elem_id="ablation-status", elem_classes="status-line")
        with gr.Row():  # side by side when there is room for both, one above the other on narrow pages
            next_plot = gr.Plot(label="Next token", elem_id="plot-ablation", min_width=480)
            loss_plot = gr.Plot(label="Loss per token", elem_id="plot-token-loss", min_width=480)
        rank_plot = gr.Plot(label="Every head, removed alone", elem_id="plot-rank")
    menu.change(kind_choices, [menu, kind], kind, api_name="ablation_kinds", api_visibility="private", **UNCHECKED)
    button.click(ablate_heads, [text, menu, kind, heads, *decoding.all()], [next_plot, loss_plot, status_line],
                 api_name="ablate_heads", **INTERACTIVE, **UNCHECKED)
    rank_button.click(rank_heads, [text, menu, kind, *decoding.all()], [rank_plot, status_line], api_name="rank_heads",
                      **INTERACTIVE, **UNCHECKED)
    # the status line speaks of one request: the plots of the other kind of request are cleared, not left stale
    button.click(lambda: NO_FIGURE, None, rank_plot, api_name="ablation_clear_rank", api_visibility="private")
    rank_button.click(lambda: (NO_FIGURE, NO_FIGURE), None, [next_plot, loss_plot], api_name="ablation_clear_removal",
                      api_visibility="private")
    return menu


def sampling_tab(choices, value) -> gr.Dropdown:
    with gr.Tab("Sampling, seen", id="sampling"):
        gr.Markdown(teaching.SAMPLING)
        with gr.Row():
            with gr.Column(scale=3, min_width=520):
                prompt = gr.Textbox(label="Prompt", value=SAMPLING_EXAMPLE, lines=2, elem_id="sampling-prompt")
                plot = gr.Plot(label="Next-token distribution", elem_id="plot-sampling")
                status_line = gr.Markdown(elem_id="sampling-status", elem_classes="status-line")
            with gr.Column(scale=2):
                menu = model_menu("sampling-model", choices, value)
                controls = [
                    gr.Slider(0.05, sampling.MAX_TEMPERATURE, value=1.0, step=0.05, label="Temperature", elem_id="sampling-temperature"),
                    gr.Slider(0, 200, value=0, step=1, label="Top-k (0 = off)", elem_id="sampling-top-k"),
                    gr.Slider(0.01, 1.0, value=1.0, step=0.01, label="Top-p (1 = off)", elem_id="sampling-top-p"),
                    gr.Slider(0.5, 2.0, value=1.0, step=0.05, label="Repetition penalty (1 = off)", elem_id="sampling-penalty"),
                ]
                button = gr.Button("Show the distribution", variant="primary", elem_id="sampling-button")
    gr.on([button.click, prompt.submit, *(control.input for control in controls)], next_token_distribution,
          [prompt, menu, *controls], [plot, status_line], api_name="next_token_distribution", trigger_mode="always_last",
          **INTERACTIVE, **UNCHECKED)
    return menu


def build_demo() -> gr.Blocks:
    choices, value, note = menus_now()
    with gr.Blocks(title="Transformer from scratch") as demo:
        gr.Markdown(INTRO)
        catalog_status = gr.Markdown(note, elem_id="catalog-status")
        with gr.Tabs(overflow_behavior="wrap"):  # eight tabs: on a narrow page they wrap, none hides behind a menu
            generate_menu, decoding = generate_tab(choices, value)
            encodings_tab()
            menus = [generate_menu, attention_tab(choices, value, decoding), forward_tab(choices, value, decoding),
                     steps_tab(choices, value, decoding), lens_tab(choices, value, decoding),
                     ablation_tab(choices, value, decoding), sampling_tab(choices, value)]
        demo.load(catalog_event(len(menus)), None, [*menus, catalog_status], api_name="catalog")
    demo.queue(default_concurrency_limit=4)
    return demo


demo = build_demo()
# launch() options: no upload component, so no uploads (0 bytes); Gradio's own errors (e.g. too few
# arguments in an API call) reach the client with their message
LAUNCH_OPTIONS = dict(css=CSS, max_file_size=0, show_error=True)


def launch(**overrides):
    """``demo.launch`` with the app's options (tests and ``python app.py`` both start it this way)."""
    return demo.launch(**{**LAUNCH_OPTIONS, **overrides})


def warm_up(threads: int = 1) -> None:
    """Load every usable checkpoint right after launch, so the first request does not wait for it.

    One torch thread per request (requests run side by side, two at a time): on a shared 2-core machine two
    OpenMP threads per forward pass wait on each other; measured here, a 128-token forward pass took 0.47 s
    with 2 threads and 0.03 s with 1, and generation ran at 8 against 61 tokens/s."""
    try:
        import torch

        torch.set_num_threads(threads)
        found, main = catalog.discover_checkpoints(), catalog.read_results().main_model
        for info in sorted(found.values(), key=lambda info: info.name != main):  # the default model first
            if info.usable:
                catalog.load_model(info)
        figures.heatmap_figure([[0.0]], "", "", "").to_json()  # plotly imports its validators on first use: not in a request
        figures.extrapolation_figure({"": {1: 1.0}}, {}).to_json()
    except Exception:  # noqa: BLE001 - a request will show the problem
        logger.exception("warm-up failed")


if __name__ == "__main__":
    launch(prevent_thread_lock=True)
    warm_up(int(os.environ.get("SCRATCH_TORCH_THREADS", "1")))
    demo.block_thread()
