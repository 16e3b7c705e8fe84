"""Configuration: Hugging Face names, validation with clear errors, bad inputs at run time."""

import pytest
import torch
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM

import modeling
from modeling import ScratchTransformerConfig, ScratchTransformerForCausalLM, ScratchTransformerModel
from support.tiny_models import tiny_causal_lm, tiny_config, tiny_seq2seq


def test_standard_hugging_face_names_are_aliases():
    config = ScratchTransformerConfig(hidden_size=48, num_attention_heads=6, num_hidden_layers=3, intermediate_size=96)
    assert (config.d_model, config.n_heads, config.n_layers, config.d_ff) == (48, 6, 3, 96)
    assert (config.hidden_size, config.num_attention_heads, config.num_hidden_layers, config.intermediate_size) == (
        48, 6, 3, 96)
    assert config.model_type == "scratch_transformer"


def test_standard_names_are_applied_before_defaults_are_derived_from_them():
    standard = ScratchTransformerConfig(num_hidden_layers=2, hidden_size=48, num_attention_heads=6, intermediate_size=96,
                                        n_positions=64, is_encoder_decoder=True)
    paper = ScratchTransformerConfig(n_layers=2, d_model=48, n_heads=6, d_ff=96, max_position_embeddings=64,
                                     is_encoder_decoder=True)
    assert (standard.n_encoder_layers, standard.n_layers) == (2, 2)  # the encoder's depth follows num_hidden_layers
    assert standard.to_dict() == paper.to_dict()
    model = modeling.ScratchTransformerForSeq2SeqLM(standard)
    assert (len(model.model.encoder.stack.layers), len(model.model.decoder.stack.layers)) == (2, 2)
    assert ScratchTransformerConfig(num_hidden_layers=2, n_encoder_layers=3, is_encoder_decoder=True).n_encoder_layers == 3


def test_importing_modeling_registers_the_auto_classes():
    config = AutoConfig.for_model("scratch_transformer", vocab_size=32, d_model=16, n_heads=2, n_layers=1, d_ff=32)
    assert isinstance(config, ScratchTransformerConfig)
    assert type(AutoModel.from_config(config)) is ScratchTransformerModel
    assert type(AutoModelForCausalLM.from_config(config)) is ScratchTransformerForCausalLM
    seq2seq = AutoModelForSeq2SeqLM.from_config(tiny_config(is_encoder_decoder=True))
    assert type(seq2seq) is modeling.ScratchTransformerForSeq2SeqLM


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (dict(d_model=30, n_heads=4), r"d_model \(hidden_size\) must be divisible by n_heads"),
        (dict(d_model=20, n_heads=4, position_encoding="rope"), r"'rope' needs an even head dimension.*= 5"),
        (dict(d_model=36, n_heads=12, position_encoding="rope"), r"even head dimension.*= 3"),
        (dict(position_encoding="relative"), r"position_encoding must be one of sinusoidal, learned, rope, alibi, none"),
        (dict(vocab_size=0), r"vocab_size must be a positive integer, got 0"),
        (dict(n_layers=-1), r"n_layers must be a positive integer"),
        (dict(d_ff=0), r"d_ff must be a positive integer"),
        (dict(max_position_embeddings=0), r"max_position_embeddings must be a positive integer"),
        (dict(dropout=1.5), r"dropout must be a number in \[0, 1\), got 1.5"),
        (dict(dropout="0.1"), r"dropout must be a number in \[0, 1\), got '0.1'"),
        (dict(attention_dropout=None), r"attention_dropout must be a number in \[0, 1\), got None"),
        (dict(rope_theta=float("nan")), r"rope_theta must be a finite positive number, got nan"),
        (dict(rope_theta=0), r"rope_theta must be a finite positive number, got 0"),
        (dict(layer_norm_eps=-1), r"layer_norm_eps must be a finite positive number, got -1"),
        (dict(layer_norm_eps=float("inf")), r"layer_norm_eps must be a finite positive number, got inf"),
        (dict(norm_first="yes"), r"norm_first must be True or False, got 'yes'"),
        (dict(n_heads=True), r"n_heads must be a positive integer, got True"),
        (dict(n_kv_heads=3), r"n_kv_heads \(num_key_value_heads\) must divide n_heads \(num_attention_heads\).*got 4 / 3"),
        (dict(n_kv_heads=0), r"n_kv_heads must be a positive integer, got 0"),
        (dict(norm="batchnorm"), r"norm must be one of layernorm, rmsnorm; got 'batchnorm'"),
        (dict(feed_forward="swiglu"), r"feed_forward must be one of mlp, gated, none; got 'swiglu'"),
        (dict(feed_forward="none", parallel_residual=True),
         r"parallel_residual .* needs feed_forward one of mlp, gated; got feed_forward='none' \(attention-only"),
        (dict(activation="swish"), r"activation must be one of relu, gelu, gelu_new, silu; got 'swish'"),
        (dict(rotary_fraction=0.0), r"rotary_fraction must be a number in \(0, 1\], got 0.0"),
        (dict(rotary_fraction=1.5), r"rotary_fraction must be a number in \(0, 1\], got 1.5"),
        (dict(rotary_fraction=0.5, position_encoding="alibi"), r"rotary_fraction applies to position_encoding 'rope' only"),
        (dict(rotary_fraction=0.4, position_encoding="rope"), r"even, positive width int\(d_head \* rotary_fraction\).*= 3"),
        (dict(rotary_fraction=0.1, position_encoding="rope"), r"even, positive width.*int\(8 \* 0.1\) = 0"),
        (dict(position_encoding="rope", rope_frequency_scaling={"rope_type": "yarn", "factor": 2.0}),
         r"rope_frequency_scaling must be None or a dict with rope_type and its numbers \(linear: factor; llama3: "),
        (dict(position_encoding="rope", rope_frequency_scaling="linear"), r"rope_frequency_scaling must be None or a dict"),
        (dict(position_encoding="alibi", rope_frequency_scaling={"rope_type": "linear", "factor": 2.0}),
         r"rope_frequency_scaling applies to position_encoding 'rope' only"),
        (dict(position_encoding="rope", rope_frequency_scaling={"rope_type": "linear"}),
         r"rope_type 'linear' holds exactly rope_type, factor; got rope_type"),
        (dict(position_encoding="rope", rope_frequency_scaling={"rope_type": "linear", "factor": 0}),
         r"rope_frequency_scaling factor must be a finite positive number, got 0"),
        (dict(position_encoding="rope", rope_frequency_scaling={"rope_type": "linear", "factor": float("inf")}),
         r"factor must be a finite positive number, got inf"),
        (dict(position_encoding="rope", rope_frequency_scaling={
            "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192}), r"needs low_freq_factor < high_freq_factor .*got 4.0 and 4.0"),
        (dict(attention_bias=1), r"attention_bias must be True or False, got 1"),
        (dict(qkv_bias="no"), r"qkv_bias must be True or False, got 'no'"),
        (dict(feed_forward_bias=None, bias="x"), r"bias must be True or False, got 'x'"),
        (dict(parallel_residual=True, norm_first=False), r"parallel_residual .* needs norm_first=True and a decoder-only"),
        (dict(parallel_residual="yes"), r"parallel_residual must be True or False"),
        (dict(tie_word_embeddings="yes"), r"tie_word_embeddings must be True or False"),
    ],
)
def test_impossible_configs_raise_value_error_naming_the_field(overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(**overrides)


def test_attention_only_layers_need_no_d_ff_in_either_kind_of_model():
    """feed_forward="none": d_ff is None (a width given is dropped, not checked: there is no feed-forward); the
    feed-forward's other fields are accepted as they are. Switching a feed-forward back on without a d_ff is refused
    when the model is built."""
    assert ScratchTransformerConfig(feed_forward="none").d_ff is None
    assert ScratchTransformerConfig().d_ff == 1024 and ScratchTransformerConfig(feed_forward="gated").d_ff == 1024
    for config in (tiny_config(feed_forward="none"), tiny_config(seq2seq=True, feed_forward="none", d_ff=0),
                   tiny_config(feed_forward="none", intermediate_size=256)):
        assert (config.feed_forward, config.d_ff, config.intermediate_size) == ("none", None, None)
    config = tiny_config(feed_forward="none")
    config.feed_forward = "mlp"
    with pytest.raises(ValueError, match="d_ff must be a positive integer, got None"):
        ScratchTransformerForCausalLM(config)


def test_token_ids_outside_the_vocabulary_raise_a_clear_error():
    model = tiny_causal_lm()
    with pytest.raises(ValueError, match=r"token ids must be in \[0, 63\] \(vocab_size=64\); got ids from 3 to 64"):
        model(torch.tensor([[3, 64]]))
    with pytest.raises(ValueError, match=r"token ids must be in \[0, 63\]"):
        model(torch.tensor([[-1, 5]]))


def test_attention_mask_of_the_wrong_shape_is_refused():
    model = tiny_causal_lm()
    with pytest.raises(ValueError, match=r"attention_mask must be \(batch, past \+ new tokens\) = \(1, 4\)"):
        model(torch.tensor([[3, 4, 5, 6]]), attention_mask=torch.ones(1, 3, dtype=torch.long))


def test_model_class_and_config_kind_must_agree():
    with pytest.raises(ValueError, match="is_encoder_decoder=False"):
        ScratchTransformerForCausalLM(tiny_config(is_encoder_decoder=True))
    with pytest.raises(ValueError, match="is_encoder_decoder=True"):
        modeling.ScratchTransformerForSeq2SeqLM(tiny_config())


def test_torch_style_transformer_validates_its_arguments():
    with pytest.raises(ValueError, match="batch_first must be True"):
        modeling.Transformer(d_model=16, nhead=2, batch_first=False)
    with pytest.raises(ValueError, match="divisible"):
        modeling.Transformer(d_model=18, nhead=4)
    model = modeling.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=32)
    with pytest.raises(ValueError, match=r"src must be \(batch, length, d_model=16\); got \(1, 3, 8\)"):
        model(torch.randn(1, 3, 8), torch.randn(1, 2, 8))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("n_heads", 5, r"d_model \(hidden_size\) must be divisible by n_heads \(num_attention_heads\): 32 % 5 = 2"),
        ("position_encoding", "bogus", r"position_encoding must be one of sinusoidal, learned, rope, alibi, none; got 'bogus'"),
        ("layer_norm_eps", -1.0, r"layer_norm_eps must be a finite positive number, got -1.0"),
    ],
)
@pytest.mark.parametrize("build", [ScratchTransformerModel, ScratchTransformerForCausalLM, modeling.ScratchTransformerForSeq2SeqLM,
                                   lambda config: modeling.Transformer(config=config)])
def test_a_config_changed_after_creation_is_checked_when_a_model_is_built(build, field, value, message):
    config = tiny_config(seq2seq=build not in (ScratchTransformerModel, ScratchTransformerForCausalLM))
    setattr(config, field, value)
    with pytest.raises(ValueError, match=message):
        build(config)


@pytest.mark.parametrize(("shape", "shown"), [((1, 0), r"\(1, 0\)"), ((5,), r"\(5,\)"), ((1, 2, 3), r"\(1, 2, 3\)")])
def test_input_ids_of_the_wrong_shape_say_which_shape_is_allowed(shape, shown):
    ids = torch.full(shape, 3, dtype=torch.long)
    with pytest.raises(ValueError, match=r"input_ids must be \(batch, length\) with length >= 1; got shape " + shown):
        tiny_causal_lm()(ids)
    with pytest.raises(ValueError, match=r"decoder_input_ids must be \(batch, length\) with length >= 1; got shape " + shown):
        tiny_seq2seq()(torch.tensor([[3, 4]]), decoder_input_ids=ids)


def test_token_ids_and_embeddings_are_either_or():
    model, ids = tiny_causal_lm(), torch.tensor([[3, 4, 5]])
    embeds = model.get_input_embeddings()(ids)
    for kwargs in (dict(), dict(input_ids=ids, inputs_embeds=embeds)):
        with pytest.raises(ValueError, match=r"pass exactly one of input_ids \(batch, length\) or inputs_embeds"):
            model(**kwargs)
    with pytest.raises(ValueError, match=r"inputs_embeds must be \(batch, length, d_model=32\) with length >= 1; got shape \(1, 3, 8\)"):
        model(inputs_embeds=embeds[..., :8])
