"""A from-scratch Transformer that is a first-class Hugging Face transformers model.

Importing this package registers the config and models with the Auto classes, and marks them for
``register_for_auto_class`` so that ``save_pretrained`` ships this code beside the weights
(loadable with ``trust_remote_code=True`` where this package is not installed).

- ``configuration_scratch_transformer``: the config (paper names, Hugging Face aliases, every block option);
- ``modeling_scratch_transformer``: the whole Transformer in reading order, and the Hugging Face model classes;
- ``position_encodings``: sinusoidal, learned, RoPE, ALiBi and none, each beside its formula;
- ``recording``: ``record()``: every step of a forward pass a named ``Site``, kept or edited;
- ``torch_transformer``: ``Transformer``, with the API of ``torch.nn.Transformer(batch_first=True)``;
- ``convert``: weights from GPT-2, the Llama family and GPT-NeoX (and torch.nn.Transformer) into ours, refusing
  what does not map.
"""

from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM

from .configuration_scratch_transformer import POSITION_ENCODINGS, ScratchTransformerConfig
from .modeling_scratch_transformer import (
    ScratchTransformerForCausalLM,
    ScratchTransformerForSeq2SeqLM,
    ScratchTransformerModel,
    ScratchTransformerPreTrainedModel,
)
from .torch_transformer import Transformer
from .recording import Recording, Site, ablate_heads, record

AutoConfig.register(ScratchTransformerConfig.model_type, ScratchTransformerConfig, exist_ok=True)
for auto_class, model_class in (
    (AutoModel, ScratchTransformerModel),
    (AutoModelForCausalLM, ScratchTransformerForCausalLM),
    (AutoModelForSeq2SeqLM, ScratchTransformerForSeq2SeqLM),
):
    auto_class.register(ScratchTransformerConfig, model_class, exist_ok=True)
    model_class.register_for_auto_class(auto_class.__name__)
ScratchTransformerConfig.register_for_auto_class()

__all__ = [
    "POSITION_ENCODINGS",
    "Recording",
    "ScratchTransformerConfig",
    "ScratchTransformerForCausalLM",
    "ScratchTransformerForSeq2SeqLM",
    "ScratchTransformerModel",
    "ScratchTransformerPreTrainedModel",
    "Site",
    "Transformer",
    "ablate_heads",
    "record",
]
