"""Live training (explorer.learning.train_live): snapshots published by a plain AdamW loop in a thread, stopped by an
Event or a client that leaves, a final result with one loss per logged step, the model saved and loaded back (the
attention-only induction preset too, opened in every view), the data (explorer.learning.live_data: the shipped
excerpt, repeats at varying offsets, the loss on the copies only), the induction score, and every choice bounded with
a clear message."""

import itertools
import json
import math
import threading
import tomllib
import zipfile
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.dynamic_module_utils import get_class_from_dynamic_module

from checkpointing.paths import REPO_ROOT
from explorer.core.inputs import InputProblem
from checkpointing.in_context import repeat_runs
from explorer.learning.live_data import SHAKESPEARE_EXCERPT, LiveData, copyable, shipped_tokenizer
from explorer.learning.live_model import build_model
from explorer.learning.live_result import LiveResult, save_zip
from explorer.learning.live_settings import PRESETS, check_settings
from explorer.learning.live_snapshots import Snapshot, least_induction_score_over_offsets, probe_lengths, watched_head
from explorer.learning.train_live import train_live
from support.tiny_models import tiny_causal_lm

TINY = dict(data="random-repeats", n_layers=1, n_heads=2, d_model=16, context_length=16, batch_size=4, vocab_size=16, sample_tokens=4)


def run(settings, stop=None):
    items = list(train_live(settings, stop))
    return [i for i in items if isinstance(i, Snapshot)], items[-1]


def test_snapshots_every_logged_step_then_a_result_with_the_loss_of_every_step_from_step_0():
    settings = check_settings(**TINY, steps=12, log_every=4)
    snapshots, result = run(settings)
    assert isinstance(result, LiveResult) and result.steps_done == 12 and not result.stopped
    assert [s.step for s in snapshots] == [4, 8, 12]
    assert result.logged_steps == list(range(13)) and len(result.to_json()["losses"]) == 13
    assert [len(s.losses) for s in snapshots] == [5, 9, 13] and snapshots[-1].losses == result.losses
    # step 0 is the fresh model on the first batch, recomputed here; step 1's loss is that batch's, before its update
    first = list(itertools.islice(iter(LiveData(settings, None)), settings.batch_size))
    fresh = build_model(settings, settings.vocab_size)
    with torch.no_grad():
        loss0 = float(fresh(torch.stack([f["input_ids"] for f in first]), labels=torch.stack([f["labels"] for f in first])).loss)
    assert result.losses[0] == pytest.approx(loss0, abs=1e-6) and result.losses[1] == pytest.approx(loss0, abs=1e-5)
    # random tokens of 13 ids: a model that has learnt nothing yet scores about ln 13
    assert result.losses[0] == pytest.approx(math.log(13), abs=0.3)
    last = snapshots[-1]
    T = 2 * probe_lengths(16)[-1]
    assert last.copy_start == T // 2
    attention = np.array(last.attention)
    assert attention.shape == (T, T) and np.allclose(attention.sum(1), 1, atol=1e-5)
    assert np.allclose(np.triu(attention, 1), 0)  # causal: no weight on later tokens
    assert np.array(last.induction).shape == (1, 2)
    # the sample: the prompt (the probe's first copy and 3 of its second), 4 tokens written, the copy they'd be
    assert last.sample.prompt == [str(t) for t in last.probe[: T // 2 + 3]]
    assert len(last.sample.tokens) == 4 and all(3 <= int(t) < 16 for t in last.sample.tokens)
    assert last.sample.copy == [str(t) for t in last.probe[T // 2 + 3: T // 2 + 7]]
    assert last.watched.startswith("the best induction head")


def test_the_watched_head_changes_only_when_another_passes_it_clearly_and_says_so():
    scores = np.array([[0.10, 0.12], [0.30, 0.33]])
    (head, why) = watched_head(scores, None)
    assert head == (1, 1) and "0.33" in why
    kept, why = watched_head(scores, (1, 0))
    assert kept == (1, 0)  # 0.33 does not pass 0.30 by 0.05: no flicker, and the title does not call it the best
    assert why == ("score 0.30. L1.H1 now scores a little higher (0.33); the plot moves to another head only once it "
                   "is ahead by 0.05 or more, so it does not flicker between two close heads")
    assert watched_head(scores, (1, 1))[1] == "the best induction head (score 0.33)"
    moved, why = watched_head(np.array([[0.1, 0.1], [0.30, 0.40]]), (1, 0))
    assert moved == (1, 1) and "passed L1.H0" in why


def test_copyable_tokens_are_those_an_induction_head_predicts():
    sequence = torch.tensor([5, 6, 7, 5, 6, 9, 7, 5])
    # t=4: after 5 (seen at 0, followed by 6) comes 6: copyable; t=5: after 6 (seen at 1, then 7) comes 9: not;
    # t=7: after 7 (latest earlier at 2, then 5) comes 5: copyable
    assert copyable(sequence).tolist() == [False, False, False, False, True, False, False, True]


def test_loss_on_the_copies_only_ignores_every_other_label():
    settings = check_settings(**TINY, copies_only=True, copy_share=0.5)
    for item in itertools.islice(iter(LiveData(settings, None)), 20):
        keep = copyable(item["input_ids"])
        assert torch.equal(item["labels"][keep], item["input_ids"][keep]) and (item["labels"][~keep] == -100).all()
        assert keep.any()


def test_the_induction_preset_trains_attention_only_layers_that_load_again(tmp_path):
    """Attention only is the model's own option (feed_forward="none"): no feed-forward module or parameter anywhere;
    the tab's zip loads with from_pretrained, and through the model code it ships (config.json's auto_map, what
    trust_remote_code loads where our package is absent: a module of transformers_modules), both giving the trained
    model's logits."""
    _, result = run(check_settings(preset="induction", steps=3, log_every=3, sample_tokens=2))
    model = result.model.eval()
    assert (model.config.feed_forward, model.config.d_ff) == ("none", None)
    assert not [name for name, _ in model.named_modules() if "feed_forward" in name]
    assert all(layer.feed_forward is None for layer in model.model.decoder.stack.layers)
    with zipfile.ZipFile(save_zip(result, tmp_path)) as z:
        z.extractall(tmp_path / "attention-only")
    folder = tmp_path / "attention-only"
    shipped = get_class_from_dynamic_module(
        json.loads((folder / "config.json").read_text())["auto_map"]["AutoModelForCausalLM"], folder)
    assert shipped.__module__.startswith("transformers_modules.")
    ids = torch.arange(3, 40)[None]
    with torch.no_grad():
        expected = model(ids).logits
        for loaded in (AutoModelForCausalLM.from_pretrained(folder), shipped.from_pretrained(folder)):
            assert all(layer.feed_forward is None for layer in loaded.eval().model.decoder.stack.layers)
            assert torch.equal(loaded(ids).logits, expected)


def test_every_view_runs_on_an_attention_only_model_opened_in_the_app(tmp_path):
    """The induction preset's model trained on text (random tokens have no tokenizer to open with), opened as "Open
    in every tab" opens it: the forward pass shows no feed-forward step, step by step equals the model's own numbers,
    the logit lens's last row is its logits, patching leaves the feed-forward grid out, and attention, heads,
    ablation, a gradient step and the next-token view run."""
    from explorer.views import ablation, attention, heads, lens, sampling, steps, trace
    from explorer.views.patching import analysis, grids, texts
    from explorer.models import catalog, opening, registry
    from explorer.learning import gradient_step
    from explorer.generation.decoding import DecodingSettings

    settings = check_settings(preset="induction", data="own-text", text=SHAKESPEARE_EXCERPT.read_text()[:4000],
                              steps=3, log_every=3, sample_tokens=2)
    _, result = run(settings)
    try:
        opened = opening.open_upload(save_zip(result, tmp_path), source="trained")
        _, model, tokenizer = registry.resolve(opened.name)
        assert model.config.feed_forward == "none"
        text, greedy = "ROMEO. But soft, what light through yonder window breaks? ROMEO. But soft", DecodingSettings(False)
        forward = trace.forward_trace(model, tokenizer, text, greedy)
        assert forward.steps and not [s for s in forward.steps if "feed-forward" in s.step]
        assert "attention only" in catalog.config_summary(opened.name, model.config)
        assert steps.attention_steps(model, tokenizer, text, "self", 1, 2, 9).parity.gap <= 1e-5
        ids = tokenizer(text, return_tensors="pt").input_ids
        with torch.no_grad():
            logits = model(ids).logits[0].float()
        torch.testing.assert_close(lens.logit_lens(model, tokenizer, text).model_logits, logits, rtol=0, atol=1e-5)
        maps = attention.attention_maps(model, tokenizer, text, greedy)
        assert heads.head_types(model, maps.weights["self"], "self").scores
        assert ablation.ablate_heads(model, tokenizer, text, "1.0").loss_after is not None
        step = gradient_step.gradient_step(text, model, tokenizer, -1, " soft", 0.01)
        assert not [name for name in step.grad_norms if "feed_forward" in name]
        assert len(sampling.next_token_distribution(model, tokenizer, text, DecodingSettings(True)).labels) > 0
        corrupted, _ = texts.change_one_word(tokenizer, text, "ROMEO")
        patched = analysis.activation_patching(model, tokenizer, text, corrupted)
        assert list(patched.grids) == ["residual", "heads", "attention"] and "left out" in patched.notices[0]
        # the tab's Grids checkboxes offer what the model has, and offer (and tick) the feed-forward grid again after
        import gradio as gr

        from ui.tabs.patching import grids_offered

        boxes, offered, feed_forward_plot = grids_offered(opened.name, ["residual", "feed_forward"], list(grids.GRIDS))
        assert [v for _, v in boxes["choices"]] == offered == ["residual", "heads", "attention"]
        assert boxes["value"] == ["residual"] and feed_forward_plot["visible"] is False
        boxes, offered, feed_forward_plot = grids_offered("shakespeare-main", ["residual"], offered)
        assert offered == list(grids.GRIDS) and boxes["value"] == ["residual", "feed_forward"]
        assert feed_forward_plot["visible"] is True
        assert grids_offered("shakespeare-main", ["heads"], offered) == (gr.skip(),) * 3
    finally:
        registry.forget_all()


def test_the_induction_preset_is_a_choice_named_for_it():
    label, chosen = PRESETS["induction"]
    assert "induction" in label.lower()
    settings = check_settings(preset="induction")
    assert all(getattr(settings, name) == value for name, value in chosen.items())
    assert check_settings(preset="induction", steps=5).steps == 5  # a choice given changes the preset's
    with pytest.raises(InputProblem, match="preset must be one of induction"):
        check_settings(preset="grokking")


def test_training_on_shakespeare_lowers_the_loss():
    settings = check_settings(**TINY | dict(data="shakespeare", d_model=32, batch_size=8, sample_tokens=8), steps=40,
                              log_every=10, learning_rate=1e-2)
    snapshots, result = run(settings)
    assert result.losses[0] > 7.0  # near ln 4096 = 8.3 at the start
    assert result.losses[-1] < result.losses[0] - 1.0
    assert snapshots[-1].sample.tokens and snapshots[-1].sample.prompt == ["ROMEO.\n"]  # its decoded prompt


def test_the_stop_event_ends_the_job_early():
    stop = threading.Event()
    settings = check_settings(**TINY, steps=3000, log_every=5)
    snapshots = []
    for item in train_live(settings, stop):
        if isinstance(item, Snapshot):
            snapshots.append(item)
            stop.set()
        else:
            result = item
    assert result.stopped and 5 <= result.steps_done < 3000
    assert len(result.losses) == len(result.logged_steps) == len(result.to_json()["losses"])


def test_a_client_that_leaves_stops_the_trainer():
    stream = train_live(check_settings(**TINY, steps=3000, log_every=5))
    next(stream)
    stream.close()  # what gradio does to a generator whose browser closed
    assert not any(t.name == "live-training" and t.is_alive() for t in threading.enumerate())


def test_the_saved_zip_loads_with_from_pretrained_and_gives_the_same_logits(tmp_path):
    _, result = run(check_settings(**TINY | dict(data="shakespeare"), steps=4, log_every=2))
    archive = save_zip(result, tmp_path)
    with zipfile.ZipFile(archive) as z:
        z.extractall(tmp_path / "unzipped")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "unzipped").eval()
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "unzipped")
    ids = tokenizer("ROMEO. But soft, what light", return_tensors="pt").input_ids
    with torch.no_grad():
        assert torch.allclose(loaded(ids).logits, result.model(ids).logits, atol=1e-6)
    assert not torch.equal(loaded.lm_head.weight, torch.zeros_like(loaded.lm_head.weight))


def test_repeated_runs_copy_at_varying_offsets_in_the_share_asked():
    generator = torch.Generator().manual_seed(0)
    offsets, copies = set(), 0
    for _ in range(300):
        sequence = torch.arange(64)  # distinct tokens: where a copy sits can be read off
        out = repeat_runs(sequence, 0.4, generator)
        copied = (out != sequence).nonzero().flatten()
        copies += len(copied)
        for t in copied.tolist():
            source = int(out[t])
            assert t > source and out[source] == source  # a copy of an original token, earlier in the sequence
            offsets.add(t - source)
    assert offsets == set(range(4, 33))  # every run length from 4 to n/2
    assert copies / (300 * 64) == pytest.approx(0.4, abs=0.05)


def test_the_excerpt_ships_with_the_package():
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert SHAKESPEARE_EXCERPT.name in pyproject["tool"]["setuptools"]["package-data"]["explorer.learning"]
    assert SHAKESPEARE_EXCERPT.parent == REPO_ROOT / "explorer" / "learning"


def test_text_data_are_windows_of_the_shipped_excerpt():
    tokenizer = shipped_tokenizer()
    ids = torch.tensor(tokenizer(SHAKESPEARE_EXCERPT.read_text(), add_special_tokens=False).input_ids)
    settings = check_settings(data="shakespeare", context_length=32)
    text = SHAKESPEARE_EXCERPT.read_text()
    assert 100_000 < len(text) < 300_000 and "ROMEO" in text and "Hermia" in text
    windows = LiveData(settings, ids)
    for _, item in zip(range(5), windows):
        window = item["input_ids"]
        starts = (ids == window[0]).nonzero().flatten()
        assert any(torch.equal(ids[s:s + 32], window) for s in starts.tolist())


def content_induction_head(ids):
    """Attention that a perfect induction head would have: from each token to the one after its latest earlier
    occurrence (uniform over the prefix where there is none)."""
    T = ids.shape[1]
    weights = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    tokens = ids[0].tolist()
    for t in range(T):
        earlier = [j for j in range(t) if tokens[j] == tokens[t]]
        if earlier and earlier[-1] + 1 <= t:
            weights[t] = 0
            weights[t, earlier[-1] + 1] = 1
    return weights


def positional_head(ids, offset):
    """A head that always looks ``offset`` tokens back (copying at one fixed offset)."""
    T = ids.shape[1]
    weights = np.zeros((T, T))
    for t in range(T):
        weights[t, max(0, t - offset + 1)] = 1
    return weights


class HandBuilt:
    """A stand-in model whose one layer's two heads are built by hand: a content-based induction head and a
    positional head tuned to one probe's offset."""

    def __init__(self, vocab_size, offset):
        self.config = SimpleNamespace(vocab_size=vocab_size)
        self.offset = offset

    def __call__(self, ids, output_attentions, use_cache):
        heads = np.stack([content_induction_head(ids), positional_head(ids, self.offset)])
        return SimpleNamespace(attentions=(torch.tensor(heads[None], dtype=torch.float32),))


def test_the_induction_score_fires_on_an_induction_head_not_on_a_fixed_offset_or_a_random_model():
    context = 64
    lengths = probe_lengths(context)
    assert len(set(lengths)) == 3  # three offsets
    scores = least_induction_score_over_offsets(HandBuilt(vocab_size=512, offset=lengths[-1]), context)
    assert scores[0, 0] > 0.8  # found by content at every offset (measured 0.87: a token drawn twice in a probe costs)
    assert scores[0, 1] < 0.05  # right at one offset of three only: its least score is that of a wrong offset
    random_model = tiny_causal_lm("rope", seed=5, vocab_size=512, max_position_embeddings=context)
    random_scores = least_induction_score_over_offsets(random_model, context)
    assert random_scores.max() < 0.15


@pytest.mark.parametrize("values, message", [
    (dict(steps=5000), "Steps must be a whole number from 1 to 3,000"),
    (dict(steps=0), "from 1 to"),
    (dict(n_layers=3), "Layers must be a whole number from 1 to 2"),
    (dict(n_heads=9), "Heads must be a whole number from 1 to 8"),
    (dict(attention_only="yes"), "Attention only must be true or false"),
    (dict(d_model=1024), "from 16 to 256"),
    (dict(d_model=48, n_heads=5), "divisible"),
    (dict(context_length=4096), "from 16 to 128"),
    (dict(learning_rate=float("nan")), "must be a number"),
    (dict(learning_rate=-1e-3), "greater than 0"),
    (dict(learning_rate=1.0), "at most 0.1"),
    (dict(data="wikipedia"), "must be one of shakespeare"),
    (dict(position_encoding="xpos"), "must be one of"),
    (dict(copy_share=0.9), "from 0.02 to 0.5"),
    (dict(data="own-text", text=""), "Paste your own text"),
    (dict(data="own-text", text="x" * 200_000), "at most 100,000"),
    (dict(colour="red"), "Unknown choice"),
])
def test_bad_choices_say_what_is_allowed(values, message):
    with pytest.raises(InputProblem, match=message):
        check_settings(**values)


def test_an_own_text_shorter_than_a_window_is_refused_before_training():
    with pytest.raises(InputProblem, match="at least 33"):
        next(train_live(check_settings(**TINY | dict(context_length=32, data="own-text"), text="To be or not.")))



def test_a_job_names_the_head_once_its_induction_score_reaches_the_label_threshold():
    """formed_head: the best head and the step, when its score reaches the threshold the app labels a head an
    induction head with (0.4); below it, nothing."""
    from explorer.learning.live_snapshots import THRESHOLD, formed_head

    below = [[0.01, 0.02], [THRESHOLD - 0.001, 0.2]]
    assert formed_head(below, 900) is None
    at = [[0.01, 0.02], [0.2, THRESHOLD]]
    assert formed_head(at, 1000) == (1, 1, THRESHOLD, 1000)


def test_a_model_built_while_another_loads_waits_for_it_and_is_initialised():
    """transformers' from_pretrained turns torch's init functions into no-ops for the whole process while it loads
    (``transformers.initialization.no_init_weights``). A live-training model built meanwhile in another thread kept
    uninitialised memory as weights; it now waits on catalog.LOAD_LOCK, and equals the same seed built alone."""
    from transformers.initialization import no_init_weights

    from explorer.models import catalog

    settings = check_settings(**TINY, steps=1)
    alone = build_model(settings, TINY["vocab_size"]).state_dict()
    loading, done = threading.Event(), threading.Event()
    built = {}

    def another_load():
        with catalog.LOAD_LOCK, no_init_weights():
            loading.set()
            done.wait(10)

    def build():
        built["model"] = build_model(settings, TINY["vocab_size"])

    loader = threading.Thread(target=another_load)
    loader.start()
    assert loading.wait(10)
    builder = threading.Thread(target=build)
    builder.start()
    builder.join(1.0)
    waited = builder.is_alive()  # still waiting for the load to end
    done.set()
    builder.join(10)
    loader.join(10)
    beside = built["model"].state_dict()
    assert all(torch.equal(alone[name], beside[name]) for name in alone)
    assert waited
