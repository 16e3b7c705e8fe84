"""What may be opened, checked before a weight is read or fetched: the model families (those ``modeling.convert``
converts, and ours), the limits in force (parameters, weight bytes, memory of the models held, disk of the models
downloaded; each set by an environment variable), and the ``Plan`` of a folder or of a repo's file listing: the
files to read, the weights' format and bytes, the config, its parameters.

Nothing a repository holds ever runs: a config's ``auto_map`` (a repo's pointer to its own code) is dropped before any
class is chosen; the class is transformers' own for the config's ``model_type`` (or ours for ``scratch_transformer``).
Safetensors are preferred over pickled weights.

Cost is bounded before work starts: every file a plan reads has a cap (``file_cap``: config and tokenizer files alike
for the Hub and uploads), and the parameters are counted from the config's numbers alone (``count_parameters``:
arithmetic per family, no model built, not even on the meta device), so an absurd size is refused at once.
"""

import json
from dataclasses import dataclass

from modeling import ScratchTransformerConfig, ScratchTransformerForCausalLM
from modeling import convert

from explorer.core.inputs import InputProblem, echo, error_text
from explorer.core.settings import HUB_DISK, HUB_MAX_BYTES, HUB_MAX_PARAMETERS, HUB_MEMORY, megabytes

OURS = ScratchTransformerConfig.model_type
FAMILIES = {"gpt2": "GPT-2", "llama": "Llama", "qwen2": "Qwen2", "mistral": "Mistral", "gpt_neox": "GPT-NeoX (Pythia)",
            OURS: f"ours ({OURS})"}
# A GPT-2 saved before tokenizer.json existed (DialoGPT, many fine-tunes) holds its byte-level BPE as two files:
# model_type -> transformers' own class that reads them (GPT-2's split is built into it, no pattern is read)
VOCAB_AND_MERGES = ("vocab.json", "merges.txt")
VOCAB_AND_MERGES_CLASSES = {"gpt2": "GPT2Tokenizer"}
TOKENIZER_SETTINGS = ("tokenizer_config.json", "special_tokens_map.json")
TOKENIZER_FILES = ("tokenizer.json", *VOCAB_AND_MERGES, *TOKENIZER_SETTINGS)  # every file a tokenizer is read from
PADDING_ROW_FAMILIES = ("llama", "qwen2", "mistral")  # transformers builds their embedding with padding_idx=pad_token_id
WEIGHTS = {"safetensors": ("model.safetensors", "model.safetensors.index.json"),
           "pickle": ("pytorch_model.bin", "pytorch_model.bin.index.json")}
# the most bytes each small file may have (a Hub listing or an upload alike); a weight file's cap is the weights' limit.
# tokenizer.json: Llama 3's is 9 MB, Gemma's 34 MB; a tokenizer's memory is a few times its file's size
FILE_CAPS = {"config.json": 1_000_000, "special_tokens_map.json": 1_000_000,
             "tokenizer_config.json": 5_000_000, "tokenizer.json": 40_000_000, "model.safetensors.index.json": 5_000_000,
             "pytorch_model.bin.index.json": 5_000_000, "vocab.json": 20_000_000, "merges.txt": 20_000_000}


def limits() -> dict[str, int]:
    """The limits in force now (``explorer.core.settings``): parameters, weight bytes, memory of the models held, disk
    of the models downloaded."""
    return {"parameters": HUB_MAX_PARAMETERS.value(), "bytes": HUB_MAX_BYTES.value(), "memory": HUB_MEMORY.value(),
            "disk": HUB_DISK.value()}


def families() -> list[str]:
    """The model types we can open: those ``modeling.convert`` converts, and our own."""
    return sorted(convert.CONVERTERS) + [OURS]


def family_name(model_type: str) -> str:
    return FAMILIES.get(model_type, model_type)


def families_line() -> str:
    """The families we can open, each with its ``model_type`` once: "GPT-2 (`gpt2`), ..., ours (scratch_transformer)"."""
    return ", ".join(family_name(t) + ("" if t in family_name(t) else f" (`{t}`)") for t in families())


def file_cap(name: str) -> int:
    """The most bytes the file ``name`` may have: its cap in ``FILE_CAPS``, else (weights) the weights' limit."""
    return FILE_CAPS.get(name, HUB_MAX_BYTES.value())


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
    """config.json as a dict without ``auto_map`` (a repo's pointer to its own code, which we never run); a quantized
    model (``quantization_config``) is refused: the quantizers need packages and kernels the app does not run."""
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
                           f"we can open are {families_line()}.")
    if raw.get("is_encoder_decoder"):
        raise InputProblem(f"{where} holds an encoder-decoder; models opened here are language models (decoder-only).")
    quantized = raw.get("quantization_config")
    if quantized is not None:
        method = quantized.get("quant_method", "unnamed") if isinstance(quantized, dict) else quantized
        raise InputProblem(f"{where} holds a quantized model (quantization_config: {echo(str(method), 40)}); this app "
                           "opens weights stored as plain numbers (float32, float16 or bfloat16), which its views "
                           "read as they are: open the unquantized repo it was made from.")
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


def check_convertible(raw: dict, where: str) -> None:
    """Refuse what the config alone shows our Transformer cannot hold (a scaled RoPE, a non-finite norm epsilon...)
    before the weights are fetched: the conversion's own checks (``convert.our_config``), not a copy of them. Ours is
    checked by its own config class (``count_parameters``)."""
    if raw["model_type"] == OURS:
        return
    try:
        config = config_object(raw)
    except Exception as error:  # noqa: BLE001 - transformers' config classes check their fields as they are built
        said = " ".join(str(error).split())  # a validator's failure comes on two lines: its name, then its cause
        raise InputProblem(f"{where}'s config.json is not one transformers' {_config_class(raw['model_type']).__name__} "
                           f"accepts: {echo(said, 300)}.") from None
    try:
        convert.our_config(config)
    except Exception as error:  # noqa: BLE001 - transformers' config properties raise their own kinds too
        raise InputProblem(f"{where} cannot be converted to our Transformer: {echo(str(error), 300)}.") from None


def check_padding_row(raw: dict, where: str) -> None:
    """Refuse a ``pad_token_id`` that is no row of the embedding in a family whose transformers class builds its
    embedding with ``padding_idx=pad_token_id`` (``PADDING_ROW_FAMILIES``; torch asserts it lies in -V..V-1), before
    the weights are fetched: loading would fail on it after the download."""
    pad, vocab = raw.get("pad_token_id"), raw.get("vocab_size")
    if raw["model_type"] in PADDING_ROW_FAMILIES and isinstance(pad, int) and isinstance(vocab, int) and not (
            -vocab <= pad < vocab):
        raise InputProblem(f"{where}'s config.json has pad_token_id {echo(pad, 30)}, but its vocab_size is {vocab:,} "
                           f"(ids 0 to {vocab - 1:,}): a {family_name(raw['model_type'])} model's embedding is built with "
                           "pad_token_id as its padding row. Set it to an id below vocab_size, or to null.")


def count_parameters(raw: dict) -> int:
    """Parameters of the model the config describes, from its numbers alone (``parameter_count``): no model is built,
    so any config is counted at once; a config whose numbers are not positive integers is refused."""
    try:
        return parameter_count(raw)
    except (TypeError, ValueError) as error:
        raise InputProblem(f"Its config.json does not describe a model we can build ({error_text(error)}).") from None


def require_parameters(n_parameters: int, where: str) -> int:
    """``n_parameters``, refused above the limit: counted from the config before anything downloads, and again as
    loaded (a config that says its head is tied to the embedding while the weights hold one apart counts one fewer)."""
    if n_parameters > HUB_MAX_PARAMETERS.value():
        raise InputProblem(f"{where} has {n_parameters / 1e6:,.1f}M parameters; this app opens models of at most "
                           f"{HUB_MAX_PARAMETERS.shown()} (set {HUB_MAX_PARAMETERS.env} to change it).")
    return n_parameters


def _numbers(raw: dict, names: str) -> list:
    """The config's values of ``names`` (space-separated), each its class's default where the config has none;
    sizes (not flags) must be positive integers."""
    cls = ScratchTransformerConfig if raw["model_type"] == OURS else _config_class(raw["model_type"])
    values = []
    for name in names.split():
        value = raw.get(name, getattr(cls, name, None))
        if not name.endswith(("bias", "embeddings")) and value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value <= 0):
            raise ValueError(f"`{name}` is {echo(value, 40)}; it must be a positive whole number")
        values.append(value)
    return values


def _config_class(model_type: str):
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    return CONFIG_MAPPING[model_type]


def _linear(n_in: int, n_out: int, bias) -> int:
    return n_in * n_out + (n_out if bias else 0)


def parameter_count(raw: dict) -> int:
    """Exact parameters by family, tied embeddings counted once (V vocabulary, d width, L layers, f the MLP's width):
    GPT-2: Vd + Pd + L(4d² + 4d + 2df + f + d + 4d) + 2d; Llama family (Llama, Qwen2, Mistral: grouped K/V heads of
    width h, SwiGLU): Vd + L(d·(n+2k)h + nh·d + 3df + 2d) + d; GPT-NeoX: Vd + L(4d² + 4d + 2df + f + d + 4d) + 2d;
    ours: the options of ``ScratchTransformerConfig`` (learned positions, GQA, gated FFN, biases, norms). Plus Vd
    for an untied LM head."""
    kind = raw["model_type"]
    if kind == OURS:
        return _ours(raw)
    if kind == "gpt2":
        v, d, p, layers, inner, tied = _numbers(raw, "vocab_size n_embd n_positions n_layer n_inner tie_word_embeddings")
        f = inner or 4 * d
        block = 2 * 2 * d + _linear(d, 3 * d, True) + _linear(d, d, True) + _linear(d, f, True) + _linear(f, d, True)
        return v * d + p * d + layers * block + 2 * d + (0 if tied is not False else v * d)
    if kind == "gpt_neox":
        v, d, layers, f, bias, tied = _numbers(
            raw, "vocab_size hidden_size num_hidden_layers intermediate_size attention_bias tie_word_embeddings")
        block = 2 * 2 * d + _linear(d, 3 * d, bias) + _linear(d, d, bias) + _linear(d, f, True) + _linear(f, d, True)
        return v * d + layers * block + 2 * d + (0 if tied else v * d)
    v, d, layers, f, n, k, h, tied = _numbers(raw, "vocab_size hidden_size num_hidden_layers intermediate_size "
                                                   "num_attention_heads num_key_value_heads head_dim tie_word_embeddings")
    k, h = k or n, h or d // n
    qkv_bias, o_bias, mlp_bias = convert.llama_biases(kind, raw.get("attention_bias"), raw.get("mlp_bias"))
    attention = _linear(d, n * h, qkv_bias) + 2 * _linear(d, k * h, qkv_bias) + _linear(n * h, d, o_bias)
    block = attention + 2 * _linear(d, f, mlp_bias) + _linear(f, d, mlp_bias) + 2 * d
    return v * d + layers * block + d + (0 if tied else v * d)


def _ours(raw: dict) -> int:
    """Ours, by the options of ``ScratchTransformerConfig`` (its own defaults and derived values: the config is data)."""
    c = ScratchTransformerConfig.from_dict(raw)
    d, v, h = c.d_model, c.vocab_size, c.d_head
    norm = d if c.norm == "rmsnorm" else d + (d if c.bias else 0)
    rows = c.n_heads * h + 2 * c.n_kv_heads * h
    block = _linear(d, rows, c.qkv_bias) + _linear(c.n_heads * h, d, c.attention_bias) + norm
    if c.feed_forward != "none":
        width = 2 * c.d_ff if c.feed_forward == "gated" else c.d_ff
        block += _linear(d, width, c.feed_forward_bias) + _linear(c.d_ff, d, c.feed_forward_bias) + norm
    positions = c.max_position_embeddings * d if c.position_encoding == "learned" else 0
    return v * d + positions + c.n_layers * block + (norm if c.final_layer_norm else 0) + (
        0 if c.tie_word_embeddings else v * d)


def check_shard_index(data: bytes, name: str, files: list[str], where: str) -> None:
    """A sharded checkpoint's index (``name``) must name its shards by the plan's own file names (``files``, which lie
    in one folder): transformers joins each name it holds to the folder, so a path (``/...``, ``../...``) would have it
    read weights from anywhere on the server (an operator's cached model, another visitor's upload)."""
    try:
        weight_map = json.loads(data).get("weight_map")
    except (ValueError, AttributeError):
        weight_map = None
    if not isinstance(weight_map, dict) or not weight_map:
        raise InputProblem(f"{where}'s {name} is not an index of shards (a JSON object with a weight_map).")
    shards = {str(shard) for shard in weight_map.values()}
    if not shards <= set(files):
        raise InputProblem(f"{where}'s {name} names shards it lacks: {echo(', '.join(sorted(shards - set(files))), 120)} "
                           "(an index names files beside it, by name).")


def tokenizer_files(model_type: str, sizes: dict) -> list[str] | None:
    """The tokenizer's files to read from a listing: tokenizer_config.json and special_tokens_map.json where present,
    then tokenizer.json, else (a family whose class reads them) vocab.json and merges.txt, last, so the tokenizer can
    be read as soon as its last file comes. None: neither is there."""
    if "tokenizer.json" in sizes:
        read = ["tokenizer.json"]
    elif model_type in VOCAB_AND_MERGES_CLASSES and all(name in sizes for name in VOCAB_AND_MERGES):
        read = list(VOCAB_AND_MERGES)
    else:
        return None
    return [name for name in TOKENIZER_SETTINGS if name in sizes] + read


def missing_tokenizer(model_type: str, sizes: dict) -> str:
    """What a listing without a tokenizer we read lacks, said so the owner knows which file to add."""
    wanted = "tokenizer.json" + (" (or vocab.json and merges.txt)" if model_type in VOCAB_AND_MERGES_CLASSES else "")
    if "tokenizer.model" in sizes:
        wanted += (" (its tokenizer.model, a SentencePiece file, is not read here: AutoTokenizer.from_pretrained "
                   "converts it and save_pretrained writes tokenizer.json beside it)")
    return wanted


def plan(where: str, sizes: dict[str, int | None], config_bytes: bytes) -> Plan:
    """The files to read from a listing (name -> bytes), refused with the reason when something is missing or too
    large, or when the config shows it cannot be converted: config, the tokenizer's files (``tokenizer_files``),
    safetensors weights (else pickled ones)."""
    unread = VOCAB_AND_MERGES if "tokenizer.json" in sizes else ()
    too_large = [f"{name} is {sizes[name]:,} bytes (at most {file_cap(name):,})" for name in sorted(sizes)
                 if name in FILE_CAPS and name not in unread and (sizes[name] or 0) > file_cap(name)]  # weights: below
    if too_large:
        raise InputProblem(f"{where} cannot be opened: its {'; its '.join(too_large)}.")
    raw = read_config(config_bytes, where)
    tokenizer = tokenizer_files(raw["model_type"], sizes)
    missing = [] if tokenizer else [missing_tokenizer(raw["model_type"], sizes)]
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
    n_parameters = require_parameters(count_parameters(raw), where)
    if weight_bytes > HUB_MAX_BYTES.value():
        raise InputProblem(f"{where}'s weights are {megabytes(weight_bytes)}; this app opens at most "
                           f"{HUB_MAX_BYTES.shown()} (set {HUB_MAX_BYTES.env} to change it).")
    check_convertible(raw, where)  # after the numbers, which count_parameters refuses naming config.json
    check_padding_row(raw, where)
    files = ["config.json"] + tokenizer + weight_files  # never generation_config.json: converting.ids_only_decoding
    return Plan(raw, files, weights_format, weight_bytes, n_parameters)

