"""The Compare encodings tab: the five position encodings drawn from the checkpoints' configs, the
extrapolation experiment as evaluated (and recomputed on the user's own text), and one prompt continued by
each encoding's model."""

import gradio as gr

from explorer.models import catalog, registry
from explorer.views import encodings, experiment
from explorer.present import encodings as present
from explorer.generation import decoding
from explorer.core import inputs
from explorer.core.inputs import InputProblem
from modeling import POSITION_ENCODINGS

from ui.controls import DEFAULTS, PROMPT_EXAMPLE, DecodingControls, sampling_controls
from ui.events import COMPARISON, EXTRAPOLATION, INTERACTIVE, NO_FIGURE, NO_TEXT, UNCHECKED, guarded, status
from ui.tab import TabParts

COMPARE_MAX_NEW_TOKENS = 256  # per model in "one prompt, five encodings": five generations in one request
GREEDY_LOOPS = ("Sampling with a fixed seed by default: greedy decoding always takes the most likely token, and a small "
                "model's most likely token soon repeats what it just wrote, so greedy output falls into loops.")

# the settings every model samples with here (the Generate tab's defaults; its controls do not reach this tab)
COMPARED_WITH = (f"Every model samples at temperature {DEFAULTS.temperature:g}, top-k {DEFAULTS.top_k}, top-p "
                 f"{DEFAULTS.top_p:g} and repetition penalty {DEFAULTS.repetition_penalty:g}, the Generate tab's "
                 "defaults, with the seed below: the same settings for all five.")


@guarded(sinusoidal_plot=NO_FIGURE, learned_plot=NO_FIGURE, rope_plot=NO_FIGURE, alibi_plot=NO_FIGURE,
         similarity_plot=NO_FIGURE, extrapolation_plot=NO_FIGURE)
def encoding_plots():
    """The encoding heatmaps, similarity against distance, and the evaluation's extrapolation curves."""
    found = catalog.discover_checkpoints()
    shown, notices = present.encoding_figures(encodings.encoding_tables(found))
    results, family = catalog.read_results(), catalog.encoding_family(found)
    curves = {name: results.extrapolation[name] for name in family.encodings if name in results.extrapolation}
    extrapolation = present.extrapolation_figure(curves, family.encodings, family.context)
    if results.notice:
        notices.append(results.notice)
    return (shown["sinusoidal"], shown["learned"], shown["rope"], shown["alibi"], shown["similarity"],
            extrapolation, status(*notices) or "Encodings computed from the checkpoints' configs.")


@guarded(position_loss_plot=NO_FIGURE, experiment_tables=NO_TEXT)
def encoding_experiment():
    """The experiment as evaluated: loss at each position of long windows (the shipped seed of each encoding),
    and the tables over every seed, with the published ratios beside ours."""
    found = catalog.discover_checkpoints()
    results, family = catalog.read_results(), catalog.encoding_family(found)
    curves = {name: results.position_loss[name] for name in family.encodings if name in results.position_loss}
    figure = present.position_loss_figure(curves, family.encodings, family.context)
    configs = [found[name].config for name in family.encodings]
    tables = experiment.experiment_markdown(results.experiment, results.published, configs[0] if configs else None)
    return figure, tables, status(results.notice or "Figures from results.json, as `python -m training.evaluate` wrote them.")


@guarded(extrapolation_plot=NO_FIGURE)
def recompute_extrapolation(text):
    """bits/char against context length of the encoding models on the user's own text, drawn as it is
    computed; leaving the page stops it (gradio closes the generator at its next step)."""
    text, notices = inputs.require_text(text, "some text to score")
    found = catalog.discover_checkpoints()
    family = catalog.encoding_family(found)
    if not family.models:
        raise InputProblem("No usable decoder-only checkpoints to score with.")
    title = f"Extrapolation on your text ({len(text):,} characters)"
    for state in encodings.recompute_extrapolation(found, text):
        figure = present.extrapolation_figure(state.curves, state.encodings, family.context, title)
        progress = (f"Scored {state.done} of {state.total}" + ("." if state.finished else "…")
                    + f" Context lengths {', '.join(map(str, state.lengths))} tokens.")
        yield figure, status(progress, *notices, *state.notices)


@guarded(**dict.fromkeys(POSITION_ENCODINGS, NO_TEXT))  # one box per encoding, in POSITION_ENCODINGS' order
def compare_encodings(prompt, max_new_tokens, mode="Sampling", seed=0):
    """One prompt continued by each encoding model with the same settings; each box fills as its model finishes."""
    text, notices = inputs.require_text(prompt)
    settings, more = decoding.sanitize_decoding(mode, DEFAULTS.temperature, DEFAULTS.top_k, DEFAULTS.top_p,
                                                  DEFAULTS.repetition_penalty, max_new_tokens, seed, COMPARE_MAX_NEW_TOKENS)
    notices += more
    family = catalog.encoding_models(catalog.discover_checkpoints())
    outputs = {encoding: "(no usable checkpoint with this encoding yet)" for encoding in POSITION_ENCODINGS}
    for encoding, name in family.items():
        outputs[encoding] = "…"
        yield (*outputs.values(), status(f"Generating with {name}…", *notices))
        info, model, tokenizer = registry.resolve(name)
        continuation, cut = decoding.generate_text(model, tokenizer, text, settings)
        outputs[encoding] = text + continuation
        notices += [f"{name}: {c}" for c in cut]
    yield (*outputs.values(), status(f"Done: {len(family)} models, {settings.max_new_tokens} new tokens each, "
                                     f"{settings.describe()}.", *notices))


def tab(choices, value, decoding: DecodingControls | None) -> TabParts:
    """The tab (no model menu: it shows every encoding's model)."""
    with gr.Tab("Compare encodings", id="encodings") as panel:
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
        gr.Markdown(present.EXPERIMENT)
        experiment_status = gr.Markdown(elem_id="experiment-status", elem_classes="status-line")
        position_loss_plot = gr.Plot(label="Loss by position", elem_id="plot-position-loss")
        experiment_tables = gr.Markdown(elem_id="experiment-tables")
        gr.Markdown("### One prompt, five encodings\n" + GREEDY_LOOPS + " " + COMPARED_WITH, elem_id="compare-teaching")
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
    panel.select(encoding_plots, None, [sinusoidal_plot, learned_plot, rope_plot, alibi_plot, similarity_plot,
                                      extrapolation_plot, plots_status], api_name="encoding_plots", **INTERACTIVE)
    panel.select(encoding_experiment, None, [position_loss_plot, experiment_tables, experiment_status],
               api_name="encoding_experiment", **INTERACTIVE)
    recompute_button.click(recompute_extrapolation, own_text, [extrapolation_plot, recompute_status],
                           api_name="recompute_extrapolation", **EXTRAPOLATION, **UNCHECKED)
    compare_button.click(compare_encodings, [compare_prompt, compare_tokens, compare_mode, compare_seed],
                         [*compare_outputs, compare_status], api_name="compare_encodings", **COMPARISON, **UNCHECKED)
    compare_mode.change(sampling_controls(1), compare_mode, compare_seed, api_name="compare_mode", api_visibility="private",
                        **UNCHECKED)
    return TabParts()
