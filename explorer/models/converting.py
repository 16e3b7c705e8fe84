"""A planned folder read as our Transformer: ``from_pretrained`` of the class the config's ``model_type`` names (never
one the repo names), behind ``catalog.LOAD_LOCK`` (transformers' loading is not thread-safe), pickled weights only
with ``weights_only=True``; then converted (``modeling.convert.from_transformers``) and its parity measured:
``gap = max |logits_ours - logits_transformers|`` on ``PARITY_IDS``, beside the logits' size
(``explorer.core.parity.Parity``).
"""

import zipfile
from pathlib import Path

import torch

from modeling import ScratchTransformerForCausalLM
from modeling import convert

from explorer.models import catalog
from explorer.models.plans import (VOCAB_AND_MERGES_CLASSES, Plan, check_shard_index, config_object, model_class,
                                   require_parameters)
from explorer.models.tokenizer_file import check_tokenizer_file, read_vocab_and_merges
from explorer.core.inputs import InputProblem, echo, error_text
from explorer.core.parity import Parity

PARITY_IDS = (torch.arange(1, 33) * 7919)  # a fixed input (taken modulo the vocabulary) for the parity figure
# The attention every loaded model runs, named at loading, never taken from the config: a repo's "kernels-community/..."
# would fetch and run code from the Hub wherever the kernels package is installed, and flex_attention fails on the CPU.
ATTENTION = "sdpa"


def load_tokenizer(folder: Path, where: str = "The model", model_type: str | None = None):
    """The folder's tokenizer (tokenizer.json and its config: data, no code), once ``check_tokenizer_file`` finds that
    reading a text with it takes bounded time; a tokenizer.json the tokenizers library cannot read is refused by name.
    Without tokenizer.json, a family that saved vocab.json and merges.txt (GPT-2) is read from those."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    if model_type in VOCAB_AND_MERGES_CLASSES and not (folder / "tokenizer.json").exists():
        return read_vocab_and_merges(folder, model_type, where)
    check_tokenizer_file(folder / "tokenizer.json", where)
    try:
        return AutoTokenizer.from_pretrained(folder, trust_remote_code=False)
    except Exception:  # noqa: BLE001 - a tokenizer_config naming a class we do not have: the tokenizer file alone
        pass
    try:
        return PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"))
    except Exception as error:  # noqa: BLE001 - malformed JSON, or JSON that is not a tokenizer
        raise InputProblem(f"{where}'s tokenizer.json is not a tokenizer the tokenizers library can read "
                           f"({error_text(error)}): give the tokenizer.json save_pretrained wrote.") from None


def require_fits(tokenizer, vocab_size: int, where: str = "The model"):
    """``tokenizer``, if every token of its vocabulary has a row in the model's embedding (ids 0 .. vocab_size − 1);
    else an InputProblem naming the tokens beyond: a tokenizer saved with other weights. A model may have more rows
    than its tokenizer has tokens (Pythia's 50,304 for 50,277: rows padded for speed). A token added on top of the
    vocabulary (a special token a tokenizer class adds by default, as Qwen2's ``<|endoftext|>``) may lie beyond: only a
    text that contains it cannot be read, and ``explorer.generation.model_ids`` refuses that text naming the token. The vocabulary's size is read
    from the tokenizer, not counted (its ids are 0 .. size − 1): a million-token vocabulary is not copied to check it."""
    beyond = tokenizer.vocab_size - vocab_size
    if beyond > 0:
        ids = list(range(vocab_size, vocab_size + min(beyond, 3)))
        tokens = tokenizer.convert_ids_to_tokens(ids)
        examples = ", ".join(f"{echo(str(token), 40)} (id {i})" for i, token in zip(ids, tokens))
        raise InputProblem(f"{where}'s tokenizer does not fit its weights: it has {beyond:,} token(s) with ids the "
                           f"model has no embedding row for, such as {examples}, while the model reads ids 0 to "
                           f"{vocab_size - 1:,} (vocab_size {vocab_size:,}). Give the tokenizer saved with these "
                           "weights (or resize the embedding to the tokenizer, resize_token_embeddings, and save both).")
    return tokenizer


def require_stored_records(path: Path, where: str) -> None:
    """A pickled checkpoint as torch.save writes it: a zip whose records are stored, not compressed. transformers maps
    it from disk, which a compressed record cannot be (it failed as "Trying to resize storage that is not
    resizable"); read whole, a few MB of compressed zeros would become gigabytes, past every bound the file's size set."""
    if not zipfile.is_zipfile(path):
        return  # the legacy format, or not a zip at all: the loader says what it is
    with zipfile.ZipFile(path) as archive:
        if any(record.compress_type != zipfile.ZIP_STORED for record in archive.infolist()):
            raise InputProblem(f"{where}'s {path.name} holds compressed records (it was zipped again after torch.save); "
                               "this app reads the file torch.save writes, mapped from disk: save the weights again with "
                               "torch.save, or as safetensors.")


def load_folder(folder: Path, plan_: Plan, where: str):
    """(our model in eval mode, the parity or None, tokenizer) from a folder holding ``plan_``'s files.

    The tokenizer is read first and must fit the weights (``require_fits``). ``from_pretrained`` runs behind
    ``catalog.LOAD_LOCK``; the class is named, never looked up from the repo, and so are the attention (``ATTENTION``)
    and the generation config (``ids_only_decoding``)."""
    config = config_object(plan_.config)
    tokenizer = require_fits(load_tokenizer(folder, where, plan_.model_type), config.vocab_size, where)
    for name in plan_.files:
        if name.endswith(".bin"):
            require_stored_records(folder / name, where)
        if name.endswith(".index.json"):  # read here whatever the source: a folder's index is a stranger's too
            check_shard_index((folder / name).read_bytes(), name, plan_.files, where)
    cls = model_class(config)
    try:
        with catalog.LOAD_LOCK:
            loaded, info = cls.from_pretrained(folder, config=config, dtype=torch.float32, weights_only=True,
                                               use_safetensors=plan_.weights_format == "safetensors",
                                               trust_remote_code=False, output_loading_info=True,
                                               generation_config=ids_only_decoding(config), attn_implementation=ATTENTION,
                                               ignore_mismatched_sizes=True)  # reported in info (misfit), not raised
    except Exception as error:  # noqa: BLE001 - a damaged file, or a pickle holding more than tensors
        if "weights_only" in str(error) or "Unpickl" in type(error).__name__:
            raise InputProblem(f"{where} cannot be opened: its pickled weights hold more than tensors (code, or objects "
                               "of other kinds), and this app reads pickles only with weights_only=True.") from None
        raise InputProblem(f"{where} cannot be opened: the weights do not load ({error_text(error)}).") from None
    misfit(info, where)
    loaded.eval()
    require_parameters(loaded.num_parameters(), where)
    require_finite(loaded, where)
    positions = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None) or 32
    ids = (PARITY_IDS % config.vocab_size)[None, : min(len(PARITY_IDS), positions)]
    with torch.inference_mode():
        theirs = finite_logits(loaded, ids, where)
    if isinstance(loaded, ScratchTransformerForCausalLM):
        ours, parity = loaded, None
    else:
        try:
            ours = convert.from_transformers(loaded).eval()
        except ValueError as error:
            raise InputProblem(f"{where} cannot be converted to our Transformer: {error}.") from None
        with torch.inference_mode():
            parity = Parity.between(ours(ids).logits, theirs)
        del loaded
    return ours.requires_grad_(False), parity, tokenizer


def _listed(names: list[str], what: str) -> str:
    """The first of ``names`` with ``what`` said of it, and how many more there are."""
    more = f" (and {len(names) - 1} more)" if len(names) > 1 else ""
    return f"{echo(names[0], 90)} {what}{more}"


def misfit(info: dict, where: str) -> None:
    """Refuse weights that do not fit the config (``from_pretrained``'s loading info), naming a tensor of each kind:
    one the config's model has and the file lacks, one stored at another shape (file's shape, then the config's)."""
    missing = sorted(info.get("missing_keys") or ())
    mismatched = sorted(info.get("mismatched_keys") or (), key=lambda entry: entry[0])
    said = []
    if mismatched:
        _, stored, wanted = mismatched[0]
        said.append(_listed([entry[0] for entry in mismatched],
                            f"is stored as {' × '.join(map(str, stored))} where the config makes it "
                            f"{' × '.join(map(str, wanted))}"))
    if missing:
        said.append(_listed(missing, "is not in the weights"))
    if said:
        raise InputProblem(f"{where}'s weights do not fit its config.json: {'; '.join(said)}. The config and the weights "
                           "must come from one save_pretrained.")


def require_finite(model, where: str) -> None:
    """Refuse weights holding NaN or infinite numbers: every logit they reach is NaN, in every view. A tensor is finite
    where its least and greatest are (``aminmax`` carries a NaN through; one pass, no mask: 27 ms for GPT-2 small)."""
    bad = [name for name, tensor in model.state_dict().items() if tensor.is_floating_point() and tensor.numel()
           and not all(bool(torch.isfinite(end)) for end in torch.aminmax(tensor))]
    if bad:
        raise InputProblem(f"{where}'s weights hold numbers that are not finite (NaN or infinity): "
                           f"{_listed(bad, 'holds some')}. Every logit they reach would be NaN; this app opens weights "
                           "of finite numbers.")


def finite_logits(model, ids: torch.Tensor, where: str) -> torch.Tensor:
    """The model's logits for ``ids`` (the parity input), refused where any is NaN or infinite: finite weights can
    still overflow float32 on the way (a product past 3.4e38), and every view would then read NaN."""
    logits = model(ids).logits
    if not bool(torch.isfinite(logits).all()):
        whose = "" if isinstance(model, ScratchTransformerForCausalLM) else ", in transformers' own model too"
        raise InputProblem(f"{where}'s logits are not finite (NaN or infinity) on a plain text of {ids.shape[1]} "
                           f"tokens{whose}: its weights overflow float32 on the way. This app opens models whose "
                           "outputs are numbers.")
    return logits


def ids_only_decoding(config):
    """The generation config a loaded model gets: its config's ids alone (bos, eos, pad:
    ``GenerationConfig.from_model_config``), never the folder's generation_config.json (the plans do not fetch one,
    but a folder may hold one). The app decodes with the visitor's settings alone, so a stranger's file (a watermark,
    suppressed tokens, a minimum length, 64 sequences, a beam search that fetches code) never changes what greedy
    means nor fails the loading."""
    from transformers import GenerationConfig

    return GenerationConfig.from_model_config(config)
