"""explorer.views.experiment: the encoding experiment's tables read results.json's numbers, rank the encodings, say
which gaps are larger than seed noise, and compute the published ratios from the papers' perplexities."""

import json

import pytest

from explorer.views import experiment
from support.fixtures_checkpoints import build_checkpoints
from training.evaluate import PUBLISHED


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    return json.loads((build_checkpoints(tmp_path_factory.mktemp("ckpt")) / "results.json").read_text())


def stats(mean, spread):
    return {"bits_per_char": {"mean": mean, "spread": spread, "n": 2}}


def test_gaps_are_judged_against_the_larger_seed_spread():
    section = {"encodings": {"a": stats(2.00, 0.016), "b": stats(2.0135, 0.004), "c": stats(2.05, 0.01),
                             "d": stats(2.065, 0.01)}}
    assert experiment.ranked(section) == ["a", "b", "c", "d"]
    a_b, b_c, c_d = experiment.separations(section)
    assert (a_b.gap, a_b.noise) == (pytest.approx(0.0135), 0.016) and a_b.verdict.startswith("not larger than seed noise")
    assert b_c.gap == pytest.approx(0.0365) and b_c.noise == 0.01 and b_c.verdict.startswith("more than twice")
    assert c_d.gap == pytest.approx(0.015) and c_d.verdict.startswith("larger than seed noise, but less than twice")


def test_published_ratios_divide_by_the_perplexity_at_the_training_length():
    press = experiment.published_ratios(PUBLISHED["press2022_alibi"])
    assert press["alibi"] == {1012: pytest.approx(18.73 / 19.73), 2512: pytest.approx(18.41 / 19.73)}
    assert press["sinusoidal"][2512] == pytest.approx(132.41 / 20.05)
    kazemnejad = experiment.published_ratios(PUBLISHED["kazemnejad2023_nope"])
    assert kazemnejad["rope"][1400] == pytest.approx(147.0 / 3.66) and kazemnejad["none"][1800] == pytest.approx(39.4 / 3.75)


def test_the_seed_table_shows_every_seed_and_the_mean_of_results_json(recorded):
    section = recorded["experiment"]
    table = experiment.seeds_table(section)
    rows = {line.split(" | ")[0].strip("|* "): line for line in table.splitlines()[2:]}
    assert list(rows) == experiment.ranked(section)
    for encoding, entry in section["encodings"].items():
        cells = [c.strip() for c in rows[encoding].strip("|").split("|")]
        runs = [entry["runs"][str(seed)]["bits_per_char"] for seed in section["seeds"]]
        assert cells[1:5] == [f"{sum(runs) / 2:.4f}", f"{max(runs) - min(runs):.4f}", *(f"{v:.4f}" for v in runs)]
        for cell, n in zip(cells[5:], experiment.context_and_longer(entry)[1]):
            ratios = [entry["runs"][str(seed)]["perplexity_ratio"][n] for seed in section["seeds"]]
            expected = "n/a" if None in ratios else f"{sum(ratios) / 2:.3f} ({min(ratios):.3f}–{max(ratios):.3f})"
            assert cell == expected, (encoding, n)


def test_the_comparison_puts_our_mean_ratio_beside_each_papers(recorded):
    table = experiment.published_table(recorded["experiment"], recorded["published"], "our setup")
    header, _, *rows = table.split("\n\n")[0].splitlines()
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert columns[:3] == ["encoding", "ours ×2", "ours ×4"] and "Press 2022 ×1.98" in columns and "Kazemnejad 2023 ×1.76" in columns
    alibi = next([c.strip() for c in row.strip("|").split("|")] for row in rows if "alibi" in row)
    ours = recorded["experiment"]["encodings"]["alibi"]["perplexity_ratio"]["128"]["mean"]
    assert alibi[1] == f"{ours:.2f}" and alibi[columns.index("Press 2022 ×4.91")] == f"{18.41 / 19.73:.2f}"
    assert "- ours: our setup, trained at L = 64 tokens" in table and "WikiText-103" in table


def test_without_results_the_view_says_how_to_get_them():
    assert "python -m training.evaluate" in experiment.experiment_markdown({}, {})


def test_binned_curve_averages_each_run_of_positions_and_keeps_the_remainder():
    curve = [float(p) for p in range(1, 40)]  # positions 1..39
    bins = experiment.binned_curve(curve, width=16)
    assert bins == [(1, 16, 8.5), (17, 32, 24.5), (33, 39, 36.0)]
