"""A user's text as the token ids a model reads: every id a row of its embedding (and a column of its logits).

A tokenizer may hold tokens added on top of its vocabulary whose ids lie beyond the model's rows (a special token a
tokenizer class adds by default; ``explorer.models.converting.require_fits`` lets them through, since only a text that
contains one cannot be read). A text containing one is refused here, naming the token, before the model sees it.
"""

import torch

from explorer.core.inputs import InputProblem, echo

SHOWN_BEYOND = 3  # tokens beyond the embedding a message names


def require_rows(ids, tokenizer, vocab_size: int, what: str) -> None:
    """Nothing, if every id in ``ids`` is below ``vocab_size``; else an InputProblem naming (up to SHOWN_BEYOND of) the
    tokens beyond: ``what`` (say "The prompt") contains tokens added to the tokenizer that the model has no row for."""
    ids = torch.as_tensor(ids).flatten()
    beyond = ids[ids >= vocab_size].unique().tolist()
    if not beyond:
        return
    named = ", ".join(f"{echo(str(tokenizer.convert_ids_to_tokens(i)), 40)} (id {i})" for i in beyond[:SHOWN_BEYOND])
    more = f" and {len(beyond) - SHOWN_BEYOND} more" if len(beyond) > SHOWN_BEYOND else ""
    tokens, them = ("a token", "it") if len(beyond) == 1 else ("tokens", "them")
    raise InputProblem(f"{what} contains {named}{more}: {tokens} added to this model's tokenizer on top of its "
                       f"vocabulary, which the model has no embedding row for: it reads ids 0 to {vocab_size - 1:,}. "
                       f"Leave {them} out.")


def model_ids(tokenizer, text: str, vocab_size: int, what: str, special_tokens: bool = True) -> torch.Tensor:
    """(1, T) ids of ``text`` as the tokenizer reads it (with its special tokens, such as Llama's start token, unless
    ``special_tokens`` is False), every one of them a row of the model's embedding (``require_rows``)."""
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=special_tokens).input_ids
    require_rows(ids, tokenizer, vocab_size, what)
    return ids
