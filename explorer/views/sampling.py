"""Sampling, seen: the next-token distribution exactly as ``generate`` samples from it.

For the last position of the prompt the model gives logits z (one per vocabulary entry). ``generate``
with ``do_sample=True`` then applies, in this order (``GenerationMixin._get_logits_processor``):

    repetition penalty   z_i <- z_i / r if z_i > 0 else z_i * r, for tokens already in the prompt
    temperature          z_i <- z_i / T
    top-k                keep the k largest z_i, set the others to -inf
    top-p (nucleus)      keep the most likely tokens whose probabilities (after top-k) first reach p
    softmax              p_i = exp(z_i) / sum_j exp(z_j): the distribution the next token is drawn from

The processors here are transformers' own (``RepetitionPenaltyLogitsProcessor``, ``TemperatureLogitsWarper``,
``TopKLogitsWarper``, ``TopPLogitsWarper``), so the numbers are the ones ``generate`` samples from.
"""

from dataclasses import dataclass, field, replace

import numpy as np
import torch

from explorer.generation.decoding import MAX_TEMPERATURE, DecodingSettings, all_processors, encode_prompt, first_line
from explorer.core.inputs import InputProblem, echo, number, whole_number
from explorer.generation.labels import token_labels

MAX_REPETITION_PENALTY = 10.0
MAX_TOP_K = 100_000
SHOWN_TOKENS = 20  # candidates drawn in the figure


def sampling_settings(temperature, top_k, top_p, repetition_penalty=1.0) -> DecodingSettings:
    """Sampling settings from what a client sent, checked strictly (this view shows exactly what was asked):
    temperature in (0, 5]; top-k a whole number, 0 = off; top-p in (0, 1], 1 = off; repetition penalty in
    (0, 10], 1 = off. InputProblem says what was wrong and what is allowed."""
    temperature = number(temperature, "Temperature", f"above 0, at most {MAX_TEMPERATURE:g}; 1 leaves the model's distribution")
    if not 0 < temperature <= MAX_TEMPERATURE:
        raise InputProblem(f"Temperature must be above 0 and at most {MAX_TEMPERATURE:g} (1 leaves the model's "
                           f"distribution as it is); got {echo(temperature)}.")
    top_k = whole_number(top_k, "Top-k (0 = off)", 0, MAX_TOP_K)
    top_p = number(top_p, "Top-p", "above 0, at most 1; 1 = off")
    if not 0 < top_p <= 1:
        raise InputProblem(f"Top-p must be above 0 and at most 1 (1 = off); got {echo(top_p)}.")
    penalty = number(repetition_penalty, "Repetition penalty", f"above 0, at most {MAX_REPETITION_PENALTY:g}; 1 = off")
    if not 0 < penalty <= MAX_REPETITION_PENALTY:
        raise InputProblem(f"Repetition penalty must be above 0 and at most {MAX_REPETITION_PENALTY:g} (1 = off); "
                           f"got {echo(penalty)}.")
    return DecodingSettings(True, temperature=temperature, top_k=top_k, top_p=top_p, repetition_penalty=penalty)


@dataclass
class NextTokenDistribution:
    """The distribution of the token after the prompt. Arrays over the ``SHOWN_TOKENS`` most likely candidates
    (after penalty and temperature), most likely first; ``logits`` and ``processed`` cover the vocabulary."""

    settings: DecodingSettings
    ids: np.ndarray
    labels: list[str]
    model_probs: np.ndarray  # softmax(z): the model's own distribution (T = 1, nothing cut)
    tempered_probs: np.ndarray  # softmax after repetition penalty and temperature, before any cut
    kept: np.ndarray  # bool: survives top-k and top-p
    final_probs: np.ndarray  # renormalised over the kept tokens: what generate samples from
    n_kept: int  # over the whole vocabulary
    kept_mass: float  # tempered probability mass of the kept tokens (1 when nothing is cut)
    cumulative: np.ndarray  # (vocab,): the tempered probabilities summed in order, most likely first
    vocab_size: int
    prompt_tokens: int
    logits: torch.Tensor = field(repr=False)  # (vocab,) float32, as generate reads them
    processed: torch.Tensor = field(repr=False)  # (vocab,) after all processors; -inf where cut
    notices: list[str] = field(default_factory=list)


def prompt_ids(model, tokenizer, text: str) -> tuple[dict, list[str]]:
    """Model inputs whose last position predicts the next token: the prompt (decoder-only), or the source
    with the decoder start token (encoder-decoder: the first token of the rewrite of the text's first line)."""
    first = []
    if model.config.is_encoder_decoder:
        text, first = first_line(text)
    ids, _, notices = encode_prompt(model, tokenizer, text, 1)
    notices = first + notices
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if model.config.is_encoder_decoder:
        inputs["decoder_input_ids"] = torch.tensor([[model.config.decoder_start_token_id]])
    return inputs, notices


def next_token_distribution(model, tokenizer, text: str, settings: DecodingSettings,
                            shown: int = SHOWN_TOKENS) -> NextTokenDistribution:
    """One forward pass; the last position's logits through ``sampling_processors``. The LM head runs on the
    last position only (``logits_to_keep=1``), as in ``generate``: the logits are bit for bit the ones it reads."""
    inputs, notices = prompt_ids(model, tokenizer, text)
    with torch.inference_mode():
        logits = model(**inputs, use_cache=False, logits_to_keep=1).logits[:, -1, :].to(dtype=torch.float32)
        context = inputs.get("decoder_input_ids", inputs["input_ids"])  # what the repetition penalty looks at
        tempered = all_processors(replace(settings, top_k=0, top_p=1.0))(context, logits.clone())
        processed = all_processors(settings)(context, logits.clone())
    model_probs, tempered_probs = logits.softmax(-1)[0], tempered.softmax(-1)[0]
    final_probs = processed.softmax(-1)[0]
    kept_all = torch.isfinite(processed[0])
    order = tempered_probs.argsort(descending=True)[:shown]
    return NextTokenDistribution(
        settings=settings, ids=order.numpy(), labels=token_labels(tokenizer, order),
        model_probs=model_probs[order].numpy(), tempered_probs=tempered_probs[order].numpy(),
        kept=kept_all[order].numpy(), final_probs=final_probs[order].numpy(), n_kept=int(kept_all.sum()),
        kept_mass=float(tempered_probs[kept_all].sum()),
        cumulative=tempered_probs.sort(descending=True).values.cumsum(0).numpy(), vocab_size=int(logits.shape[-1]),
        prompt_tokens=int(inputs["input_ids"].shape[1]), logits=logits[0], processed=processed[0], notices=notices,
    )
