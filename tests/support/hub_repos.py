"""The repos the Hub tests serve (tests/support/fake_hub.py): tiny random models of every family ``modeling.convert`` holds,
one of ours, and the bad ones (unknown architecture, too large, pickle only, a malicious pickle, missing files, a
repo whose .py would write a file if it ran, a tokenizer with more ids than the weights have rows, one
whose split pattern backtracks exponentially). Each is a folder written by the library's own ``save_pretrained``."""

import json
import pickle
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

from support.fixtures_checkpoints import checkpoint_config, train_tokenizer
from modeling import ScratchTransformerForCausalLM

# model_type -> a tiny config (2 layers, d 32, 4 heads) of transformers' own class: one entry per family
# modeling.convert.CONVERTERS holds. A family added there without an entry here fails test_every_family_opens.
TINY = {
    "gpt2": dict(n_embd=32, n_layer=2, n_head=4, n_positions=64),
    # Llama 3.2's RoPE: frequencies slowed by Llama 3.1's rule, here over a trained context of 32 positions, so
    # each band holds a pair of the 4 (d_head 8): pair 0 turns as it was, pair 1 blended, pairs 2 and 3 32x slower
    "llama": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=False,
                  rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 32.0, "low_freq_factor": 0.5,
                                   "high_freq_factor": 4.0, "original_max_position_embeddings": 32}),
    "qwen2": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=False),
    "mistral": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=False, sliding_window=None),
    "gpt_neox": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                     max_position_embeddings=64, rotary_pct=0.25, use_parallel_residual=True, tie_word_embeddings=False),
}
MARKER = "remote_code_ran.txt"  # what the malicious repo's code and pickle would write


def tokenizer():
    return train_tokenizer()


def transformers_model(model_type: str, tok, seed: int = 0, **sizes):
    """A random transformers causal LM of ``model_type`` (transformers' own class) and config ``sizes``, with
    ``tok``'s start and end ids (its ids are a subset of the model's vocabulary, which keeps every one of its logits)."""
    config = AutoConfig.for_model(model_type, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, **sizes)
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config).eval()


def scaled_gpt2(scale: float, seed: int = 1, **sizes):
    """(a random GPT2LMHeadModel of ``sizes`` whose weight matrices are ``scale`` times their initial size, the tests'
    tokenizer): a trained model's numbers are larger than a fresh one's, and float32 rounding grows with them."""
    tok = tokenizer()
    model = transformers_model("gpt2", tok, seed, vocab_size=len(tok), **sizes)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 2:
                parameter.mul_(scale)
    return model, tok


def tiny_transformers_model(model_type: str, seed: int = 0):
    """A random transformers causal LM of ``model_type``'s ``TINY`` size, its vocabulary the test tokenizer's."""
    tok = tokenizer()
    return transformers_model(model_type, tok, seed, vocab_size=len(tok), pad_token_id=tok.pad_token_id, **TINY[model_type])


def save_transformers_repo(folder: Path, model_type: str, seed: int = 0, safe: bool = True) -> Path:
    """save_pretrained's folder; ``safe=False``: the weights pickled (torch.save) as pytorch_model.bin instead, as
    older repos hold them."""
    folder = Path(folder)
    model = tiny_transformers_model(model_type, seed)
    model.save_pretrained(folder)
    if not safe:
        (folder / "model.safetensors").unlink()
        torch.save(model.state_dict(), folder / "pytorch_model.bin")
    tokenizer().save_pretrained(folder)
    return folder


def save_untied_said_tied(folder: Path, family: str) -> Path:
    """A repo of ``family`` saved with an LM head of its own, its config.json's ``tie_word_embeddings`` then set: the
    weights hold two matrices while the flag says one (transformers keeps the stored head). With the tokenizer."""
    tok = tokenizer()
    model = transformers_model(family, tok, vocab_size=len(tok), pad_token_id=tok.pad_token_id,
                               **{**TINY[family], "tie_word_embeddings": False})
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    raw = json.loads((Path(folder) / "config.json").read_text())
    (Path(folder) / "config.json").write_text(json.dumps({**raw, "tie_word_embeddings": True}))
    return Path(folder)


def save_ours(folder: Path) -> Path:
    """One of ours (scratch_transformer, RoPE), saved with its model code and auto_map, as push_to_hub saves it."""
    tok = tokenizer()
    torch.manual_seed(3)
    model = ScratchTransformerForCausalLM(checkpoint_config(tok, "rope")).eval()
    model.register_for_auto_class("AutoModelForCausalLM")
    model.config.register_for_auto_class()
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return Path(folder)


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in Path(folder).iterdir() if p.is_file()}


class WritesAFile:
    """Unpickling this would write MARKER (in the working directory): what weights_only=True must refuse."""

    def __reduce__(self):
        return (Path.write_text, (Path(MARKER), "a pickle ran code"))


def backtracking_tokenizer() -> str:
    """The tests' tokenizer.json splitting text with (a|aa)+c first: exponential backtracking on a run of a's."""
    data = json.loads(tokenizer().backend_tokenizer.to_str())
    data["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "(a|aa)+c"}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    return json.dumps(data)


def bad_repos(tmp: Path) -> dict[str, dict[str, bytes]]:
    """name -> files of each bad repo."""
    gpt2 = files_of(save_transformers_repo(tmp / "gpt2-for-bad", "gpt2"))
    bert = dict(gpt2, **{"config.json": json.dumps({"model_type": "bert", "vocab_size": 10}).encode()})
    large = dict(gpt2, **{"config.json": json.dumps(dict(json.loads(gpt2["config.json"]), n_embd=1024, n_layer=24,
                                                         n_head=16, vocab_size=50257)).encode()})
    pickle_only = files_of(save_transformers_repo(tmp / "gpt2-pickle", "gpt2", safe=False))
    evil_pickle = {k: v for k, v in pickle_only.items() if k != "pytorch_model.bin"}
    evil_pickle["pytorch_model.bin"] = pickle.dumps({"transformer.wte.weight": WritesAFile()})
    no_tokenizer = {k: v for k, v in gpt2.items() if not k.startswith(("tokenizer", "special_tokens"))}
    no_weights = {k: v for k, v in gpt2.items() if k != "model.safetensors"}
    tok = tokenizer()  # 384 tokens, for a model with 300 embedding rows: the tokenizer of another model
    transformers_model("gpt2", tok, vocab_size=300, **TINY["gpt2"]).save_pretrained(tmp / "gpt2-short-vocabulary")
    short_vocabulary = dict(gpt2, **files_of(tmp / "gpt2-short-vocabulary"))
    backtracking = dict(gpt2, **{"tokenizer.json": backtracking_tokenizer().encode()})
    code = f"from pathlib import Path\nPath({MARKER!r}).write_text('the repo code ran')\n"
    remote_config = dict(json.loads(gpt2["config.json"]), auto_map={
        "AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.EvilModel"})
    remote_code = dict(gpt2, **{"config.json": json.dumps(remote_config).encode(), "evil.py": code.encode()})
    tok_config = json.loads(remote_code.get("tokenizer_config.json", b"{}"))
    tok_config["auto_map"] = {"AutoTokenizer": ["evil.EvilTokenizer", None]}
    remote_code["tokenizer_config.json"] = json.dumps(tok_config).encode()
    return {"bad/unknown-architecture": bert, "bad/too-large": large, "bad/pickle-only": pickle_only,
            "bad/evil-pickle": evil_pickle, "bad/no-tokenizer": no_tokenizer, "bad/no-weights": no_weights,
            "bad/remote-code": remote_code, "bad/tokenizer-beyond-weights": short_vocabulary,
            "bad/backtracking-tokenizer": backtracking}
