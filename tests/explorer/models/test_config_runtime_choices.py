"""What a stranger's config.json may not choose: the attention kernel (a Hub kernel repo, "kernels-community/...", is
code fetched from the Hub wherever the kernels package is installed; flex_attention fails on the CPU) is the app's
(``converting.ATTENTION``), and a quantized model is refused naming its method before its weights download, not
after, with an ImportError that tells the visitor to pip install a package. Through the fake Hub and the real
huggingface_hub client; parity within 1e-4 as everywhere."""

import json

import pytest
import torch

from explorer.core.inputs import InputProblem
from explorer.models import opening, registry
from explorer.models.converting import ATTENTION
from support.hub_repos import files_of, save_ours, save_transformers_repo

TOLERANCE = 1e-4
KERNEL = "kernels-community/flash-attn"
CHOICES = {"kernel": {"attn_implementation": KERNEL}, "kernel-internal": {"_attn_implementation": KERNEL},
           "flex": {"_attn_implementation": "flex_attention"}}
QUANTIZED = {"bitsandbytes": {"quant_method": "bitsandbytes", "load_in_4bit": True},
             "fp8": {"quant_method": "fp8", "weight_block_size": [128, 128]}, "gptq": {"quant_method": "gptq", "bits": 4}}


@pytest.fixture(scope="module")
def hub(start_fake_hub, tmp_path_factory):
    server = start_fake_hub()
    saved = {"llama": files_of(save_transformers_repo(tmp_path_factory.mktemp("llama"), "llama")),
             "ours": files_of(save_ours(tmp_path_factory.mktemp("ours")))}
    for family, files in saved.items():
        config = json.loads(files["config.json"])
        for name, choice in CHOICES.items():
            server.add_repo(f"chooses/{family}-{name}", dict(files, **{"config.json": json.dumps({**config, **choice}).encode()}))
        for method, quantization in QUANTIZED.items():
            server.add_repo(f"quantized/{family}-{method}",
                            dict(files, **{"config.json": json.dumps({**config, "quantization_config": quantization}).encode()}))
    return server


@pytest.mark.parametrize("family", ["llama", "ours"])
@pytest.mark.parametrize("choice", sorted(CHOICES))
def test_a_configs_attention_kernel_is_not_followed(hub, family, choice):
    opened = opening.open_repo(f"chooses/{family}-{choice}")
    assert opened.parity is None or opened.parity.gap <= TOLERANCE
    _, model, tokenizer = registry.resolve(opened.name)
    assert model.config._attn_implementation == ATTENTION
    ids = tokenizer("Shall I compare thee", return_tensors="pt").input_ids
    with torch.no_grad():  # flex_attention would fail here on the CPU
        assert torch.isfinite(model(ids).logits).all()


@pytest.mark.parametrize("family", ["llama", "ours"])
@pytest.mark.parametrize("method", sorted(QUANTIZED))
def test_a_quantized_model_is_refused_naming_its_method_before_the_weights_come(hub, family, method):
    repo = f"quantized/{family}-{method}"
    with pytest.raises(InputProblem) as refused:
        opening.open_repo(repo)
    assert f"holds a quantized model (quantization_config: `{method}`)" in str(refused.value)
    assert "pip install" not in str(refused.value)
    assert hub.downloads(repo, "model.safetensors") == 0
