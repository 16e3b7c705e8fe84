"""The Head ablation tab: chosen heads removed, with the loss and the next-token probabilities before and after;
or every head removed alone, ranked by how much the loss rises."""

import time

import gradio as gr

from explorer.core.machine import Deadline, OverBudget
from explorer.views import ablation, ablation_estimate, attention
from explorer.views.first_order import agreement
from explorer.present import ablation as present, figures

from ui.controls import DecodingControls, decoder_read, view_inputs
from ui.events import EXACT, INTERACTIVE, NO_FIGURE, UNCHECKED, guarded, status
from ui.menus import kind_choices, kind_menu, text_and_model
from ui.tab import TabParts


@guarded(next_plot=NO_FIGURE, loss_plot=NO_FIGURE)
def ablate_heads(text, model_name, kind, heads, *decoding):
    """The loss and next-token probabilities with the chosen heads removed, and the same removal's effect on
    the fixed passages beside it (``ablation.loss_change_spread``)."""
    text, info, model, tokenizer, settings, notices = view_inputs(text, model_name, decoding)
    result = ablation.ablate_heads(model, tokenizer, text, heads, kind, settings)
    removed = ", ".join(f"L{l}.H{h}" for l, h in result.removed) or "none"
    change = result.loss_after - result.loss_before
    spread = ablation.loss_change_spread(model, tokenizer, heads, kind, settings).line() if result.removed else ""
    scored = "the model's own rewrite of the text (the decoder's input)" if info.is_encoder_decoder else "the text"
    read = decoder_read(result.rewrite, result.decoded_with) if info.is_encoder_decoder else ""
    return (present.ablation_figure(result), present.token_loss_figure(result),
            status(f"**{info.name}**, {attention.ATTENTION_KINDS[result.kind].label} heads removed: {removed}. Loss on "
                   f"{scored} {result.loss_before:.4f} → {result.loss_after:.4f} nats ({change:+.4f}).", read, spread,
                   *notices, *result.notices))


@guarded(rank_plot=NO_FIGURE, estimate_plot=NO_FIGURE)
def rank_heads(text, model_name, kind, *decoding, progress=gr.Progress()):
    """Every head's cost to first order at once (shown first), then every head removed alone: the rise in loss, as
    a layer × head map beside the estimate's, the estimate's disagreement marked."""
    text, info, model, tokenizer, settings, notices = view_inputs(text, model_name, decoding)
    started = time.perf_counter()
    estimate = ablation_estimate.estimate_head_ranking(model, tokenizer, text, kind, settings)
    estimated = time.perf_counter() - started
    yield NO_FIGURE, present.estimate_ranking_figure(estimate), status(
        f"**{info.name}**: every head's cost estimated to first order in {estimated:.2f} s (one backward pass). "
        "Removing each head alone is running; the exact map appears beside the estimate when it finishes.")
    started = time.perf_counter()
    deadline = Deadline("Removing each head alone", "shorten the text (each removal runs over all of it)")
    try:
        ranking = ablation.rank_heads(model, tokenizer, text, kind, settings,
                                      progress=deadline.watching(lambda f, d: progress(f, desc=d)))
    except OverBudget as stopped:
        yield NO_FIGURE, present.estimate_ranking_figure(estimate), status(f"**{info.name}**: ⚠️ {stopped}", *notices)
        return
    seconds = time.perf_counter() - started
    agreed = agreement(estimate.increase, ranking.increase)
    top = ", ".join(f"L{l}.H{h} ({figures.signed(v)})" for l, h, v in ranking.order()[:3])
    read = decoder_read(ranking.rewrite, ranking.decoded_with) if info.is_encoder_decoder else ""
    yield present.ranking_figure(ranking), present.estimate_ranking_figure(estimate, agreed, ranking), status(
        f"**{info.name}**: {ranking.increase.size} heads, each removed alone, in {seconds:.1f} s (the estimate: "
        f"{estimated:.2f} s). Costliest: {top}.", f"Estimate against exact: {agreed.line()}.",
        present.estimate_verdict(agreed), read, *notices, *ranking.notices)


def tab(choices, value, decoding: DecodingControls) -> TabParts:
    """The tab; its model menu."""
    with gr.Tab("Head ablation", id="ablation"):
        gr.Markdown(present.ABLATION)
        with gr.Accordion("Rank every head: the estimate first, and what it misses", open=False):
            gr.Markdown(present.ESTIMATE)
        with text_and_model("ablation", ablation.DEFAULT_TEXT, choices, value) as (text, menu):
            kind = kind_menu("ablation-kind")
        with gr.Row():
            heads = gr.Textbox(label="Heads to remove: layer.head, or a layer number for all its heads", value=ablation.DEFAULT_HEADS,
                               scale=3, elem_id="ablation-heads")
            button = gr.Button("Remove these heads", variant="primary", elem_id="ablation-button")
            rank_button = gr.Button("Rank every head", elem_id="rank-button")
        status_line = gr.Markdown(elem_id="ablation-status", elem_classes="status-line")
        # side by side when there is room for both, one above the other on narrow pages; a row with no figure yet
        # collapses (style.CSS), so the page shows no empty boxes before a result
        with gr.Row(elem_classes="results-row"):
            next_plot = gr.Plot(label="Next token", elem_id="plot-ablation", min_width=present.FIGURE_MIN_WIDTH)
            loss_plot = gr.Plot(label="Loss per token", elem_id="plot-token-loss", min_width=present.FIGURE_MIN_WIDTH)
        with gr.Row(elem_classes="results-row"):  # the estimate first, the exact ranking beside it when it finishes
            estimate_plot = gr.Plot(label="Every head's cost, estimated to first order", elem_id="plot-rank-estimate",
                                    min_width=present.FIGURE_MIN_WIDTH)
            rank_plot = gr.Plot(label="Every head, removed alone", elem_id="plot-rank", min_width=present.FIGURE_MIN_WIDTH)
    menu.change(kind_choices, [menu, kind], kind, api_name="ablation_kinds", api_visibility="private", **UNCHECKED)
    button.click(ablate_heads, [text, menu, kind, heads, *decoding.all()], [next_plot, loss_plot, status_line],
                 api_name="ablate_heads", **INTERACTIVE, **UNCHECKED)
    rank_button.click(rank_heads, [text, menu, kind, *decoding.all()], [rank_plot, estimate_plot, status_line], api_name="rank_heads",
                      **EXACT, **UNCHECKED)
    # the status line speaks of one request: the plots of the other kind of request are cleared, not left stale
    button.click(lambda: (NO_FIGURE, NO_FIGURE), None, [rank_plot, estimate_plot], api_name="ablation_clear_rank",
                 api_visibility="private")
    rank_button.click(lambda: (NO_FIGURE, NO_FIGURE), None, [next_plot, loss_plot], api_name="ablation_clear_removal",
                      api_visibility="private")
    return TabParts(menus=(menu,))
