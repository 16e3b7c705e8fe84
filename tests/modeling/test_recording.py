"""modeling.record: requests recording on one shared model at the same time each get exactly their own records; with
no recording open the model runs its configured attention backend and keeps nothing."""

import threading

import pytest
import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from modeling import Site, record
from modeling.recording import current_recording
from support.tiny_models import random_ids, tiny_causal_lm, tiny_seq2seq


def recorded(model, ids, edits=None):
    """(logits, recording) of one forward pass of ``ids`` (an encoder-decoder's decoder reads the first 5 ids)."""
    extra = {"decoder_input_ids": ids[:, :5]} if model.config.is_encoder_decoder else {}
    with torch.no_grad(), record(edits=edits) as recording:
        logits = model(ids, use_cache=False, **extra).logits
    return logits, recording


def assert_same_records(mine, alone):
    assert mine.values.keys() == alone.values.keys()
    for site, tensor in alone.values.items():
        assert torch.equal(mine.values[site], tensor), site


@pytest.mark.parametrize("build", [tiny_causal_lm, tiny_seq2seq])
def test_two_threads_recording_on_one_shared_model_each_get_exactly_their_own_records(build):
    """Both threads stop inside layer 0 (an edit that waits at a barrier and changes nothing) until the other has
    got there too, so the two forward passes are in flight at the same time, each inside its own recording."""
    model = build("rope")
    texts = [random_ids(1, 9, seed=1), random_ids(1, 14, seed=2)]
    alone = [recorded(model, ids) for ids in texts]
    inside_layer_0 = threading.Barrier(2, timeout=30)

    def wait_for_the_other(heads):
        inside_layer_0.wait()
        return heads

    edits = {Site("decoder", 0, "self", "heads"): wait_for_the_other}
    results, errors = [None, None], []

    def worker(i):
        try:
            results[i] = recorded(model, texts[i], edits)
        except Exception as error:  # noqa: BLE001 - reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors and all(r is not None for r in results)
    reads_the_text = "encoder" if model.config.is_encoder_decoder else "decoder"
    for (logits, recording), (logits_alone, recording_alone), ids in zip(results, alone, texts):
        assert torch.equal(logits, logits_alone)
        assert_same_records(recording, recording_alone)
        assert recording[reads_the_text, 1, None, "input"].shape[1] == ids.shape[1]  # its own text, 9 or 14 tokens
    assert current_recording() is None


def test_each_recording_holds_every_site_of_its_pass_once():
    model, ids = tiny_seq2seq("rope"), random_ids(2, 8)
    _, recording = recorded(model, ids)
    per_attention = {"input", "query", "key", "value", "query_rotated", "key_rotated", "bias", "scores", "weights",
                     "heads", "concatenated", "output"}
    for stack, parts in (("encoder", ("self",)), ("decoder", ("self", "cross"))):
        for layer in range(2):
            for part in parts:
                names = {s.name for s in recording.values if s[:3] == (stack, layer, part)}
                # RoPE rotates self-attention only; the encoder's self-attention and cross-attention have no mask
                expected = per_attention - ({"query_rotated", "key_rotated"} if part == "cross" else set())
                expected -= {"bias"} if stack == "encoder" or part == "cross" else set()
                assert names == expected, (stack, layer, part)
            assert {s.name for s in recording.values if s[:3] == (stack, layer, "ffn")} == {"hidden", "output"}
    assert {s.name for s in recording.values if s.part == "embed"} == {"token", "sum"}  # RoPE adds no position here
    assert recording.n_layers("encoder") == recording.n_layers("decoder") == 2


COUNTED = []


def counted_sdpa(module, *args, **kwargs):
    COUNTED.append(module.site)
    return sdpa_attention_forward(module, *args, **kwargs)


def test_without_a_recording_the_model_runs_its_backend_bit_for_bit_and_keeps_nothing():
    """The configured backend (here SDPA, counted) runs once per attention sublayer when nothing records, and also under
    a recording that keeps nothing; a recording that keeps the weights runs the explicit softmax instead (one path).
    Outputs with no recording are bit-identical before, between and after recordings, and nothing is kept."""
    AttentionInterface.register("counted_sdpa", counted_sdpa)
    model, ids = tiny_causal_lm("alibi"), random_ids(2, 10)
    model.set_attn_implementation("counted_sdpa")
    state = {name: dict(vars(m)) for name, m in model.named_modules()}
    with torch.no_grad():
        COUNTED.clear()
        before = model(ids, use_cache=False).logits
        assert COUNTED == [("decoder", 0, "self"), ("decoder", 1, "self")]
        COUNTED.clear()
        with record() as everything:
            recorded_logits = model(ids, use_cache=False).logits
        assert COUNTED == []  # the weights are kept: the explicit softmax computed them
        with record(keep=lambda site: False) as nothing:
            silent = model(ids, use_cache=False).logits
        assert COUNTED == [("decoder", 0, "self"), ("decoder", 1, "self")] and nothing.values == {}
        kept = dict(everything.values)
        after = model(ids, use_cache=False).logits
    assert torch.equal(before, after) and torch.equal(before, silent)
    torch.testing.assert_close(recorded_logits, before, rtol=0, atol=1e-5)  # explicit softmax vs SDPA
    assert everything.values == kept  # a pass outside the recording adds nothing to it
    assert current_recording() is None
    assert {name: dict(vars(m)) for name, m in model.named_modules()} == state  # nothing kept on the model
