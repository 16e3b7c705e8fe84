"""What may be opened, checked before a weight is read or fetched: the model families (those ``modeling.convert``
converts, and ours), the limits in force (parameters, weight bytes, memory of the models held; each set by an
environment variable), and the ``Plan`` of a folder or of a repo's file listing: the files to read, the weights'
format and bytes, the config, its parameters.

Nothing a repository holds ever runs: a config's ``auto_map`` (a repo's pointer to its own code) is dropped before any
class is chosen; the class is transformers' own for the config's ``model_type`` (or ours for ``scratch_transformer``).
Safetensors are preferred over pickled weights. Parameters are counted from the config on the meta device (no memory).
"""

import json
import os
from dataclasses import dataclass

import torch

from modeling import ScratchTransformerConfig, ScratchTransformerForCausalLM
from modeling import convert

from explorer.core.inputs import InputProblem, echo, error_text

MAX_PARAMETERS_ENV, MAX_PARAMETERS = "SCRATCH_HUB_MAX_PARAMETERS", 200_000_000
MAX_BYTES_ENV, MAX_BYTES = "SCRATCH_HUB_MAX_BYTES", 1_000_000_000
MEMORY_ENV, MEMORY = "SCRATCH_HUB_MEMORY", 2_000_000_000
OURS = ScratchTransformerConfig.model_type
FAMILIES = {"gpt2": "GPT-2", "llama": "Llama", "qwen2": "Qwen2", "mistral": "Mistral", "gpt_neox": "GPT-NeoX (Pythia)",
            OURS: "ours (scratch_transformer)"}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
OPTIONAL_FILES = ("generation_config.json",)
WEIGHTS = {"safetensors": ("model.safetensors", "model.safetensors.index.json"),
           "pickle": ("pytorch_model.bin", "pytorch_model.bin.index.json")}


def _limit(env: str, default: int) -> int:
    try:
        return int(float(os.environ.get(env, default)))
    except ValueError:
        return default


def megabytes(n: int) -> str:
    return f"{n / 1e6:,.3g} MB" if n < 1e9 else f"{n / 1e9:,.3g} GB"


def limits() -> dict[str, int]:
    """The limits in force now: parameters, weight bytes, memory of the models held."""
    return {"parameters": _limit(MAX_PARAMETERS_ENV, MAX_PARAMETERS), "bytes": _limit(MAX_BYTES_ENV, MAX_BYTES),
            "memory": _limit(MEMORY_ENV, MEMORY)}


def families() -> list[str]:
    """The model types we can open: those ``modeling.convert`` converts, and our own."""
    return sorted(convert.CONVERTERS) + [OURS]


def family_name(model_type: str) -> str:
    return FAMILIES.get(model_type, model_type)


# ----------------------------------------------------------------------------------------------
# What a folder (or a repo's file list) must hold, checked before the weights are read or fetched
# ----------------------------------------------------------------------------------------------


@dataclass
class Plan:
    """What to read: the files, the weights' format and bytes, the config (``auto_map`` dropped), its parameters."""

    config: dict
    files: list[str]
    weights_format: str
    weight_bytes: int
    n_parameters: int

    @property
    def model_type(self) -> str:
        return self.config["model_type"]


def read_config(data: bytes, where: str) -> dict:
    """config.json as a dict without ``auto_map`` (a repo's pointer to its own code, which we never run)."""
    try:
        raw = json.loads(data)
    except ValueError as error:
        raise InputProblem(f"{where}'s config.json is not readable JSON ({error_text(error)}).") from None
    if not isinstance(raw, dict):
        raise InputProblem(f"{where}'s config.json is not a JSON object.")
    raw.pop("auto_map", None)
    model_type = raw.get("model_type")
    if model_type not in families():
        raise InputProblem(f"{where} holds a {echo(model_type or 'model without model_type', 40)} model; the families "
                           f"we can open are {', '.join(family_name(t) + f' (`{t}`)' for t in families())}.")
    if raw.get("is_encoder_decoder"):
        raise InputProblem(f"{where} holds an encoder-decoder; models opened here are language models (decoder-only).")
    return raw


def config_object(raw: dict):
    """The typed config: ours for scratch_transformer, else transformers' own class for the model_type."""
    if raw["model_type"] == OURS:
        return ScratchTransformerConfig.from_dict(raw)
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    return CONFIG_MAPPING[raw["model_type"]].from_dict(raw)


def model_class(config):
    if isinstance(config, ScratchTransformerConfig):
        return ScratchTransformerForCausalLM
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

    return MODEL_FOR_CAUSAL_LM_MAPPING[type(config)]


def count_parameters(raw: dict) -> int:
    """Parameters of the model the config describes, built on the meta device (no memory, no initialisation);
    tied weights counted once."""
    try:
        config = config_object(raw)
        with torch.device("meta"):
            model = model_class(config)(config)
    except Exception as error:  # noqa: BLE001 - a config transformers cannot build
        raise InputProblem(f"Its config.json does not describe a model transformers can build ({error_text(error)}).") from None
    return sum(p.numel() for p in model.parameters())  # parameters() yields a tied tensor once


def plan(where: str, sizes: dict[str, int | None], config_bytes: bytes) -> Plan:
    """The files to read from a listing (name -> bytes), refused with the reason when something is missing or too
    large: config, tokenizer.json, safetensors weights (else pickled ones)."""
    raw = read_config(config_bytes, where)
    missing = [name for name in ("tokenizer.json",) if name not in sizes]
    formats = [kind for kind, names in WEIGHTS.items() if any(name in sizes for name in names)]
    if not formats:
        missing.append("weights (model.safetensors, or pytorch_model.bin)")
    if missing:
        raise InputProblem(f"{where} lacks {' and '.join(missing)}: it cannot be opened.")
    weights_format = formats[0]  # safetensors first
    single, index = WEIGHTS[weights_format]
    stem = single.rsplit(".", 1)[0]
    weight_files = [single] if single in sizes else [index] + sorted(
        n for n in sizes if n.startswith(stem + "-") and n.endswith(single.rsplit(".", 1)[1]))
    weight_bytes = sum(sizes[n] or 0 for n in weight_files)
    n_parameters = count_parameters(raw)
    max_parameters, max_bytes = _limit(MAX_PARAMETERS_ENV, MAX_PARAMETERS), _limit(MAX_BYTES_ENV, MAX_BYTES)
    if n_parameters > max_parameters:
        raise InputProblem(f"{where} has {n_parameters / 1e6:,.1f}M parameters; this app opens models of at most "
                           f"{max_parameters / 1e6:,.0f}M (set {MAX_PARAMETERS_ENV} to change it).")
    if weight_bytes > max_bytes:
        raise InputProblem(f"{where}'s weights are {megabytes(weight_bytes)}; this app opens at most "
                           f"{megabytes(max_bytes)} (set {MAX_BYTES_ENV} to change it).")
    files = ["config.json"] + [n for n in TOKENIZER_FILES + OPTIONAL_FILES if n in sizes] + weight_files
    return Plan(raw, files, weights_format, weight_bytes, n_parameters)

