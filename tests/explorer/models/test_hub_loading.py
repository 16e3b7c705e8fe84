"""Loading the way Hub users load: by repo id from a Hugging Face cache on disk (offline), and as
remote code in a fresh process that cannot import our package."""

import os

import torch

from support.offline_hub import lay_out_cache, run_isolated
from support.tiny_models import random_ids, tiny_causal_lm, tiny_seq2seq


def test_loads_by_repo_id_from_an_offline_hub_cache(tmp_path):
    model = tiny_causal_lm("alibi")
    model.save_pretrained(tmp_path / "saved")
    lay_out_cache(tmp_path / "saved", tmp_path / "cache", "scratch-transformer/tiny-alibi")
    ids = random_ids(1, 8)
    with torch.no_grad():
        expected = model(ids).logits[0, -1].tolist()
    code = f"""
        import json, sys, torch
        sys.path.insert(0, {os.getcwd()!r})
        import modeling
        from transformers import AutoModelForCausalLM
        model = AutoModelForCausalLM.from_pretrained("scratch-transformer/tiny-alibi").eval()
        with torch.no_grad():
            logits = model(torch.tensor({ids.tolist()})).logits[0, -1].tolist()
        print(json.dumps({{"logits": logits, "class": type(model).__name__}}))
    """
    out = run_isolated(code, tmp_path, {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "cache"),
                                         "HF_HOME": str(tmp_path / "home")})
    assert out["class"] == "ScratchTransformerForCausalLM"
    assert torch.equal(torch.tensor(out["logits"]), torch.tensor(expected))


def test_remote_code_loads_where_our_package_cannot_be_imported(tmp_path):
    """The causal model's RoPE is slowed by Llama 3.1's rule: the config's module reads its rules from the checkpoint's
    position_encodings.py, which it imports."""
    llama_3_1 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                 "original_max_position_embeddings": 4}
    causal, seq2seq = tiny_causal_lm("rope", rope_frequency_scaling=llama_3_1), tiny_seq2seq("learned")
    causal.save_pretrained(tmp_path / "causal")
    seq2seq.save_pretrained(tmp_path / "seq2seq")
    ids = random_ids(1, 8)
    with torch.no_grad():
        expected_causal = causal(ids).logits[0, -1]
        expected_seq2seq = seq2seq(ids, decoder_input_ids=ids[:, :4]).logits[0, -1]
    code = f"""
        import json, torch
        try:
            import modeling
            importable = True
        except ImportError:
            importable = False
        from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM
        causal = AutoModelForCausalLM.from_pretrained({str(tmp_path / 'causal')!r}, trust_remote_code=True).eval()
        seq2seq = AutoModelForSeq2SeqLM.from_pretrained({str(tmp_path / 'seq2seq')!r}, trust_remote_code=True).eval()
        ids = torch.tensor({ids.tolist()})
        with torch.no_grad():
            a = causal(ids).logits[0, -1].tolist()
            b = seq2seq(ids, decoder_input_ids=ids[:, :4]).logits[0, -1].tolist()
        print(json.dumps({{"importable": importable, "causal": a, "seq2seq": b,
                          "module": type(causal).__module__, "scaling": causal.config.rope_frequency_scaling}}))
    """
    out = run_isolated(code, tmp_path, {"HF_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1"})
    assert out["importable"] is False  # the code really came from the checkpoint folder
    assert out["module"].startswith("transformers_modules.") and out["scaling"] == llama_3_1
    assert (torch.tensor(out["causal"]) - expected_causal).abs().max().item() <= 1e-6
    assert (torch.tensor(out["seq2seq"]) - expected_seq2seq).abs().max().item() <= 1e-6
