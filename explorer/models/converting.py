"""A planned folder read as our Transformer: ``from_pretrained`` of the class the config's ``model_type`` names (never
one the repo names), behind ``catalog.LOAD_LOCK`` (transformers' loading is not thread-safe), pickled weights only
with ``weights_only=True``; then converted (``modeling.convert.from_transformers``) and its parity measured:
``parity = max |logits_ours - logits_transformers|`` on ``PARITY_IDS``.
"""

from pathlib import Path

import torch

from modeling import ScratchTransformerForCausalLM
from modeling import convert

from explorer.models import catalog
from explorer.models.plans import Plan, config_object, model_class
from explorer.core.inputs import InputProblem, echo, error_text

PARITY_IDS = (torch.arange(1, 33) * 7919)  # a fixed input (taken modulo the vocabulary) for the parity figure


def load_tokenizer(folder: Path, where: str = "The model"):
    """The folder's tokenizer (tokenizer.json and its config: data, no code); a tokenizer.json the tokenizers library
    cannot read is refused by name."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    try:
        return AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
    except Exception:  # noqa: BLE001 - a tokenizer_config naming a class we do not have: the tokenizer file alone
        pass
    try:
        return PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))
    except Exception as error:  # noqa: BLE001 - malformed JSON, or JSON that is not a tokenizer
        raise InputProblem(f"{where}'s tokenizer.json is not a tokenizer the tokenizers library can read "
                           f"({echo(error_text(error), 200)}): give the tokenizer.json save_pretrained wrote.") from None


def load_folder(folder: Path, plan_: Plan, where: str):
    """(our model in eval mode, the parity or None, tokenizer) from a folder holding ``plan_``'s files.

    ``from_pretrained`` runs behind ``catalog.LOAD_LOCK``; the class is named, never looked up from the repo."""
    config = config_object(plan_.config)
    cls = model_class(config)
    try:
        with catalog.LOAD_LOCK:
            loaded, info = cls.from_pretrained(folder, config=config, dtype=torch.float32, weights_only=True,
                                               use_safetensors=plan_.weights_format == "safetensors",
                                               trust_remote_code=False, output_loading_info=True)
    except Exception as error:  # noqa: BLE001 - a damaged file, or a pickle holding more than tensors
        if "weights_only" in str(error) or "Unpickl" in type(error).__name__:
            raise InputProblem(f"{where} cannot be opened: its pickled weights hold more than tensors (code, or objects "
                               "of other kinds), and this app reads pickles only with weights_only=True.") from None
        raise InputProblem(f"{where} cannot be opened: the weights do not load ({error_text(error)}).") from None
    wrong = {k: v for k, v in info.items() if v and k in ("missing_keys", "mismatched_keys")}
    if wrong:
        raise InputProblem(f"{where}'s weights do not fit its config: {echo(str(wrong), 300)}.")
    loaded.eval()
    if isinstance(loaded, ScratchTransformerForCausalLM):
        ours, parity = loaded, None
    else:
        try:
            ours = convert.from_transformers(loaded).eval()
        except ValueError as error:
            raise InputProblem(f"{where} cannot be converted to our Transformer: {error}.") from None
        ids = (PARITY_IDS % config.vocab_size)[None, : min(len(PARITY_IDS), ours.config.max_position_embeddings or 32)]
        with torch.inference_mode():
            parity = (ours(ids).logits - loaded(ids).logits).abs().max().item()
        del loaded
    return ours.requires_grad_(False), parity, load_tokenizer(folder, where)
