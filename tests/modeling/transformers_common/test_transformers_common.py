"""transformers' common model and config suites (ModelTesterMixin, ConfigTester from the installed version's sdist)
run against our models: the bare model and the causal LM, the bare model and the seq2seq LM, each position encoding;
and a causal Llama-style block (RMSNorm, SwiGLU, grouped-query attention, no biases, untied head) and a NeoX-style
one (parallel residual, a quarter of each head rotated).

    python -m pytest tests/modeling/transformers_common -q -rs        # alone (marker: transformers_common)

The first run downloads the transformers sdist (see transformers_sdist.py); about two minutes on two cores.
"""

import unittest

import pytest
import torch
from transformers_sdist import prepare

prepare()
from transformers_tests.test_configuration_common import ConfigTester  # noqa: E402
from transformers_tests.test_modeling_common import ModelTesterMixin, ids_tensor, random_attention_mask  # noqa: E402

from transformers.models.auto.modeling_auto import (  # noqa: E402
    MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
    MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
    MODEL_MAPPING_NAMES,
)

from modeling import (  # noqa: E402
    POSITION_ENCODINGS,
    ScratchTransformerConfig,
    ScratchTransformerForCausalLM,
    ScratchTransformerForSeq2SeqLM,
    ScratchTransformerModel,
)

pytestmark = pytest.mark.transformers_common

IN_TREE_NAMES = ((MODEL_MAPPING_NAMES, ScratchTransformerModel), (MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, ScratchTransformerForCausalLM),
                 (MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES, ScratchTransformerForSeq2SeqLM))


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Thousands of tiny forward passes: on a shared two-core machine a second thread only waits (12 min -> 2 min)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def named_like_an_in_tree_model():
    """The suite tells a bare model (no loss) from a language model (gets labels) by transformers' own name tables,
    where an in-tree model has its entries; AutoModel.register (what `import modeling` does) writes elsewhere. Our
    names go in for each test, as an in-tree model's would be, and come out after it."""
    for table, model_class in IN_TREE_NAMES:
        table[ScratchTransformerConfig.model_type] = model_class.__name__
    yield
    for table, _ in IN_TREE_NAMES:
        del table[ScratchTransformerConfig.model_type]


# Tests that read what the sdist does not ship (see sdist.py): not ours to pass or fail.
NEEDS_MISSING_MODULES = {
    "test_generation_tester_mixin_inheritance": "GenerationTesterMixin lives in tests/generation/, not in the sdist",
}


BLOCKS = {
    "paper": {},
    "llama": dict(norm="rmsnorm", feed_forward="gated", activation="silu", num_key_value_heads=2, bias=False,
                  tie_word_embeddings=False, rope_theta=500.0),
    "neox": dict(parallel_residual=True, rotary_fraction=0.25, tie_word_embeddings=False),
}


class ScratchTransformerModelTester:
    """Tiny configs and inputs, in the shape transformers' model testers give them (see LlamaModelTester, BartModelTester)."""

    def __init__(self, parent, position_encoding: str, is_encoder_decoder: bool, block: str = "paper", batch_size=13,
                 seq_length=7, vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=37):
        self.parent, self.position_encoding, self.is_encoder_decoder = parent, position_encoding, is_encoder_decoder
        self.block = BLOCKS[block]
        self.batch_size, self.seq_length, self.vocab_size = batch_size, seq_length, vocab_size
        self.hidden_size, self.num_hidden_layers = hidden_size, num_hidden_layers
        self.num_attention_heads, self.intermediate_size = num_attention_heads, intermediate_size
        self.encoder_seq_length = self.decoder_seq_length = seq_length
        self.is_training = True
        self.pad_token_id, self.bos_token_id, self.eos_token_id = 0, 1, 2

    def get_config(self) -> ScratchTransformerConfig:
        """transformers' standard names, as its own testers write them: both stacks get num_hidden_layers."""
        return ScratchTransformerConfig(
            vocab_size=self.vocab_size, hidden_size=self.hidden_size, num_attention_heads=self.num_attention_heads,
            num_hidden_layers=self.num_hidden_layers, intermediate_size=self.intermediate_size,
            max_position_embeddings=64, position_encoding=self.position_encoding, dropout=0.1, attention_dropout=0.1,
            is_encoder_decoder=self.is_encoder_decoder, pad_token_id=self.pad_token_id, bos_token_id=self.bos_token_id,
            eos_token_id=self.eos_token_id, decoder_start_token_id=self.bos_token_id, **self.block,
        )

    def prepare_config_and_inputs(self):
        input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size).clamp(3)
        attention_mask = random_attention_mask([self.batch_size, self.seq_length])
        return self.get_config(), input_ids, attention_mask

    def prepare_config_and_inputs_for_common(self):
        config, input_ids, attention_mask = self.prepare_config_and_inputs()
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
        if self.is_encoder_decoder:
            inputs["decoder_input_ids"] = ids_tensor([self.batch_size, self.seq_length], self.vocab_size).clamp(3)
        return config, inputs


class ScratchTransformerConfigTest(unittest.TestCase):
    def test_config(self):
        # our own field names, as GPT-2's suite passes n_embd: the JSON holds them, the HF names are aliases
        tester = ConfigTester(self, config_class=ScratchTransformerConfig, d_model=32, n_heads=4, n_layers=2, vocab_size=99)
        # run_common_tests minus check_config_arguments_init, which reads the unshipped config_common_kwargs
        for check in ("create_and_test_config_common_properties", "create_and_test_config_to_json_string",
                      "create_and_test_config_to_json_file", "create_and_test_config_from_and_save_pretrained",
                      "create_and_test_config_from_and_save_pretrained_subfolder",
                      "create_and_test_config_from_and_save_pretrained_composite",
                      "create_and_test_config_with_num_labels", "create_and_test_config_from_pretrained_custom_kwargs",
                      "check_config_can_be_init_without_params"):
            getattr(tester, check)()


def _model_test(position_encoding: str, is_encoder_decoder: bool, block: str = "paper") -> type:
    lm = ScratchTransformerForSeq2SeqLM if is_encoder_decoder else ScratchTransformerForCausalLM

    class Test(ModelTesterMixin, unittest.TestCase):
        all_model_classes = (ScratchTransformerModel, lm)
        pipeline_model_mapping = {}
        _torch_compile_train_cls = lm

        def setUp(self):
            self.model_tester = ScratchTransformerModelTester(self, position_encoding, is_encoder_decoder, block)
            self.is_encoder_decoder = is_encoder_decoder

    for name, reason in NEEDS_MISSING_MODULES.items():
        setattr(Test, name, pytest.mark.skip(reason=f"needs a module the sdist lacks: {reason}")(getattr(Test, name)))
    kind = "Seq2Seq" if is_encoder_decoder else "Causal"
    style = "" if block == "paper" else f"{block.capitalize()}Style"
    Test.__name__ = Test.__qualname__ = f"{kind}{style}{position_encoding.capitalize()}ModelTest"
    return Test


for _position_encoding in POSITION_ENCODINGS:
    for _is_encoder_decoder in (False, True):
        _test = _model_test(_position_encoding, _is_encoder_decoder)
        globals()[_test.__name__] = _test
for _block in ("llama", "neox"):
    _test = _model_test("rope", False, _block)
    globals()[_test.__name__] = _test
del _test  # else pytest collects the last class a second time under this name

