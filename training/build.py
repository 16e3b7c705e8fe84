"""The model a run trains: fresh weights, or the trained model a preset continues from, and how it is served."""

import json
from pathlib import Path

import torch
from transformers import GenerationConfig

from modeling import ScratchTransformerConfig, ScratchTransformerForCausalLM, ScratchTransformerForSeq2SeqLM

from .presets import PRESETS


def attention_for(precision: str, context_length: int) -> str:
    """The attention implementation to train with. Under bf16 autocast on a CPU, torch's fused attention is
    slower than the explicit softmax on short sequences and faster on long ones (forward + backward, one
    thread, 8 heads of 44: 214 vs 530 ms at 32 x 128 tokens, 538 vs 465 ms at 16 x 256, 2389 vs 1327 ms at
    8 x 512); on CUDA, and in float32, the fused one."""
    cpu_bf16 = precision == "bf16" and not torch.cuda.is_available()
    return "eager" if cpu_bf16 and context_length < 256 else "sdpa"


def build_model(model_kwargs: dict, tokenizer, context_length: int, attn_implementation: str = "sdpa"):
    config = ScratchTransformerConfig(
        attn_implementation=attn_implementation,
        vocab_size=len(tokenizer), max_position_embeddings=max(context_length, 64),
        training_context_length=context_length, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        decoder_start_token_id=tokenizer.bos_token_id, **model_kwargs,
    )
    model_class = ScratchTransformerForSeq2SeqLM if config.is_encoder_decoder else ScratchTransformerForCausalLM
    return model_class(config)


def starting_model(preset_name: str, init_from: Path | None, model_kwargs: dict, tokenizer, context_length: int,
                   attn_implementation: str):
    """(model, the starting model's training summary or None). Fresh weights, or, for a preset that starts from
    another, the model that preset's run wrote to ``init_from``, float32, with this preset's config fields applied."""
    starts_from = PRESETS[preset_name].starts_from
    if starts_from is None:
        if init_from is not None:
            raise SystemExit(f"--init-from: preset {preset_name} trains from fresh weights; presets that start from a "
                             f"trained model: {', '.join(n for n, p in PRESETS.items() if p.starts_from) or 'none'}")
        return build_model(model_kwargs, tokenizer, context_length, attn_implementation), None
    summary_file = init_from / "training_summary.json" if init_from else None
    if summary_file is None or not summary_file.is_file():
        raise SystemExit(f"preset {preset_name} starts from a trained {starts_from} model: pass --init-from with the "
                         f"--output-dir of `python -m training.train --preset {starts_from}` (a folder holding "
                         f"training_summary.json); got {init_from}")
    start = json.loads(summary_file.read_text())
    if start.get("preset") != starts_from:
        raise SystemExit(f"--init-from {init_from} holds a {start.get('preset')} model; preset {preset_name} starts "
                         f"from a {starts_from} model")
    config = ScratchTransformerConfig.from_pretrained(init_from)
    if config.vocab_size != len(tokenizer):
        raise SystemExit(f"--init-from {init_from}: its vocabulary has {config.vocab_size} tokens, this run's "
                         f"tokenizer {len(tokenizer)}")
    if "dropout" in model_kwargs and "activation_dropout" not in model_kwargs and config.activation_dropout == config.dropout:
        # the trained model's feed-forward dropout followed its dropout (the config's default): it follows the new one
        model_kwargs = {**model_kwargs, "activation_dropout": model_kwargs["dropout"]}
    model_class = ScratchTransformerForSeq2SeqLM if config.is_encoder_decoder else ScratchTransformerForCausalLM
    model = model_class.from_pretrained(init_from, dtype=torch.float32, attn_implementation=attn_implementation,
                                        **model_kwargs)
    return model, start


def generation_config_for(model) -> GenerationConfig:
    c = model.config
    common = dict(bos_token_id=c.bos_token_id, eos_token_id=c.eos_token_id, pad_token_id=c.pad_token_id)
    if c.is_encoder_decoder:
        return GenerationConfig(decoder_start_token_id=c.decoder_start_token_id, max_new_tokens=160, do_sample=False,
                                **common)
    return GenerationConfig(max_new_tokens=200, do_sample=True, temperature=0.8, top_p=0.95, **common)
