"""Recording how a model learns: the copying probes, the snapshots a run keeps, and the timeline shipped beside it."""

import json
import shutil

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from checkpointing.in_context import (THRESHOLD, attention_weights, head_scores, induction_baseline, induction_probe,
                                      induction_scores_from, previous_token_scores_from, repeat_runs,
                                      repeated_passage_ratio)
from checkpointing.paths import checkpoints_dir
from checkpointing.training_run import TIMELINE_FILE, load_snapshot, measure, read_timeline
from modeling import ScratchTransformerConfig, ScratchTransformerForCausalLM
from training import train
from training.data import TokenBlocks, token_ids
from training.snapshots import VALIDATION_BLOCKS, choose_snapshots, same_weights, validation_loss
from training.tokenization import tokenizer_for

L = 8


def hand_built(query_to_key) -> np.ndarray:
    """(1, 1, 2L, 2L) causal weights with all of query t's weight on key query_to_key(t)."""
    w = np.zeros((1, 1, 2 * L, 2 * L), dtype=np.float32)
    for t in range(2 * L):
        w[0, 0, t, query_to_key(t)] = 1.0
    return w


def test_the_detector_fires_on_a_hand_built_induction_head_and_not_on_other_patterns():
    induction = hand_built(lambda t: t - L + 1 if t >= L else 0)  # the token after the earlier occurrence
    previous = hand_built(lambda t: max(t - 1, 0))
    same = hand_built(lambda t: t)
    assert induction_scores_from(induction, L)[0, 0] == 1.0
    assert induction_scores_from(previous, L)[0, 0] == 0.0 and induction_scores_from(same, L)[0, 0] == 0.0
    assert previous_token_scores_from(previous)[0, 0] == 1.0 and previous_token_scores_from(induction)[0, 0] == 0.0
    uniform = np.tril(np.ones((2 * L, 2 * L), dtype=np.float32))
    uniform = (uniform / uniform.sum(1, keepdims=True))[None, None]
    assert induction_scores_from(uniform, L)[0, 0] == pytest.approx(induction_baseline(L), rel=1e-6)


def test_a_random_model_has_no_induction_head():
    config = ScratchTransformerConfig(vocab_size=258, d_model=64, n_heads=4, n_layers=2, d_ff=256, dropout=0.0,
                                      position_encoding="rope", max_position_embeddings=128)
    torch.manual_seed(0)
    scores = head_scores(ScratchTransformerForCausalLM(config).eval())
    assert scores["induction"].shape == (2, 4)
    assert scores["induction"].max() < 0.1 and scores["previous token"].max() < 0.2, scores


def test_the_probe_is_random_tokens_twice_and_the_score_reads_the_model_attention():
    ids = induction_probe(vocab_size=50, length=L, seed=3)
    assert torch.equal(ids[0, :L], ids[0, L:]) and int(ids.min()) >= 3 and len(set(ids[0, :L].tolist())) > L // 2
    config = ScratchTransformerConfig(vocab_size=50, d_model=32, n_heads=2, n_layers=2, d_ff=64, dropout=0.0)
    model = ScratchTransformerForCausalLM(config).eval()
    with torch.no_grad():
        attentions = model(ids, output_attentions=True).attentions
    by_hand = [[float(np.mean([a[0, h, L + i, i + 1] for i in range(L)])) for h in range(2)] for a in attentions]
    np.testing.assert_allclose(induction_scores_from(attention_weights(model, ids), L), by_hand, rtol=1e-6)


def test_repeat_runs_copies_runs_of_varying_length():
    generator = torch.Generator().manual_seed(0)
    offsets, copied = set(), []
    for _ in range(50):
        sequence = torch.arange(1000, 1128)  # every token unique, so a copy shows as a repeated id
        out = repeat_runs(sequence, 0.5, generator)
        copied.append(float((out != sequence).float().mean()))
        for t in range(len(out)):
            earlier = (out[:t] == out[t]).nonzero()
            if len(earlier):
                offsets.add(t - int(earlier[0]))
    assert len(offsets) > 20 and 0.3 < np.mean(copied) <= 0.5
    with pytest.raises(ValueError, match="at most every other token"):
        repeat_runs(torch.arange(10), 0.6)


def test_the_repeated_passage_ratio_is_second_copy_loss_over_first():
    config = ScratchTransformerConfig(vocab_size=50, d_model=32, n_heads=2, n_layers=1, d_ff=64, dropout=0.0)
    torch.manual_seed(1)
    model = ScratchTransformerForCausalLM(config).eval()
    passages = [[5, 9, 11, 7, 30], [8, 8, 12, 40, 3]]
    ids = torch.tensor([p + p for p in passages])
    with torch.no_grad():
        logp = model(ids).logits.log_softmax(-1)
    nll = -logp[:, :-1].gather(-1, ids[:, 1:, None])[..., 0]
    assert repeated_passage_ratio(model, passages) == pytest.approx(float(nll[:, 4:].mean() / nll[:, :4].mean()), rel=1e-5)


def records_with_a_jump() -> list[dict]:
    """Fake records every 50 steps to 3000: the best induction score jumps from 0.05 to 0.9 between 1500 and 1700."""
    records = []
    for step in range(0, 3001, 50):
        score = 0.05 if step < 1500 else 0.9 if step > 1700 else 0.05 + 0.85 * (step - 1500) / 200
        records.append({"step": step, "induction": [[score]], "repeated_passage_ratio": 1 - score / 2,
                        "validation_loss": 3.0 - step / 3000})
    return records


def test_snapshots_are_chosen_densest_where_the_figures_change():
    records = records_with_a_jump()
    chosen = [r["step"] for r in choose_snapshots(records, 12)]
    assert len(chosen) == 12 and chosen[0] == 0 and chosen[-1] == 3000 and chosen == sorted(set(chosen))
    in_jump = [s for s in chosen if 1500 <= s <= 1700]
    assert len(in_jump) >= 3, chosen  # 7% of the steps hold a quarter of the snapshots or more
    assert choose_snapshots(records[:5], 12) == records[:5]


def run_tiny_timeline(tmp_path, max_steps: int, resume: bool = False):
    threads = torch.get_num_threads()
    try:
        train.main(["--preset", "tiny-timeline", "--output-dir", str(tmp_path / "out"), "--work-dir",
                    str(tmp_path / "work"), "--max-steps", str(max_steps), "--threads", "1"]
                   + (["--resume"] if resume else []))
    finally:
        torch.set_num_threads(threads)
    return read_timeline(tmp_path / "out")


@pytest.fixture(scope="module")
def tiny_timeline(corpus, tmp_path_factory):
    """tiny-timeline trained 20 steps, then resumed to 30 (a snapshot every 10 steps, 3 shipped)."""
    tmp_path = tmp_path_factory.mktemp("timeline")
    run_tiny_timeline(tmp_path, 20)
    return tmp_path, run_tiny_timeline(tmp_path, 30, resume=True)


def test_a_run_ships_its_snapshots_and_every_figure_equals_a_measurement_of_the_snapshot(tiny_timeline):
    folder, timeline = tiny_timeline[0] / "out", tiny_timeline[1]
    snapshots = timeline["snapshots"]
    assert [s["step"] for s in snapshots][0] == 0 and snapshots[-1]["step"] == 30 and len(snapshots) == 3
    assert [s["tokens"] for s in snapshots] == [s["step"] * 8 * 32 for s in snapshots]  # batch 8 x 32 tokens
    assert snapshots[0]["train_loss"] is None and all(s["train_loss"] > 0 for s in snapshots[1:])
    config = ScratchTransformerConfig.from_pretrained(folder)
    for snapshot in snapshots:
        again = measure(load_snapshot(folder, snapshot["file"], config), timeline["probes"])
        np.testing.assert_allclose(again["induction"], snapshot["induction"], atol=1e-5)
        np.testing.assert_allclose(again["previous_token"], snapshot["previous_token"], atol=1e-5)
        assert again["repeated_passage_ratio"] == pytest.approx(snapshot["repeated_passage_ratio"], abs=1e-5)
    final = AutoModelForCausalLM.from_pretrained(folder).eval()  # the folder is an ordinary checkpoint too
    last = load_snapshot(folder, snapshots[-1]["file"], config).state_dict()
    for name, weight in final.state_dict().items():  # the last snapshot is the final model, stored as float16
        assert torch.equal(weight.half().float(), last[name]), name


def test_the_last_snapshot_is_the_model_file_where_the_model_is_stored_as_float16(tiny_timeline, tmp_path):
    """tiny-timeline stores float32 weights, so its last snapshot is a file of its own; stored as float16 (as the
    shipped runs are), the model file holds the same tensors and the timeline names it instead of a copy."""
    folder = tiny_timeline[0] / "out"
    last = tiny_timeline[1]["snapshots"][-1]["file"]
    config = ScratchTransformerConfig.from_pretrained(folder)
    assert last.startswith("snapshots/") and not same_weights(folder, last, "model.safetensors", config)
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    model = AutoModelForCausalLM.from_pretrained(copy, dtype=torch.float16)
    model.save_pretrained(copy)
    assert same_weights(copy, last, "model.safetensors", config)
    assert not same_weights(copy, tiny_timeline[1]["snapshots"][0]["file"], "model.safetensors", config)


def test_resuming_keeps_the_records_of_the_first_run_and_records_the_rest(tiny_timeline):
    work = tiny_timeline[0] / "work" / "timeline"
    records = [json.loads(line) for line in (work / "records.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [0, 10, 20, 30]
    curve = json.loads((work / "train_curve.json").read_text())
    assert [step for step, _ in curve] == [10, 20, 30]
    assert json.loads((tiny_timeline[0] / "out" / TIMELINE_FILE).read_text())["train_curve"] == curve


SHIPPED_RUNS = {"timeline-repeats": 20, "timeline-plain": 5}  # each shipped recorded run, and the fewest snapshots


@pytest.mark.parametrize("name", SHIPPED_RUNS)
def test_every_figure_of_a_shipped_run_equals_a_measurement_of_its_snapshot(name):
    folder = checkpoints_dir() / name
    timeline = read_timeline(folder)
    config = ScratchTransformerConfig.from_pretrained(folder)
    assert len(timeline["snapshots"]) >= SHIPPED_RUNS[name]
    for snapshot in timeline["snapshots"]:
        again = measure(load_snapshot(folder, snapshot["file"], config), timeline["probes"])
        np.testing.assert_allclose(again["induction"], snapshot["induction"], atol=1e-5)
        np.testing.assert_allclose(again["previous_token"], snapshot["previous_token"], atol=1e-5)
        assert again["repeated_passage_ratio"] == pytest.approx(snapshot["repeated_passage_ratio"], abs=1e-5)
    assert timeline["snapshots"][-1]["file"] == "model.safetensors"  # the final model is the last snapshot
    AutoModelForCausalLM.from_pretrained(folder)  # and loads as any checkpoint does


@pytest.mark.parametrize("name", SHIPPED_RUNS)
def test_the_validation_losses_of_a_shipped_run_are_its_snapshots_own(name, corpus):
    """The first, a middle and the last snapshot, on the 32 validation blocks the recorder measured."""
    folder = checkpoints_dir() / name
    timeline = read_timeline(folder)
    config = ScratchTransformerConfig.from_pretrained(folder)
    ids = token_ids("validation", tokenizer_for("bytes"))
    blocks = TokenBlocks(ids, timeline["run"]["context_length"], VALIDATION_BLOCKS)
    blocks = torch.stack([blocks[i]["input_ids"] for i in range(len(blocks))])
    snapshots = timeline["snapshots"]
    for snapshot in (snapshots[0], snapshots[len(snapshots) // 2], snapshots[-1]):
        model = load_snapshot(folder, snapshot["file"], config)
        assert validation_loss(model, blocks) == pytest.approx(snapshot["validation_loss"], abs=1e-5)


def test_the_recorded_run_shows_the_phase_change_and_the_control_does_not():
    """timeline-repeats: no induction head at the start, one at the end, formed within 200 steps (the phase change),
    with a previous-token head in the layer before it; the second copy of a passage then costs under half the first.
    timeline-plain, the same model on the plays alone: no head ever reaches the threshold."""
    repeats, plain = (read_timeline(checkpoints_dir() / name)["snapshots"] for name in SHIPPED_RUNS)
    best = [float(np.max(s["induction"])) for s in repeats]
    assert best[0] < 0.1 and best[-1] >= 0.3
    formed = next(i for i, b in enumerate(best) if b >= THRESHOLD)
    assert repeats[formed]["step"] - repeats[formed - 1]["step"] <= 200 and best[formed - 1] < 0.1
    layer, _ = np.unravel_index(np.argmax(repeats[-1]["induction"]), np.shape(repeats[-1]["induction"]))
    assert layer == 1 and np.max(repeats[-1]["previous_token"][0]) >= THRESHOLD
    assert repeats[0]["repeated_passage_ratio"] > 0.95 and repeats[-1]["repeated_passage_ratio"] < 0.5
    assert all(float(np.max(s["induction"])) < THRESHOLD for s in plain)
    assert plain[-1]["repeated_passage_ratio"] > 0.95
