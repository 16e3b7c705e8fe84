"""explorer/views/patching/runs.py and the cells of its grids: every patched run checked against forward hooks on the
model's own modules (no recording), on the shipped main model, on every tiny checkpoint and on a converted GPT-2."""

import numpy as np
import pytest
import torch

from benchmarks.gpt2_reference import gpt2_like
from explorer.core.inputs import InputProblem
from explorer.generation.labels import token_labels
from explorer.views.forward_pass import recorded_pass
from explorer.views.patching.analysis import activation_patching, logit_difference
from explorer.views.patching.grids import GRIDS, Patch
from explorer.views.patching.runs import patched_logits, run_batched
from explorer.views.patching.texts import DEFAULT_CLEAN, change_one_word
from modeling import ScratchTransformerForCausalLM, Site
from modeling.convert import causal_lm_from_gpt2
from support.fixtures_checkpoints import checkpoint_config, train_tokenizer
from support.shipped import load

TOLERANCE = 1e-5  # normalised metric, float32


# ----------------------------------------------------------------------------------------------
# A reference that shares nothing with the recording: forward hooks on the model's modules
# ----------------------------------------------------------------------------------------------


def hooked_last_logits(model, ids: torch.Tensor, module, overwrite, pre: bool = False) -> torch.Tensor:
    """The last position's logits of ``ids`` (T,) with ``overwrite(tensor)`` applied in place to ``module``'s input
    (``pre``) or output; the hook is removed afterwards."""
    def pre_hook(_, args):
        x = args[0].clone()
        overwrite(x)
        return (x, *args[1:])

    def post_hook(_, args, output):
        value = output[0] if isinstance(output, tuple) else output
        value = value.clone()
        overwrite(value)
        return (value, *output[1:]) if isinstance(output, tuple) else value

    handle = module.register_forward_pre_hook(pre_hook) if pre else module.register_forward_hook(post_hook)
    try:
        with torch.inference_mode():
            return model(input_ids=ids[None], use_cache=False).logits[0, -1].float()
    finally:
        handle.remove()


def captured(model, ids: torch.Tensor, module, pre: bool = False) -> torch.Tensor:
    """``module``'s input (``pre``) or output in a plain forward pass over ``ids``, by a hook."""
    seen = []
    hook = (module.register_forward_pre_hook(lambda _, args: seen.append(args[0].clone())) if pre else
            module.register_forward_hook(lambda _, a, out: seen.append((out[0] if isinstance(out, tuple) else out).clone())))
    try:
        with torch.inference_mode():
            model(input_ids=ids[None], use_cache=False)
    finally:
        hook.remove()
    return seen[0]


def module_of(model, grid: str, layer: int):
    """(module, whether the patched tensor is its input) of what a grid patches in ``layer``."""
    block = model.model.decoder.stack.layers[layer]
    return {"residual": (block, True), "heads": (block.self_attn.out_proj, True),
            "attention": (block.self_attn, False), "feed_forward": (block.feed_forward, False)}[grid]


def cell_by_hook(model, tokenizer, result, grid: str, row: int, column: int, clean_text, corrupted_text) -> float:
    """One cell of ``result`` recomputed with hooks: the clean run's tensor captured, the corrupted run's
    overwritten at that cell's positions (for a head: that head's slice of W_O's input), normalised."""
    clean_ids, corrupted_ids = (tokenizer(t, return_tensors="pt").input_ids[0] for t in (clean_text, corrupted_text))
    length, n_heads = clean_ids.shape[0], model.config.n_heads
    layer, head = (row // n_heads, row % n_heads) if grid == "heads" else (row, None)
    module, pre = module_of(model, grid, layer)
    clean_value = captured(model, clean_ids, module, pre)
    if grid == "heads":
        positions = list(range(length)) if column == 0 else [length - 1]
        width = model.config.d_model // n_heads
        columns = slice(head * width, (head + 1) * width)
    else:
        positions, columns = [column], slice(None)

    def overwrite(x):
        x[:, positions, columns] = clean_value[:, positions, columns]

    def ld(logits):
        return float(logits[result.answer_id] - logits[result.wrong_id])

    with torch.inference_mode():
        clean_ld = ld(model(input_ids=clean_ids[None]).logits[0, -1].float())
        corrupted_ld = ld(model(input_ids=corrupted_ids[None]).logits[0, -1].float())
    patched = ld(hooked_last_logits(model, corrupted_ids, module, overwrite, pre))
    return (patched - corrupted_ld) / (clean_ld - corrupted_ld)


# ----------------------------------------------------------------------------------------------
# Correct by construction
# ----------------------------------------------------------------------------------------------


def runs(model, tokenizer, clean_text, corrupted_text):
    clean, corrupted = recorded_pass(model, tokenizer, clean_text), recorded_pass(model, tokenizer, corrupted_text)
    return clean, corrupted, corrupted.read.target_ids


def logits_of(model, corrupted, rows, values):
    """(rows, vocab) last-position logits of the corrupted run with each row's patches (``run_batched``)."""
    return run_batched(model, corrupted.recording, rows, values, lambda logits: (logits,))[0]


def normalised(result, logits):
    ld = logit_difference(logits, result.answer_id, result.wrong_id)
    return ((ld - result.corrupted_metric) / (result.clean_metric - result.corrupted_metric)).numpy()


@pytest.mark.parametrize("grid", ["residual", "attention", "feed_forward"])
def test_patching_every_position_of_a_layer_gives_the_clean_metric(main, default_patching, grid):
    """The residual stream entering layer l, at every position, is all that layers l.. read: patched in whole it
    gives the clean run's metric (for the attention and feed-forward outputs, every layer's at once does)."""
    model, tokenizer = main
    corrupted_text, _ = change_one_word(tokenizer, DEFAULT_CLEAN)
    clean, corrupted, ids = runs(model, tokenizer, DEFAULT_CLEAN, corrupted_text)
    every = tuple(range(ids.shape[0]))
    layers = range(model.config.n_layers)
    if grid == "residual":
        rows = [[Patch(GRIDS[grid].site(layer), every)] for layer in layers]
    else:
        rows = [[Patch(GRIDS[name].site(layer), every) for layer in layers for name in ("attention", "feed_forward")]]
    values = {patch.site: clean.recording[patch.site] for row in rows for patch in row}
    assert np.allclose(normalised(default_patching, logits_of(model, corrupted, rows, values)), 1.0, atol=TOLERANCE, rtol=0)
    heads = [[Patch(Site("decoder", layer, "self", "heads"), every, h) for h in range(model.config.n_heads)]
             for layer in layers]
    heads_and_ffn = [sum(heads, []) + [Patch(GRIDS["feed_forward"].site(layer), every) for layer in layers]]
    values = {patch.site: clean.recording[patch.site] for patch in heads_and_ffn[0]}
    assert abs(normalised(default_patching, logits_of(model, corrupted, heads_and_ffn, values))[0] - 1.0) < TOLERANCE


def test_patching_nothing_gives_the_corrupted_metric(main, default_patching):
    """No patch, in a batch from position 0 and from a cached prefix, is the corrupted run; so is any patch before
    the first changed token (a causal model's clean and corrupted runs agree there)."""
    model, tokenizer = main
    corrupted_text, _ = change_one_word(tokenizer, DEFAULT_CLEAN)
    clean, corrupted, ids = runs(model, tokenizer, DEFAULT_CLEAN, corrupted_text)
    assert default_patching.corrupted_metric == pytest.approx(
        float(logit_difference(corrupted.logits[-1], default_patching.answer_id, default_patching.wrong_id)), abs=0)
    for layer in (0, model.config.n_layers - 1):
        for start in (0, 5, ids.shape[0] - 1):
            plain = patched_logits(model, corrupted.recording, [[], []], {}, layer, start)
            assert np.allclose(normalised(default_patching, plain), 0.0, atol=TOLERANCE, rtol=0)
    first = default_patching.changed[0]
    assert first > 0
    for name in ("residual", "attention", "feed_forward"):
        assert np.abs(default_patching.grids[name].values[:, :first]).max() < TOLERANCE


@pytest.mark.parametrize("grid, cells", [("residual", [(0, 8), (3, 8), (4, 9), (5, -1)]),
                                         ("heads", [(39, 0), (39, 1), (24, 0), (0, 1)]),
                                         ("attention", [(3, 9), (4, -1)]),
                                         ("feed_forward", [(2, 8), (5, -1)])])
def test_one_cell_equals_a_forward_hook_that_overwrites_that_tensor(main, default_patching, grid, cells):
    model, tokenizer = main
    corrupted_text, _ = change_one_word(tokenizer, DEFAULT_CLEAN)
    values = default_patching.grids[grid].values
    for row, column in cells:
        column = column % values.shape[1]
        by_hook = cell_by_hook(model, tokenizer, default_patching, grid, row, column, DEFAULT_CLEAN, corrupted_text)
        assert values[row, column] == pytest.approx(by_hook, abs=TOLERANCE), (grid, row, column)


def test_the_shared_model_is_unchanged(main):
    model, tokenizer = main
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    ids = tokenizer("Tell the duke of Norfolk", return_tensors="pt").input_ids
    with torch.inference_mode():
        plain = model(input_ids=ids).logits
    corrupted, _ = change_one_word(tokenizer, DEFAULT_CLEAN)
    activation_patching(model, tokenizer, DEFAULT_CLEAN, corrupted, grids=["heads", "residual"])
    after = model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
    with torch.inference_mode():
        assert torch.equal(model(input_ids=ids).logits, plain)
    assert not model.training


def test_cells_top_tokens_are_the_patched_runs_own(main, default_patching):
    """A clicked cell shows its patched run's top 5: the same as that one patch run alone."""
    model, tokenizer = main
    corrupted_text, _ = change_one_word(tokenizer, DEFAULT_CLEAN)
    clean, corrupted, ids = runs(model, tokenizer, DEFAULT_CLEAN, corrupted_text)
    site = GRIDS["residual"].site(4)
    alone = patched_logits(model, corrupted.recording, [[Patch(site, (9,))]], {site: clean.recording[site]}, 4, 9)
    alone = alone[0].softmax(-1).topk(5)
    top = default_patching.cell_top("residual", 4, 9)
    assert [label for label, _ in top] == token_labels(tokenizer, alone.indices)
    assert np.allclose([p for _, p in top], alone.values.numpy(), atol=1e-6)


# ----------------------------------------------------------------------------------------------
# Every causal model the app opens
# ----------------------------------------------------------------------------------------------


TINY_TEXT = "Shall I compare thee to a summer's day? Thou art more lovely and more temperate. Shall I compare"


def two_words_changed(model, tokenizer) -> str:
    """TINY_TEXT with a word in its middle and its last word changed to other words of it, keeping the token count,
    where that moves the random model's logit difference of its top two by at least 0.05 (so that normalising divides
    by enough; a random model reads little of its context, so the last word is changed too). The cells between
    the two changes run from a cached prefix; those before the first write what is there."""
    length = len(tokenizer(TINY_TEXT).input_ids)
    words = TINY_TEXT.split(" ")
    middle = len(words) // 2
    ids = tokenizer(TINY_TEXT, return_tensors="pt").input_ids
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[0, -1]
    top = logits.topk(2).indices
    choices = list(dict.fromkeys(w.strip("?.") for w in words))
    for first in choices:
        for last in choices:
            candidate = " ".join(words[:middle] + [first] + words[middle + 1:-1] + [last])
            if first == words[middle] or last == words[-1] or len(tokenizer(candidate).input_ids) != length:
                continue
            with torch.inference_mode():
                other = model(input_ids=tokenizer(candidate, return_tensors="pt").input_ids).logits[0, -1]
            if abs(float((logits[top[0]] - logits[top[1]]) - (other[top[0]] - other[top[1]]))) > 0.05:
                return candidate
    raise AssertionError("no pair of words of the text makes a usable corruption")


def check_model_end_to_end(model, tokenizer):
    corrupted = two_words_changed(model, tokenizer)
    result = activation_patching(model, tokenizer, TINY_TEXT, corrupted)
    first = result.changed[0]
    for grid in result.grids:
        values = result.grids[grid].values
        assert np.isfinite(values).all()
        last_row, last_column = values.shape[0] - 1, values.shape[1] - 1
        cells = [(0, 0), (last_row, 1)] if grid == "heads" else [(0, first), (last_row, first + 1), (last_row, last_column)]
        for row, column in cells:
            assert values[row, column] == pytest.approx(
                cell_by_hook(model, tokenizer, result, grid, row, column, TINY_TEXT, corrupted), abs=1e-4), (grid, row, column)
    clean, corrupted_run, ids = runs(model, tokenizer, TINY_TEXT, corrupted)
    site = GRIDS["residual"].site(model.config.n_layers - 1)
    whole = [[Patch(site, tuple(range(ids.shape[0])))]]
    assert normalised(result, logits_of(model, corrupted_run, whole, {site: clean.recording[site]}))[0] == pytest.approx(1.0, abs=1e-4)
    return result


@pytest.mark.parametrize("encoding", ["sinusoidal", "learned", "rope", "alibi", "none"])
def test_every_tiny_checkpoint(tiny_checkpoints, encoding):
    """Random tiny models: tolerance 1e-4 (their logit differences move by about 0.1, so the normalised error is
    larger)."""
    check_model_end_to_end(*load(tiny_checkpoints, f"shakespeare-{encoding}"))


def test_a_converted_gpt2():
    tokenizer = train_tokenizer()
    torch.manual_seed(3)
    gpt2 = gpt2_like(checkpoint_config(tokenizer, "learned", d_model=64, n_heads=4, n_layers=3, d_ff=128,
                                       initializer_range=0.2), positions=64).eval()
    check_model_end_to_end(causal_lm_from_gpt2(gpt2).eval(), tokenizer)


def test_an_attention_only_model_has_every_grid_but_the_feed_forward_and_says_why():
    """feed_forward="none": the feed-forward grid is left out with a notice (the other grids checked by hooks, as for
    every model); asked for alone, it is refused naming the grids the model has."""
    tokenizer = train_tokenizer()
    torch.manual_seed(0)
    model = ScratchTransformerForCausalLM(checkpoint_config(tokenizer, "rope", feed_forward="none",
                                                            initializer_range=0.2)).eval()
    result = check_model_end_to_end(model, tokenizer)
    assert list(result.grids) == ["residual", "heads", "attention"]
    assert any("feed-forward grid is left out" in notice and "attention only" in notice for notice in result.notices)
    with pytest.raises(InputProblem, match=r"attention only.*Pick any of residual, heads, attention\."):
        activation_patching(model, tokenizer, TINY_TEXT, TINY_TEXT, grids="feed_forward")


def test_an_encoder_decoder_is_refused_with_the_reason(tiny_checkpoints):
    model, tokenizer = load(tiny_checkpoints, "folio-to-modern")
    with pytest.raises(InputProblem, match="decoder-only"):
        activation_patching(model, tokenizer, TINY_TEXT, TINY_TEXT)


def test_progress_reports_the_work_done_weighted_by_what_each_batch_runs(main):
    """The deadline reads this pace: batches from the lowest layers run more layers, so each counts its layer-tokens,
    not one batch each. Every report: (batches done, batches, fraction of the work), ending at 1."""
    from explorer.views.patching.runs import batches_of

    model, tokenizer = main
    corrupted_text, _ = change_one_word(tokenizer, DEFAULT_CLEAN)
    clean, corrupted, ids = runs(model, tokenizer, DEFAULT_CLEAN, corrupted_text)
    n_layers, length = model.config.n_layers, len(ids)
    site = lambda layer: Site("decoder", layer, None, "input")  # noqa: E731 - the residual stream entering a layer
    rows = [[Patch(site(layer), (position,))] for layer in range(n_layers) for position in range(length)]
    values = {site(layer): clean.recording[site(layer)] for layer in range(n_layers)}
    reports = []
    run_batched(model, corrupted.recording, rows, values, lambda logits: (logits,), lambda *r: reports.append(r),
                chunk_tokens=64, workers=1)
    batches = batches_of(rows, n_layers, length, 64)
    costs = [len(b.rows) * (n_layers - b.layer) * (length - b.position) for b in batches]
    assert [r[:2] for r in reports] == [(done, len(batches)) for done in range(1, len(batches) + 1)]
    np.testing.assert_allclose([r[2] for r in reports], np.cumsum(costs) / sum(costs), rtol=1e-12)
    assert reports[-1][2] == pytest.approx(1.0) and len(batches) > n_layers  # several batches a layer
    first = [r[2] for r, b in zip(reports, batches) if b.layer == 0][-1]
    assert first > sum(1 for b in batches if b.layer == 0) / len(batches)  # layer 0's share of the work > its count
