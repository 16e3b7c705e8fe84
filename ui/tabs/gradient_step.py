"""The One gradient step tab: the loss −log p(target | tokens 0..position), the gradient norm of every parameter
tensor and of every head, and one plain SGD step on a copy of the model: the target's probability and the top
next tokens before and after (``explorer.learning.gradient_step``)."""

import gradio as gr

from explorer.models import registry
from explorer.present import gradient_step as present
from explorer.present.figures import percent
from explorer.learning.gradient_step import MAX_LEARNING_RATE, gradient_step as take_step
from explorer.generation.decoding import token_count
from explorer.core.inputs import InputProblem, echo
from explorer.generation.labels import token_labels

from ui.controls import DecodingControls
from ui.events import INTERACTIVE, KEPT, NO_FIGURE, UNCHECKED, guarded, say_doing, status
from ui.menus import decoder_only, model_menu
from ui.tab import TabParts

EXAMPLE_TEXT, EXAMPLE_TARGET, EXAMPLE_RATE = "Shall I compare thee to a summer's", " day", 0.001
NO_JSON = None
CONTEXT_SHOWN = 6  # tokens of the text before the target the status line quotes


@guarded(before_after=NO_FIGURE, heads=NO_FIGURE, tensors=NO_FIGURE, numbers=NO_JSON)
def gradient_step(text, model_name, position, target, learning_rate):
    """One SGD step θ ← θ − lr·∇θ(−log p(target | tokens 0..position)) on a copy of the model: the figures
    before and after, the gradient norms drawn per layer and per head, and the numbers as JSON."""
    info, model, tokenizer = registry.resolve(model_name)
    say_doing(f"One forward and backward pass of {info.name}, then one SGD step on a copy of it")
    step = take_step(text, model, tokenizer, position, target, learning_rate)
    shown = step.tokens[-CONTEXT_SHOWN:]
    context = ("…" if len(step.tokens) > len(shown) else "") + "".join(shown)
    read = (f"the last {len(shown)} of {len(step.tokens)} tokens read" if len(step.tokens) > len(shown)
            else token_count(len(step.tokens)))
    line = (f"**{info.name}**, after {echo(context, 60)} ({read}), target "
            f"{echo(step.target)} (id {step.target_id}), learning rate {step.learning_rate:g}: loss "
            f"{step.loss_before:.4f} → {step.loss_after:.4f} nats, p(target) {percent(step.p_before)} → "
            f"{percent(step.p_after)}. ‖∇L‖ = {step.grad_norm:.4g}: the first-order prediction lr·‖∇L‖² is a "
            f"change of {signed(step.predicted_loss_change)} nats; measured {signed(step.loss_change)}.")
    notes = [verdict(step), *step.notices]
    if step.induction_head:
        layer, head, score = step.induction_head
        notes.append(f"L{layer}.H{head} is this model's induction head (score {score:.2f} on the probe of random "
                     "tokens read twice): its cell is outlined in the head maps.")
    notes.append(present.parameters_text(step))
    return (present.before_after_figure(step), present.head_norms_figure(step),
            present.parameter_norms_figure(step), step.to_json(), status(line, *notes))


def example_target(model_name, target, shown):
    """The example target as the model picked reads it: ' day' where that is one token, else its first token ('␣'
    on a model of one byte a token, which is what follows "summer's" there too; 'd' on one of symbols), where the box
    still holds the target the tab put there last (``shown``); a target the learner typed stays."""
    if target != shown:
        return KEPT, KEPT
    try:
        _, _, tokenizer = registry.resolve(model_name)
    except InputProblem:
        return KEPT, KEPT  # the button says what is wrong with the name
    ids = tokenizer(EXAMPLE_TARGET, add_special_tokens=False).input_ids
    fitted = EXAMPLE_TARGET if len(ids) == 1 else token_labels(tokenizer, ids[:1])[0]
    return fitted, fitted


def signed(change: float) -> str:
    """A change with its sign, in enough digits to tell it from zero (never "-0.0000")."""
    if change == 0:
        return "0"
    return f"{change:+.4f}" if abs(change) >= 5e-5 else f"{change:+.2e}"


def verdict(step) -> str:
    """What the step did to the loss, in words."""
    if step.loss_after == step.loss_before:
        return ("The step is too small to change anything: the loss is the same to the last bit of float32. "
                "Try a larger learning rate.")
    if step.loss_after < step.loss_before:
        return "The loss fell."
    return "The loss rose: the step overshot. Try a smaller learning rate."


def tab(choices, value, decoding: DecodingControls | None) -> TabParts:
    """The tab; its model menu, of the decoder-only models."""
    decoders, value = decoder_only(choices, value)
    with gr.Tab("One gradient step", id="gradient-step"):
        with gr.Row():
            with gr.Column(scale=3):
                text = gr.Textbox(label="Text", value=EXAMPLE_TEXT, lines=2, elem_id="grad-text")
                with gr.Row():
                    position = gr.Number(value=-1, precision=0, label="Position (−1: last token)", elem_id="grad-position")
                    target = gr.Textbox(label="Target: the next token (one token; mind its leading space)",
                                        value=EXAMPLE_TARGET, elem_id="grad-target")
                    rate = gr.Number(value=EXAMPLE_RATE, label=f"Learning rate (above 0, at most {MAX_LEARNING_RATE:g})",
                                     elem_id="grad-rate")
            with gr.Column(scale=2):
                menu = model_menu("grad-model", decoders, value)
                button = gr.Button("Take one step", variant="primary", elem_id="grad-button")
        status_line = gr.Markdown(elem_id="grad-status", elem_classes="status-line")
        with gr.Row():
            with gr.Column(scale=3):
                before_after = gr.Plot(label="Before and after the step", elem_id="plot-grad-tokens")
            with gr.Column(scale=2):
                gr.Markdown(present.GRADIENT_STEP, elem_id="grad-teaching")
        heads = gr.Plot(label="Per head", elem_id="plot-grad-heads")
        tensors = gr.Plot(label="Per tensor", elem_id="plot-grad-tensors")
        numbers = gr.JSON(label="The numbers (loss_before, loss_after, p_before, p_after, grad_norms, …)",
                          open=False, max_height=320, elem_id="grad-json")
        shown = gr.State(EXAMPLE_TARGET)  # the target the tab put in the box last (inside the tab: the page's
        # tab bar counts every child of the tabs as a tab)
    request, outputs = [text, menu, position, target, rate], [before_after, heads, tensors, numbers, status_line]
    button.click(gradient_step, request, outputs, api_name="gradient_step", **INTERACTIVE, **UNCHECKED)
    menu.change(example_target, [menu, target, shown], [target, shown], api_name="grad_example_target",
                api_visibility="private", show_progress="hidden", **UNCHECKED)
    return TabParts(decoder_only=(menu,))
