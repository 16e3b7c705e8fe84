"""explorer.views.forward_pass: one recorded pass of (checkpoint, text, decoding) serves every view of that text; views
never run the model for what the pass holds. Counted in forward calls, not timed."""

import threading

import pytest
import torch

from explorer.views import ablation, attention, forward_pass, lens, steps, trace
from explorer.generation.decoding import DecodingSettings
from support.fixtures_checkpoints import SEQ2SEQ_NAME
from support.shipped import load

TEXT = "Shall I compare thee to a summer's day? Thou art more lovely"
SAMPLED = DecodingSettings(True, temperature=0.9, top_k=20, seed=7, max_new_tokens=12)


class Calls:
    """Counts the model's own forward passes and its generate calls (the passes inside generate count as generate).
    The model is shared with other tests: ``with Calls(model) as calls:`` puts it back as it was."""

    def __init__(self, model):
        self.model, self.forwards, self.generates, self._generating = model, 0, 0, False

    def __enter__(self):
        self._hook = self.model.register_forward_pre_hook(self._forward)
        generate = self.model.generate

        def counted_generate(*args, **kwargs):
            self.generates += 1
            self._generating = True
            try:
                return generate(*args, **kwargs)
            finally:
                self._generating = False

        self.model.generate = counted_generate
        return self

    def __exit__(self, *exc):
        self._hook.remove()
        del self.model.generate  # the class's method again

    def _forward(self, module, args):
        self.forwards += 0 if self._generating else 1


def every_view(model, tokenizer, decoding, kind):
    attention.attention_maps(model, tokenizer, TEXT, decoding)
    steps.attention_steps(model, tokenizer, TEXT, kind, 1, 0, -1, decoding)
    lens.logit_lens(model, tokenizer, TEXT, None, decoding)
    baseline = ablation.ablate_heads(model, tokenizer, TEXT, "", kind, decoding)
    trace.forward_trace(model, tokenizer, TEXT, decoding)
    return baseline


@pytest.mark.parametrize("name, kind, generates", [("shakespeare-rope", "self", 0), (SEQ2SEQ_NAME, "cross", 1)])
def test_one_recorded_run_serves_every_view(tiny_checkpoints, monkeypatch, name, kind, generates):
    monkeypatch.setattr(forward_pass, "PASSES", forward_pass.LRUCache(4))
    model, tokenizer = load(tiny_checkpoints, name)
    with Calls(model) as calls:
        baseline = every_view(model, tokenizer, SAMPLED, kind)
        assert (calls.forwards, calls.generates) == (1, generates)
        every_view(model, tokenizer, SAMPLED, kind)  # asked again: all from the same run
        assert (calls.forwards, calls.generates) == (1, generates)
        removed = ablation.ablate_heads(model, tokenizer, TEXT, "1.0", kind, SAMPLED)  # the ablated pass: a new recording
        assert (calls.forwards, calls.generates) == (2, generates)
    assert removed.loss_before == baseline.loss_before and removed.loss_after != removed.loss_before


def test_every_view_reads_the_same_rewrite_and_the_runs_own_numbers(tiny_checkpoints, monkeypatch):
    """A sampled rewrite is generated once: the attention maps, the lens and the trace read the same decoder tokens,
    and the lens's last row and the ablation baseline are the run's logits."""
    monkeypatch.setattr(forward_pass, "PASSES", forward_pass.LRUCache(4))
    model, tokenizer = load(tiny_checkpoints, SEQ2SEQ_NAME)
    the_run = forward_pass.recorded_pass(model, tokenizer, TEXT, SAMPLED)
    maps = attention.attention_maps(model, tokenizer, TEXT, SAMPLED)
    read_out = lens.logit_lens(model, tokenizer, TEXT, None, SAMPLED)
    traced = trace.forward_trace(model, tokenizer, TEXT, SAMPLED)
    assert maps.query_labels["cross"] == the_run.tokens("target") and maps.rewrite == traced.rewrite == the_run.read.rewrite
    assert [label.split(":", 1)[1] for label in the_run.tokens("target")] == read_out.tokens == traced.decoder_tokens
    assert torch.equal(read_out.model_logits, the_run.logits)
    ablated = ablation.ablate_heads(model, tokenizer, TEXT, "", "decoder", SAMPLED)
    assert torch.equal(ablated.logits_after, the_run.logits)
    ranked = ablation.rank_heads(model, tokenizer, TEXT, "decoder", SAMPLED, workers=1)  # both say what they scored
    assert ablated.rewrite == ranked.rewrite == the_run.read.rewrite != ""
    assert ablated.decoded_with == ranked.decoded_with == the_run.read.decoded_with != ""


def test_requests_for_one_text_at_the_same_time_cost_one_run(tiny_checkpoints, monkeypatch):
    """Four threads ask for the attention maps, the lens and the trace of one text at once (a barrier starts them
    together): the first records the run, the others wait for it."""
    monkeypatch.setattr(forward_pass, "PASSES", forward_pass.LRUCache(4))
    model, tokenizer = load(tiny_checkpoints, SEQ2SEQ_NAME)
    start, errors = threading.Barrier(4, timeout=30), []
    views = [lambda: attention.attention_maps(model, tokenizer, TEXT, SAMPLED),
             lambda: lens.logit_lens(model, tokenizer, TEXT, None, SAMPLED),
             lambda: trace.forward_trace(model, tokenizer, TEXT, SAMPLED),
             lambda: steps.attention_steps(model, tokenizer, TEXT, "decoder", 0, 1, 0, SAMPLED)]

    def worker(view):
        try:
            start.wait()
            view()
        except Exception as error:  # noqa: BLE001 - reported by the main thread
            errors.append(error)

    with Calls(model) as calls:
        threads = [threading.Thread(target=worker, args=(view,)) for view in views]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert not errors and (calls.forwards, calls.generates) == (1, 1)


def test_the_cache_is_bounded_and_keyed_by_model_text_and_decoding(tiny_checkpoints, monkeypatch):
    monkeypatch.setattr(forward_pass, "PASSES", forward_pass.LRUCache(2))
    model, tokenizer = load(tiny_checkpoints, SEQ2SEQ_NAME)
    greedy = DecodingSettings(False, max_new_tokens=12)
    with Calls(model) as calls:
        first = forward_pass.recorded_pass(model, tokenizer, TEXT, greedy)
        assert forward_pass.recorded_pass(model, tokenizer, TEXT, greedy) is first
        assert forward_pass.recorded_pass(model, tokenizer, TEXT, SAMPLED) is not first  # another rewrite: another run
        forward_pass.recorded_pass(model, tokenizer, "Another text", greedy)  # a third run: the least recently used goes
        assert forward_pass.recorded_pass(model, tokenizer, TEXT, greedy) is not first
    assert calls.forwards == 4 and calls.generates == 4
    assert not model._forward_pre_hooks and "generate" not in vars(model)


def test_an_attention_kind_knows_its_module_record_sites_and_mask(tiny_checkpoints, monkeypatch):
    monkeypatch.setattr(forward_pass, "PASSES", forward_pass.LRUCache(2))
    model, tokenizer = load(tiny_checkpoints, SEQ2SEQ_NAME)
    the_run = forward_pass.recorded_pass(model, tokenizer, TEXT, SAMPLED)
    for kind in forward_pass.kinds_of(True):
        the_kind = forward_pass.ATTENTION_KINDS[kind]
        assert the_kind.name == kind
        module, _ = the_kind.modules(model, 1)
        assert module.site == (the_kind.stack, 1, the_kind.part)
        record = the_kind.record(the_run.recording, 1)
        assert torch.equal(the_run.recording[the_kind.site(1, "heads")], record.heads)
        assert record.weights.shape[-2:] == (len(the_run.tokens(the_kind.queries)), len(the_run.tokens(the_kind.keys)))
        assert (record.bias is not None) == the_kind.causal  # only a causal self-attention is masked (no padding here)
    with pytest.raises(ValueError, match="Attention must be one of encoder, decoder, cross for this model; got `self`"):
        forward_pass.attention_kind(model, "self")
