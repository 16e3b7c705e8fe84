"""Head ablation: switch heads off and see what the model loses.

Removing head h of a layer multiplies its output o_h = softmax(q k^T / sqrt(d_head) + bias) v by 0 before the
heads are concatenated, so its slice of Concat(o_1, ..., o_H) W_O is zero and nothing of it reaches the
residual stream. The ablated pass is a new recording of the text's run with that edit at the heads'
``modeling.Site`` (``modeling.ablate_heads``: 1 keeps a head bit for bit, 0 removes it); the full model's numbers
are the run's own. Nothing here touches the model.

The loss is the mean next-token cross-entropy over the text, in nats: -1/(T-1) sum_t log p(x_{t+1} | x_0..x_t)
(for the encoder-decoder: over its own rewrite of the text, the decoder tokens).
"""

import re
from dataclasses import dataclass, field

import numpy as np
import torch

from modeling import ablate_heads as head_edits
from modeling import record

from explorer.generation.decoding import DecodingSettings
from explorer.core.inputs import InputProblem, echo, kind_of
from explorer.core.machine import CORES, side_by_side
from explorer.views.architecture import describe
from explorer.views.forward_pass import AttentionKind, RecordedPass, attention_kind, recorded_pass
from explorer.generation.labels import token_labels
from explorer.generation.tokens import FORWARD_MAX_TOKENS
from explorer.views.vocabulary import next_token_log_probs

SHOWN_TOKENS = 10

# The view's default: removing DEFAULT_HEADS, or any single head, changes the loss on DEFAULT_TEXT by about the
# median of what it does on the SPREAD_PASSAGES (lines of the held-out test plays), which the view shows beside it.
DEFAULT_TEXT = "We are such stuff as dreams are made on, and our little life is rounded with a sleep."
DEFAULT_HEADS = "0.0, 1.2"
SPREAD_PASSAGES = (
    "Tomorrow, and tomorrow, and tomorrow, creeps in this petty pace from day to day, to the last syllable of recorded time",
    "Friends, Romans, countrymen, lend me your ears; I come to bury Caesar, not to praise him.",
    "If music be the food of love, play on; give me excess of it, that, surfeiting, the appetite may sicken, and so die.",
    "Full fathom five thy father lies; of his bones are coral made; those are pearls that were his eyes",
    "Fair is foul, and foul is fair: hover through the fog and filthy air.",
)


def parse_heads(spec, n_layers: int, n_heads: int) -> list[tuple[int, int]]:
    """'0.3, 2.5' (layer.head) or '4' (every head of layer 4), separated by commas or spaces; '' is none."""
    allowed = (f"heads as layer.head (layer 0–{n_layers - 1}, head 0–{n_heads - 1}) or a layer number alone for all "
               f"its heads, separated by commas, e.g. '0.3, 2.5' or '4'")
    if spec is None:
        return []
    if not isinstance(spec, str):
        raise InputProblem(f"Heads to remove: {allowed}; got {kind_of(spec)}.")
    heads = []
    for item in filter(None, re.split(r"[,\s]+", spec.strip())):
        match = re.fullmatch(r"(\d+)(?:\.(\d+))?", item)
        if not match:
            raise InputProblem(f"Heads to remove: {allowed}; could not read {echo(item, 20)}.")
        layer = int(match.group(1))
        if layer >= n_layers:
            raise InputProblem(f"Heads to remove: {allowed}; layer {layer} does not exist.")
        if match.group(2) is None:
            heads += [(layer, h) for h in range(n_heads)]
            continue
        head = int(match.group(2))
        if head >= n_heads:
            raise InputProblem(f"Heads to remove: {allowed}; head {head} of layer {layer} does not exist.")
        heads.append((layer, head))
    return sorted(set(heads))


def token_losses(run: RecordedPass, logits: torch.Tensor) -> torch.Tensor:
    """(T-1,): -log p(token t+1 | tokens 0..t) of the tokens the decoder read, from logits (T, vocab)."""
    return torch.nn.functional.cross_entropy(logits[:-1], run.read.target_ids[1:], reduction="none")


def ablated_pass(run: RecordedPass, attention: AttentionKind, removed: list[tuple[int, int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits (T, vocab), per-token loss (T-1,)) of the run's inputs with the ``removed`` (layer, head) heads of
    ``attention`` removed. The recording keeps the attention weights, so attention runs the explicit softmax, as in the run:
    removing nothing gives the run's logits exactly."""
    config = run.config
    edits = head_edits(attention.stack, attention.part, removed, attention.n_layers(config), config.n_heads)
    with torch.inference_mode(), record(keep=lambda s: s.name == "weights", edits=edits):
        logits = run.model(**run.read.inputs, use_cache=False).logits[0].float()
    return logits, token_losses(run, logits)


@dataclass
class Ablation:
    kind: str
    removed: list[tuple[int, int]]
    tokens: list[str]  # the tokens scored (decoder tokens for an encoder-decoder model)
    loss_before: float
    loss_after: float
    token_loss_before: np.ndarray  # (T-1,): -log p(token t+1) before and after
    token_loss_after: np.ndarray
    next_labels: list[str]  # the most likely next tokens after the text, before or after
    next_before: np.ndarray
    next_after: np.ndarray
    logits_after: torch.Tensor = field(repr=False)
    notices: list[str] = field(default_factory=list)
    rewrite: str = ""  # encoder-decoder: the text of the tokens scored, its own rewrite; how it was decoded
    decoded_with: str = ""


def prepare(model, tokenizer, text: str, kind: str, decoding: DecodingSettings, max_tokens: int = FORWARD_MAX_TOKENS
            ) -> tuple[AttentionKind, RecordedPass, torch.Tensor]:
    """(the attention kind, the text's recorded run, the full model's per-token loss from it); the text must give at
    least two tokens to score."""
    attention = attention_kind(model, kind)
    run = recorded_pass(model, tokenizer, text, decoding, max_tokens)
    if run.read.target_ids.shape[0] < 2:
        raise InputProblem("The loss needs at least two tokens (one to read, one to predict): type a longer text.")
    return attention, run, run.cached("token losses", lambda: token_losses(run, run.logits))


def ablate_heads(model, tokenizer, text: str, heads, kind: str = "self",
                 decoding: DecodingSettings = DecodingSettings(False)) -> Ablation:
    """The text's loss and the next-token probabilities with the given heads removed, against the full model.
    An encoder-decoder is scored on its own rewrite of the text, decoded with ``decoding``."""
    attention, run, losses_before = prepare(model, tokenizer, text, kind, decoding)
    notices = list(run.read.notices)
    removed = parse_heads(heads, attention.n_layers(model.config), model.config.n_heads)
    logits_before = run.logits
    logits_after, losses_after = ablated_pass(run, attention, removed) if removed else (logits_before, losses_before)
    p_before, p_after = logits_before[-1].softmax(-1), logits_after[-1].softmax(-1)
    shown = torch.cat([p_before.topk(SHOWN_TOKENS).indices, p_after.topk(SHOWN_TOKENS).indices]).unique()
    shown = shown[p_before[shown].argsort(descending=True)]
    notices += sharing_notes(model) if removed else ["No head removed: the model is unchanged (nothing to compare)."]
    return Ablation(
        kind=attention.name, removed=removed, tokens=token_labels(tokenizer, run.read.target_ids),
        loss_before=float(losses_before.mean()), loss_after=float(losses_after.mean()),
        token_loss_before=losses_before.numpy(), token_loss_after=losses_after.numpy(),
        next_labels=token_labels(tokenizer, shown), next_before=p_before[shown].numpy(), next_after=p_after[shown].numpy(),
        logits_after=logits_after, notices=notices, rewrite=run.read.rewrite, decoded_with=run.read.decoded_with,
    )


@dataclass
class HeadRanking:
    kind: str
    loss: float  # the full model's loss on the text
    increase: np.ndarray  # (layers, heads): loss with that head alone removed, minus ``loss``
    notices: list[str] = field(default_factory=list)
    rewrite: str = ""  # encoder-decoder: the text of the tokens scored, its own rewrite; how it was decoded
    decoded_with: str = ""

    def order(self) -> list[tuple[int, int, float]]:
        """(layer, head, increase), the head whose removal costs most first."""
        flat = [(l, h, float(self.increase[l, h])) for l in range(self.increase.shape[0]) for h in range(self.increase.shape[1])]
        return sorted(flat, key=lambda item: -item[2])


def _keep_nothing(site) -> bool:
    return False


def losses_without_each_head(run: RecordedPass, attention: AttentionKind, layer: int) -> list[float]:
    """The mean loss with each head of ``layer`` removed alone: one batch row per head (row h times 0 at head h),
    run from that layer on (``forward_from``: the residual stream entering it is the run's own, recorded; the layers
    below a removed head compute what the run already holds), then every row's next-token log-probabilities at
    once, the vocabulary a chunk at a time (``vocabulary.next_token_log_probs``: never the batch's (rows, T, vocab)
    logits)."""
    n_heads = run.config.n_heads
    keep = 1 - torch.eye(n_heads)  # row h: every head but h

    def remove(value: torch.Tensor) -> torch.Tensor:  # (n_heads rows, H, T, d_head)
        return value * keep.to(value.dtype)[:, :, None, None]

    hidden = run.recording[attention.stack, layer, None, "input"].expand(n_heads, -1, -1)
    memory = run.recording.get("encoder", None, None, "output")
    head = run.model.get_output_embeddings()
    with torch.inference_mode(), record(keep=_keep_nothing, edits={attention.site(layer, "heads"): remove}):
        out = run.model.model.forward_from(layer, hidden, encoder_hidden_states=memory).last_hidden_state
        log_probs = next_token_log_probs(out[:, :-1], head, run.read.target_ids[1:])
        return (-log_probs.mean(-1)).tolist()


def rank_heads(model, tokenizer, text: str, kind: str = "self", decoding: DecodingSettings = DecodingSettings(False),
               progress=None, workers: int = CORES) -> HeadRanking:
    """Every head removed alone: how much the loss on the text rises.

    A decoder's heads (``losses_without_each_head``): one batch per layer, run from that layer on. An encoder's
    (whose change reaches the whole decoder through its memory): one full pass per head (``ablated_pass``). The
    batches are independent, so ``workers`` threads run them side by side: torch releases the GIL inside its
    kernels, and the app runs one torch thread per request, so ``CORES`` workers use the machine's cores.
    ``progress(fraction, description)`` is called as they finish (the fraction of the work, the first layers' costing
    the most): an error it raises stops the layers not started."""
    attention, run, losses = prepare(model, tokenizer, text, kind, decoding)
    n_layers, n_heads = attention.n_layers(model.config), model.config.n_heads
    base = float(losses.mean())

    def layer_losses(layer: int) -> list[float]:
        if attention.stack == "decoder":
            return losses_without_each_head(run, attention, layer)
        return [float(ablated_pass(run, attention, [(layer, head)])[1].mean()) for head in range(n_heads)]

    increase = np.zeros((n_layers, n_heads))
    # each layer's work: a decoder's runs from that layer on (the first layers' cost the most), an encoder's whole
    costs = np.array([n_layers - layer if attention.stack == "decoder" else 1 for layer in range(n_layers)])
    with side_by_side(layer_losses, list(range(n_layers)), workers) as results:
        for done, (layer, layer_loss) in enumerate(zip(range(n_layers), results), 1):
            increase[layer] = np.array(layer_loss) - base
            if progress is not None:
                progress(costs[:done].sum() / costs.sum(),
                         f"{done * n_heads} of {n_layers * n_heads} heads removed, one at a time")
    return HeadRanking(attention.name, base, increase, [*run.read.notices, *sharing_notes(model)], run.read.rewrite,
                       run.read.decoded_with)


def sharing_notes(model) -> list[str]:
    """What removing a query head removes where query heads share key/value heads; none where each has its own."""
    arch = describe(model)
    if not arch.grouped:
        return []
    return [f"In this model {arch.kv_sharing()}. Removing a query head zeroes its own output only: the key/value head "
            "it reads stays, serving the other query heads of its group."]


@dataclass
class Spread:
    """The change in loss (after - before, nats) that removing the same heads makes on each fixed passage."""

    changes: np.ndarray  # one per passage, in the order of ``passages``
    passages: tuple[str, ...]

    def line(self) -> str:
        """'On 5 other passages removing these heads changes the loss by -0.001 to +0.080 (median +0.016).'"""
        low, middle, high = (float(f(self.changes)) for f in (np.min, np.median, np.max))
        return (f"On {len(self.changes)} other passages (lines of the held-out test plays) removing these heads changes "
                f"the loss by {low:+.3f} to {high:+.3f} nats (median {middle:+.3f}).")


def loss_change_spread(model, tokenizer, heads, kind: str = "self", decoding: DecodingSettings = DecodingSettings(False),
                       passages: tuple[str, ...] = SPREAD_PASSAGES) -> Spread:
    """``ablate_heads`` on each passage: how much removing ``heads`` changes the loss on other texts."""
    changes = []
    for passage in passages:
        result = ablate_heads(model, tokenizer, passage, heads, kind, decoding)
        changes.append(result.loss_after - result.loss_before)
    return Spread(np.array(changes), tuple(passages))
