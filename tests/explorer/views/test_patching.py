"""explorer.views.patching: activation patching, checked against forward hooks on the model's own modules (no
recording), on the shipped main model, on every tiny checkpoint and on a converted GPT-2."""

import threading

import numpy as np
import pytest
import torch

from benchmarks.gpt2_reference import gpt2_like
from explorer.views import patching
from explorer.core.inputs import InputProblem
from explorer.views.patching import GRIDS, Patch, activation_patching, change_one_word, patched_logits, run_batched, \
    swap_repeated_half
from explorer.views.forward_pass import recorded_pass
from support.fixtures_checkpoints import checkpoint_config, train_tokenizer
from modeling import ScratchTransformerForCausalLM, Site
from modeling.convert import causal_lm_from_gpt2
from support.shipped import SHIPPED_ROOT, load, shipped

TOLERANCE = 1e-5  # normalised metric, float32
MAIN = "shakespeare-main"


@pytest.fixture(scope="module")
def main():
    return shipped(MAIN)


@pytest.fixture(scope="module")
def default_result(main):
    model, tokenizer = main
    corrupted, _ = change_one_word(tokenizer, patching.DEFAULT_CLEAN)
    return activation_patching(model, tokenizer, patching.DEFAULT_CLEAN, corrupted)


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
    """(module, whether the patched tensor is its input) of a grid's site in ``layer``."""
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


def normalised(result, logits):
    ld = patching.logit_difference(logits, result.answer_id, result.wrong_id)
    return ((ld - result.corrupted_metric) / (result.clean_metric - result.corrupted_metric)).numpy()


@pytest.mark.parametrize("grid", ["residual", "attention", "feed_forward"])
def test_patching_every_position_of_a_layer_gives_the_clean_metric(main, default_result, grid):
    """The residual stream entering layer l, at every position, is all that layers l.. read: patched in whole it
    gives the clean run's metric (for the attention and feed-forward outputs, every layer's at once does)."""
    model, tokenizer = main
    corrupted_text, _ = change_one_word(tokenizer, patching.DEFAULT_CLEAN)
    clean, _, ids = runs(model, tokenizer, patching.DEFAULT_CLEAN, corrupted_text)
    every = tuple(range(ids.shape[0]))
    layers = range(model.config.n_layers)
    if grid == "residual":
        rows = [[Patch(GRIDS[grid].site(layer), every)] for layer in layers]
    else:
        rows = [[Patch(GRIDS[name].site(layer), every) for layer in layers for name in ("attention", "feed_forward")]]
    values = {patch.site: clean.recording[patch.site] for row in rows for patch in row}
    assert np.allclose(normalised(default_result, run_batched(model, ids, rows, values)), 1.0, atol=TOLERANCE, rtol=0)
    heads = [[Patch(Site("decoder", layer, "self", "heads"), every, h) for h in range(model.config.n_heads)]
             for layer in layers]
    heads_and_ffn = [sum(heads, []) + [Patch(GRIDS["feed_forward"].site(layer), every) for layer in layers]]
    values = {patch.site: clean.recording[patch.site] for patch in heads_and_ffn[0]}
    assert abs(normalised(default_result, run_batched(model, ids, heads_and_ffn, values))[0] - 1.0) < TOLERANCE


def test_patching_nothing_gives_the_corrupted_metric(main, default_result):
    """No patch, in a batch from position 0 and from a cached prefix, is the corrupted run; so is any patch before
    the first changed token (a causal model's clean and corrupted runs agree there)."""
    model, tokenizer = main
    corrupted_text, _ = change_one_word(tokenizer, patching.DEFAULT_CLEAN)
    clean, corrupted, ids = runs(model, tokenizer, patching.DEFAULT_CLEAN, corrupted_text)
    assert default_result.corrupted_metric == pytest.approx(
        float(patching.logit_difference(corrupted.logits[-1], default_result.answer_id, default_result.wrong_id)), abs=0)
    for start in (0, 5, ids.shape[0] - 1):
        assert np.allclose(normalised(default_result, patched_logits(model, ids, [[], []], {}, start)), 0.0,
                           atol=TOLERANCE, rtol=0)
    first = default_result.changed[0]
    assert first > 0
    for name in ("residual", "attention", "feed_forward"):
        assert np.abs(default_result.grids[name].values[:, :first]).max() < TOLERANCE


@pytest.mark.parametrize("grid, cells", [("residual", [(0, 8), (3, 8), (4, 9), (5, -1)]),
                                         ("heads", [(39, 0), (39, 1), (24, 0), (0, 1)]),
                                         ("attention", [(3, 9), (4, -1)]),
                                         ("feed_forward", [(2, 8), (5, -1)])])
def test_one_cell_equals_a_forward_hook_that_overwrites_that_tensor(main, default_result, grid, cells):
    model, tokenizer = main
    corrupted_text, _ = change_one_word(tokenizer, patching.DEFAULT_CLEAN)
    values = default_result.grids[grid].values
    for row, column in cells:
        column = column % values.shape[1]
        by_hook = cell_by_hook(model, tokenizer, default_result, grid, row, column, patching.DEFAULT_CLEAN, corrupted_text)
        assert values[row, column] == pytest.approx(by_hook, abs=TOLERANCE), (grid, row, column)


def test_the_shared_model_is_unchanged(main):
    model, tokenizer = main
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    ids = tokenizer("Tell the duke of Norfolk", return_tensors="pt").input_ids
    with torch.inference_mode():
        plain = model(input_ids=ids).logits
    corrupted, _ = change_one_word(tokenizer, patching.DEFAULT_CLEAN)
    activation_patching(model, tokenizer, patching.DEFAULT_CLEAN, corrupted, sites=["heads", "residual"])
    after = model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())
    with torch.inference_mode():
        assert torch.equal(model(input_ids=ids).logits, plain)
    assert not model.training


def test_cells_top_tokens_are_the_patched_runs_own(main, default_result):
    """A clicked cell shows its patched run's top 5: the same as that one patch run alone."""
    model, tokenizer = main
    corrupted_text, _ = change_one_word(tokenizer, patching.DEFAULT_CLEAN)
    clean, _, ids = runs(model, tokenizer, patching.DEFAULT_CLEAN, corrupted_text)
    site = GRIDS["residual"].site(4)
    alone = patched_logits(model, ids, [[Patch(site, (9,))]], {site: clean.recording[site]})[0].softmax(-1).topk(5)
    top = default_result.cell_top("residual", 4, 9)
    assert [label for label, _ in top] == patching.token_labels(tokenizer, alone.indices)
    assert np.allclose([p for _, p in top], alone.values.numpy(), atol=1e-6)


def test_json_has_the_metrics_and_one_normalised_grid_per_site(default_result, main):
    model, _ = main
    out = default_result.to_json()
    n_layers, n_heads, length = model.config.n_layers, model.config.n_heads, len(default_result.tokens)
    assert out["clean_metric"] == default_result.clean_metric and out["corrupted_metric"] == default_result.corrupted_metric
    for name in ("residual", "attention", "feed_forward"):
        assert np.array(out[name]).shape == (n_layers, length) and len(out[f"{name}_columns"]) == length
    assert np.array(out["heads"]).shape == (n_layers * n_heads, 2) and out["heads_rows"][39] == "L4.H7"
    assert out["heads_columns"] == ["every position", "last position"]


# ----------------------------------------------------------------------------------------------
# The default example teaches: the information moves as the issue says, on the shipped checkpoint
# ----------------------------------------------------------------------------------------------


def test_default_example_shows_the_induction_circuit(default_result):
    """Residual: the corrupted name's last token carries it through layers 0-3, the token after it at layer 4
    (moved there by layer 3's previous-token head), the last position at layer 5 (copied by L4.H7). Heads: L4.H7
    alone, patched at the last position only, restores most of it; L3.H0 is the next head at every position."""
    r = default_result
    residual, heads = r.grids["residual"].values, r.grids["heads"].values
    name_end, after, last = r.changed[-1], r.changed[-1] + 1, len(r.tokens) - 1
    assert r.answer == "␣send" and r.clean_top[0][0] == "␣send"
    assert r.corrupted_top[0][0] != "␣send"
    assert residual[:4, name_end].min() > 0.8 and residual[5, name_end] < 0.1
    assert residual[4, after] > 0.8 and residual[:3, after].max() < 0.2
    assert residual[5, last] > 0.8 and residual[:5, last].max() < 0.2
    rows = r.grids["heads"].rows
    order_all = [rows[i] for i in np.argsort(-heads[:, 0])]
    order_last = [rows[i] for i in np.argsort(-heads[:, 1])]
    assert order_all[:2] == ["L4.H7", "L3.H0"] and heads[rows.index("L3.H0"), 0] > 0.3
    assert order_last[0] == "L4.H7" and heads[rows.index("L4.H7"), 1] > 0.8
    assert np.sort(heads[:, 1])[-2] < 0.2  # at the last position no other head does much
    attention = r.grids["attention"].values
    assert attention[3, after] == attention[:, after].max() and attention[4, last] > 0.8


def test_the_default_is_typical_of_texts_of_its_kind(main):
    """On the spread texts too, L4.H7 leads at the last position and L3.H0 ranks in the top 3 at every position."""
    model, tokenizer = main
    l3h0_ranks, l4h7_last, leaders = [], [], []
    for text in patching.SPREAD_TEXTS:
        corrupted, _ = change_one_word(tokenizer, text)
        r = activation_patching(model, tokenizer, text, corrupted, sites=["heads"])
        heads, rows = r.grids["heads"].values, r.grids["heads"].rows
        l3h0_ranks.append([rows[i] for i in np.argsort(-heads[:, 0])].index("L3.H0"))
        l4h7_last.append(heads[rows.index("L4.H7"), 1])
        leaders.append(rows[int(np.argmax(heads[:, 1]))])
    assert max(l3h0_ranks) <= 2, l3h0_ranks
    assert set(leaders) == {"L4.H7"}, leaders
    assert min(l4h7_last) > 0.6 and np.median(l4h7_last) > 0.9, l4h7_last


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
    clean, _, ids = runs(model, tokenizer, TINY_TEXT, corrupted)
    site = GRIDS["residual"].site(model.config.n_layers - 1)
    whole = [[Patch(site, tuple(range(ids.shape[0])))]]
    assert normalised(result, run_batched(model, ids, whole, {site: clean.recording[site]}))[0] == pytest.approx(1.0, abs=1e-4)
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
        activation_patching(model, tokenizer, TINY_TEXT, TINY_TEXT, sites="feed_forward")


def test_an_encoder_decoder_is_refused_with_the_reason(tiny_checkpoints):
    model, tokenizer = load(tiny_checkpoints, "folio-to-modern")
    with pytest.raises(InputProblem, match="decoder-only"):
        activation_patching(model, tokenizer, TINY_TEXT, TINY_TEXT)


# ----------------------------------------------------------------------------------------------
# Bad input, and requests at once
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("clean, corrupted, answer, wrong, sites, message", [
    (patching.DEFAULT_CLEAN, "Tell the duke of Norfolk", "", "", None, "same number of tokens.*clean text is 30 tokens, the corrupted text 7"),
    ("", "anything", "", "", None, "Type a clean text first: the box is empty"),
    (patching.DEFAULT_CLEAN, "   ", "", "", None, "Type a corrupted text first"),
    (patching.DEFAULT_CLEAN, None, "", "", None, "Type a corrupted text first"),
    (patching.DEFAULT_CLEAN, "CORRUPT", " Norfolk", "", None, "answer must be exactly one token.*is 3 tokens"),
    (patching.DEFAULT_CLEAN, "CORRUPT", " send", " send", None, "same token"),
    (patching.DEFAULT_CLEAN, patching.DEFAULT_CLEAN, "", "", None, "same tokens: there is nothing to patch"),
    (patching.DEFAULT_CLEAN, "CORRUPT", "", "", ["residual", "neurons"], "`neurons` is not one of them"),
    (patching.DEFAULT_CLEAN, "CORRUPT", "", "", 7, "Sites: any of residual, heads, attention, feed_forward; got a number"),
    ("the " * 200, "the " * 200, "", "", None, "is 201 tokens; activation patching reads at most 128 tokens"),
])
def test_bad_input_is_refused_with_what_is_allowed(main, clean, corrupted, answer, wrong, sites, message):
    model, tokenizer = main
    if corrupted == "CORRUPT":
        corrupted, _ = change_one_word(tokenizer, clean)
    with pytest.raises(InputProblem, match=message):
        activation_patching(model, tokenizer, clean, corrupted, answer, wrong, sites)


def test_requests_at_once_never_mix_their_patches(main):
    """Two requests with different corruptions in threads, three times over: each equals its result alone."""
    model, tokenizer = main
    requests = [(patching.DEFAULT_CLEAN, change_one_word(tokenizer, patching.DEFAULT_CLEAN)[0]),
                (patching.SPREAD_TEXTS[1], change_one_word(tokenizer, patching.SPREAD_TEXTS[1])[0])]
    alone = [activation_patching(model, tokenizer, *r, sites=["residual", "heads"]).grids for r in requests]
    results, errors = {}, []

    def ask(i, key):
        try:
            results[key] = activation_patching(model, tokenizer, *requests[i], sites=["residual", "heads"]).grids
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=ask, args=(i % 2, i)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for key, grids in results.items():
        for name in ("residual", "heads"):
            assert np.allclose(grids[name].values, alone[key % 2][name].values, atol=1e-6, rtol=0)


# ----------------------------------------------------------------------------------------------
# Making a corrupted copy
# ----------------------------------------------------------------------------------------------


def test_change_one_word_changes_the_earlier_copy_and_keeps_the_length(main):
    _, tokenizer = main
    corrupted, note = change_one_word(tokenizer, patching.DEFAULT_CLEAN)
    assert corrupted.endswith("Tell the duke of Norfolk") and "duke of Norfolk sends" not in corrupted
    assert len(tokenizer(corrupted).input_ids) == len(tokenizer(patching.DEFAULT_CLEAN).input_ids)
    assert "Norfolk" in note
    named, _ = change_one_word(tokenizer, patching.DEFAULT_CLEAN, "Warwick")
    assert "Warwick" not in named and named.count("Norfolk") == 2
    with pytest.raises(InputProblem, match="is not in the text"):
        change_one_word(tokenizer, patching.DEFAULT_CLEAN, "Hamlet")


def test_swap_repeated_half_keeps_every_word_but_not_their_order(main):
    _, tokenizer = main
    text = "Thou art more lovely and more temperate. Thou art more lovely and more temperate."
    corrupted, _ = swap_repeated_half(tokenizer, text)
    assert corrupted.endswith(". Thou art more lovely and more temperate.")
    assert corrupted.startswith("art Thou lovely more more and temperate")
    assert sorted(corrupted.split()) == sorted(text.split())
    assert len(tokenizer(corrupted).input_ids) == len(tokenizer(text).input_ids)
    with pytest.raises(InputProblem, match="at least four words"):
        swap_repeated_half(tokenizer, "Hello there")


# ----------------------------------------------------------------------------------------------
# The endpoint, through gradio_client
# ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shipped_client(client):
    """The app's client, the app reading the shipped checkpoints for this module (it reads the folder per request)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SCRATCH_CHECKPOINTS", str(SHIPPED_ROOT))
        yield client


def test_the_endpoint_answers_with_the_json_and_a_figure_per_grid_asked(shipped_client, default_result):
    residual, heads, attention, feed_forward, numbers, explained, cell, cell_line, line = shipped_client.predict(
        MAIN, patching.DEFAULT_CLEAN, patching.DEFAULT_CORRUPTED, "", "", ["residual", "heads"],
        api_name="/activation_patching")
    assert residual is not None and heads is not None and attention is None and feed_forward is None
    assert numbers["clean_metric"] == pytest.approx(default_result.clean_metric, abs=1e-6)
    assert numbers["corrupted_metric"] == pytest.approx(default_result.corrupted_metric, abs=1e-6)
    assert np.allclose(numbers["residual"], default_result.grids["residual"].values, atol=1e-5)
    assert np.array(numbers["heads"]).shape == (48, 2) and "attention" not in numbers
    assert "patched runs in" in line and "L4.H7" in explained
    *_, numbers, _, _, _, line = shipped_client.predict(
        MAIN, patching.DEFAULT_CLEAN, "Tell the <b>duke</b>", "", "", None, api_name="/activation_patching")
    assert numbers is None and line.startswith("⚠️ The clean and corrupted texts must have the same number of tokens")
