"""What one forward pass reads: the token ids of a text (and, for an encoder-decoder, the decoder's input:
the model's own rewrite, decoded as the user chose), and the one check of a token a user types.
"""

from dataclasses import dataclass, field, replace

import torch

from explorer.generation.decoding import DecodingSettings, encode_prompt, first_line, generate_ids
from explorer.core.inputs import InputProblem, echo
from explorer.generation.labels import labelled, token_labels, typed
from explorer.generation.model_ids import model_ids, require_rows

FORWARD_MAX_TOKENS = 256  # tokens of the user's text one view reads


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False).input_ids


def one_token(tokenizer, value, what: str, vocab_size: int) -> tuple[int, list[str]]:
    """(the id of ``value``, notices): the one check of every answer or target a user types. ``value`` must be
    exactly one token: the one the app labels so (``labelled``: '␣the', '‹CR›', ⟨c3⟩, a word-internal piece too),
    else the one the tokenizer reads the text as (``typed``: '␣' a space); else
    an InputProblem saying how it reads, with the leading-space hint where the spaced form is one token, or the
    first token to type instead; a token added to the tokenizer beyond the model's ``vocab_size`` rows
    (``require_rows``) is refused. Taken without a leading space where the spaced form is another single token (the
    one a word after a space is: "Juliet" and "␣Juliet" are two tokens), it is kept, with a notice saying so."""
    if not isinstance(value, str) or value == "":
        raise InputProblem(f"Type {what.lower()}: one token of the model's vocabulary, such as ` the` (with its "
                           "leading space) or `,`.")
    text = typed(value)
    found = labelled(tokenizer, value)
    ids = [found] if found is not None else _ids(tokenizer, text)
    require_rows(ids, tokenizer, vocab_size, what)
    spaced_found = None if text.startswith(" ") else labelled(tokenizer, " " + value)
    spaced = [] if text.startswith(" ") else [spaced_found] if spaced_found is not None else _ids(tokenizer, " " + text)
    if len(ids) == 1:
        if len(spaced) != 1 or spaced[0] == ids[0]:
            return ids[0], []
        return ids[0], [f"{what} {echo(value)} (id {ids[0]}) has no leading space, so it is another token than "
                        f"{echo('␣' + text)} (id {spaced[0]}), the one a word after a space is. Kept as typed; if "
                        f"you meant the word after a space, type it with its space: {echo(' ' + text)}."]
    labels = token_labels(tokenizer, ids[:8])
    pieces = " ".join(echo(label) for label in labels) + (" …" if len(ids) > 8 else "")
    word = one_token_word(tokenizer, text)
    if word is not None:
        hint = f" It is {len(text.split())} words: type one, such as {echo(word)} (one token)."
    elif len(spaced) == 1:
        hint = f" With a leading space, {echo(' ' + text)} is one token (a word after a space is): type that."
    elif ids:
        hint = f" Type one of them, such as the first, {echo(labels[0])}."
    else:
        hint = ""
    raise InputProblem(f"{what} must be exactly one token of this model's tokenizer; {echo(value)} is {len(ids)} "
                       f"tokens: {pieces}.{hint}")


def one_token_word(tokenizer, text: str) -> str | None:
    """The first word of a text of several words that is one token, with its leading space (the form a word after a
    space takes) or else bare; None for one word, or where no word is one token."""
    words = text.split()
    if len(words) < 2:
        return None
    for word in words:
        for form in (" " + word, word):
            if len(_ids(tokenizer, form)) == 1:
                return form
    return None


def numbered(labels: list[str]) -> list[str]:
    """'3:the': labels made unique by their position, so repeated tokens get rows of their own."""
    return [f"{i}:{label}" for i, label in enumerate(labels)]


@dataclass
class ForwardInputs:
    """Keyword arguments for ``model(**inputs)``, what the decoder read (encoder-decoder only) and notices."""

    inputs: dict[str, torch.Tensor]
    decoded_with: str = ""  # how the decoder's input was produced, e.g. "greedy, repetition penalty 1.1"
    rewrite: str = ""  # the decoder's input as text
    notices: list[str] = field(default_factory=list)

    @property
    def source_ids(self) -> torch.Tensor:
        return self.inputs["input_ids"][0]

    @property
    def target_ids(self) -> torch.Tensor:
        """The ids the decoder (of either kind of model) reads."""
        return self.inputs.get("decoder_input_ids", self.inputs["input_ids"])[0]


def forward_inputs(model, tokenizer, text: str, decoding: DecodingSettings, max_tokens: int = FORWARD_MAX_TOKENS) -> ForwardInputs:
    """Inputs for one forward pass over ``text``. A decoder-only model reads the first ``max_tokens`` tokens
    (and no more than a learned table has rows). An encoder-decoder reads the text as its source, as the
    Generate tab would, and its decoder reads the model's own rewrite, generated with ``decoding`` (so
    cross-attention shows what it attends to while writing what the user would see), without the final
    end-of-text token: the last position's prediction is then the model's decision to stop. It reads one line,
    as it was trained and as the Generate tab feeds it: the first line of a passage (``first_line``)."""
    if model.config.is_encoder_decoder:
        line, first = first_line(text)
        ids, max_new, notices = encode_prompt(model, tokenizer, line, min(decoding.max_new_tokens, max_tokens))
        notices = first + notices
        target = generate_ids(model, ids, replace(decoding, max_new_tokens=max_new))
        eos = model.generation_config.eos_token_id
        if target.shape[1] > 1 and int(target[0, -1]) in (eos if isinstance(eos, list) else [eos]):  # the decoder reads up to its last word; it then predicts the end
            target = target[:, :-1]
        rewrite = tokenizer.decode(target[0], skip_special_tokens=True)
        return ForwardInputs({"input_ids": ids, "decoder_input_ids": target}, decoding.describe(), rewrite, notices)
    notices = []
    ids = model_ids(tokenizer, text, model.config.vocab_size, "The text")
    budget = min(max_tokens, model.config.position_limit or max_tokens)
    if ids.shape[1] > budget:
        notices.append(f"The text is {ids.shape[1]} tokens; showing its first {budget}.")
        ids = ids[:, :budget]
    return ForwardInputs({"input_ids": ids}, notices=notices)
