"""explorer/views/patching: the result of activation patching (its JSON, what the default example teaches), the
checks of its input, requests at once, the corrupted copies of a text, and the endpoint."""

import threading

import numpy as np
import pytest

from explorer.core.inputs import InputProblem
from explorer.views.patching.analysis import activation_patching
from explorer.views.patching.texts import DEFAULT_CLEAN, DEFAULT_CORRUPTED, SPREAD_TEXTS, change_one_word, swap_repeated_half
from support.shipped import SHIPPED_ROOT

MAIN = "shakespeare-main"


def test_json_has_the_metrics_and_every_grid_normalised(default_patching, main):
    model, _ = main
    out = default_patching.to_json()
    n_layers, n_heads, length = model.config.n_layers, model.config.n_heads, len(default_patching.tokens)
    assert out["clean_metric"] == default_patching.clean_metric and out["corrupted_metric"] == default_patching.corrupted_metric
    for name in ("residual", "attention", "feed_forward"):
        assert np.array(out[name]).shape == (n_layers, length) and len(out[f"{name}_columns"]) == length
    assert np.array(out["heads"]).shape == (n_layers * n_heads, 2) and out["heads_rows"][39] == "L4.H7"
    assert out["heads_columns"] == ["every position", "last position"]


# ----------------------------------------------------------------------------------------------
# The default example teaches: the information moves as the issue says, on the shipped checkpoint
# ----------------------------------------------------------------------------------------------


def test_default_example_shows_the_induction_circuit(default_patching):
    """Residual: the corrupted name's last token carries it through layers 0-3, the token after it at layer 4
    (moved there by layer 3's previous-token head), the last position at layer 5 (copied by L4.H7). Heads: L4.H7
    alone, patched at the last position only, restores most of it; L3.H0 is the next head at every position."""
    r = default_patching
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
    for text in SPREAD_TEXTS:
        corrupted, _ = change_one_word(tokenizer, text)
        r = activation_patching(model, tokenizer, text, corrupted, grids=["heads"])
        heads, rows = r.grids["heads"].values, r.grids["heads"].rows
        l3h0_ranks.append([rows[i] for i in np.argsort(-heads[:, 0])].index("L3.H0"))
        l4h7_last.append(heads[rows.index("L4.H7"), 1])
        leaders.append(rows[int(np.argmax(heads[:, 1]))])
    assert max(l3h0_ranks) <= 2, l3h0_ranks
    assert set(leaders) == {"L4.H7"}, leaders
    assert min(l4h7_last) > 0.6 and np.median(l4h7_last) > 0.9, l4h7_last


# ----------------------------------------------------------------------------------------------
# Bad input, and requests at once
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("clean, corrupted, answer, wrong, grids, message", [
    (DEFAULT_CLEAN, "Tell the duke of Norfolk", "", "", None, "same number of tokens.*clean text is 30 tokens, the corrupted text 7"),
    ("", "anything", "", "", None, "Type a clean text first: the box is empty"),
    (DEFAULT_CLEAN, "   ", "", "", None, "Type a corrupted text first"),
    (DEFAULT_CLEAN, None, "", "", None, "Type a corrupted text first"),
    (DEFAULT_CLEAN, "CORRUPT", " Norfolk", "", None, "answer must be exactly one token.*is 3 tokens"),
    (DEFAULT_CLEAN, "CORRUPT", " send", " send", None, "same token"),
    (DEFAULT_CLEAN, DEFAULT_CLEAN, "", "", None, "same tokens: there is nothing to patch"),
    (DEFAULT_CLEAN, "CORRUPT", "", "", ["residual", "neurons"], "`neurons` is not one of them"),
    (DEFAULT_CLEAN, "CORRUPT", "", "", 7, "Grids: any of residual, heads, attention, feed_forward; got a number"),
    ("the " * 200, "the " * 200, "", "", None, "is 201 tokens; activation patching reads at most 128 tokens"),
])
def test_bad_input_is_refused_with_what_is_allowed(main, clean, corrupted, answer, wrong, grids, message):
    model, tokenizer = main
    if corrupted == "CORRUPT":
        corrupted, _ = change_one_word(tokenizer, clean)
    with pytest.raises(InputProblem, match=message):
        activation_patching(model, tokenizer, clean, corrupted, answer, wrong, grids)


def test_requests_at_once_never_mix_their_patches(main):
    """Two requests with different corruptions in threads, three times over: each equals its result alone."""
    model, tokenizer = main
    requests = [(DEFAULT_CLEAN, change_one_word(tokenizer, DEFAULT_CLEAN)[0]),
                (SPREAD_TEXTS[1], change_one_word(tokenizer, SPREAD_TEXTS[1])[0])]
    alone = [activation_patching(model, tokenizer, *r, grids=["residual", "heads"]).grids for r in requests]
    results, errors = {}, []

    def ask(i, key):
        try:
            results[key] = activation_patching(model, tokenizer, *requests[i], grids=["residual", "heads"]).grids
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
    corrupted, note = change_one_word(tokenizer, DEFAULT_CLEAN)
    assert corrupted.endswith("Tell the duke of Norfolk") and "duke of Norfolk sends" not in corrupted
    assert len(tokenizer(corrupted).input_ids) == len(tokenizer(DEFAULT_CLEAN).input_ids)
    assert "Norfolk" in note
    named, _ = change_one_word(tokenizer, DEFAULT_CLEAN, "Warwick")
    assert "Warwick" not in named and named.count("Norfolk") == 2
    with pytest.raises(InputProblem, match="is not in the text"):
        change_one_word(tokenizer, DEFAULT_CLEAN, "Hamlet")


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


def test_the_endpoint_answers_with_the_json_and_a_figure_per_grid_asked(shipped_client, default_patching):
    (residual, heads, attention, feed_forward, numbers, explained, cell, cell_line, *estimated, estimate_numbers,
     line) = shipped_client.predict(MAIN, DEFAULT_CLEAN, DEFAULT_CORRUPTED, "", "", ["residual", "heads"],
                                    api_name="/activation_patching")
    assert residual is not None and heads is not None and attention is None and feed_forward is None
    assert [plot is not None for plot in estimated] == [True, True, False, False]  # the estimate of each grid asked
    assert set(estimate_numbers["estimate"]) == set(estimate_numbers["agreement"]) == {"residual", "heads"}
    assert np.array(estimate_numbers["estimate"]["heads"]).shape == (48, 2)
    assert -1 <= estimate_numbers["agreement"]["residual"]["correlation"] <= 1
    assert numbers["clean_metric"] == pytest.approx(default_patching.clean_metric, abs=1e-6)
    assert numbers["corrupted_metric"] == pytest.approx(default_patching.corrupted_metric, abs=1e-6)
    assert np.allclose(numbers["residual"], default_patching.grids["residual"].values, atol=1e-5)
    assert np.array(numbers["heads"]).shape == (48, 2) and "attention" not in numbers
    assert "patched runs in" in line and "L4.H7" in explained
    # the estimate against the exact grids: a table, a row per grid asked, its figures the agreement's own
    agreed = estimate_numbers["agreement"]
    assert "| Estimate against exact | correlation | cells of the wrong sign (×) |" in line
    for name, said in (("residual", "Residual stream"), ("heads", "Each head")):
        assert (f"| {said} | {agreed[name]['correlation']:.3f} | {len(agreed[name]['wrong_sign'])} | "
                f"{len(agreed[name]['off_rank'])} |") in line
    assert "| Attention output |" not in line  # not asked
    *_, numbers, _, _, _, _, _, _, _, _, line = shipped_client.predict(
        MAIN, DEFAULT_CLEAN, "Tell the <b>duke</b>", "", "", None, api_name="/activation_patching")
    assert numbers is None and line.startswith("⚠️ The clean and corrupted texts must have the same number of tokens")
