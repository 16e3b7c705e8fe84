"""Training with the Trainer: a tiny run learns, and two processes (torchrun, gloo) train together."""

import json
import math
import os
import shlex
import signal
import subprocess
import sys

import pytest
import torch
from safetensors import safe_open
from transformers import AutoModelForCausalLM, AutoTokenizer

from checkpointing.loading import load_checkpoint
from checkpointing.paths import data_dir
from modeling import ScratchTransformerConfig, ScratchTransformerForCausalLM
from support.tiny_models import tiny_seq2seq
from training import model_card, train
from training.build import build_model
from training.corpus import read_pairs, read_split
from training.data import SpellingPairs, TokenBlocks, WithRepeats
from training.distillation import DistillingTrainer, distillation_loss
from training.float16 import (
    FLOAT16_TOLERANCE,
    store_float16_if_harmless,
    store_weights_as,
    validation_spelling_bits_per_char,
)
from training.presets import PRESETS, TrainSettings
from training.tokenization import tokenizer_for, train_tokenizer


def _train(args: list[str]) -> None:
    """train.main in this process on one thread (a tiny model gains nothing from two, and on a busy
    machine two threads per process made the 60-step run 14x slower); the thread count is restored."""
    threads = torch.get_num_threads()
    try:
        train.main(args + ["--threads", "1"])
    finally:
        torch.set_num_threads(threads)


def _validation_loss(model, tokenizer, blocks: int = 8, length: int = 32) -> float:
    data = TokenBlocks(tokenizer(read_split("validation")[:50_000])["input_ids"], length, blocks)
    ids = torch.stack([data[i]["input_ids"] for i in range(len(data))])
    with torch.no_grad():
        return model(ids, labels=ids).loss.item()


def test_fixed_blocks_are_the_non_overlapping_cuts_of_the_text():
    ids = list(range(103))
    data = TokenBlocks(ids, 10)
    assert len(data) == 10
    assert [data[i]["input_ids"].tolist() for i in (0, 9)] == [ids[0:10], ids[90:100]]
    item = data[3]
    assert item["labels"] is item["input_ids"]  # the model shifts labels itself
    assert len(TokenBlocks(ids, 10, limit=4)) == 4
    with pytest.raises(IndexError):
        data[10]


def test_shifted_blocks_cut_the_text_at_every_shift_and_stay_inside_it():
    """Block i starts at i*L + s, s uniform over 0..L-1: 2000 reads of a 10-token block see all 10 shifts,
    each read is a contiguous slice of the text, and the last block never runs past its end."""
    ids = list(range(100))  # the token at position k is k, so a block's first token is its start
    data = TokenBlocks(ids, 10, shifted=True)
    assert len(data) == 9  # one block fewer than the fixed cut, so that shift 9 still fits
    torch.manual_seed(0)
    shifts = {i: set() for i in range(len(data))}
    for _ in range(2000):
        i = int(torch.randint(len(data), ()))
        block = data[i]["input_ids"].tolist()
        assert block == list(range(block[0], block[0] + 10)) and block[-1] < 100
        shifts[i].add(block[0] - 10 * i)
    assert all(seen == set(range(10)) for seen in shifts.values()), shifts


def test_a_tiny_training_run_lowers_the_validation_loss(corpus, tmp_path):
    tokenizer = train_tokenizer()
    torch.manual_seed(1234)
    untrained = build_model(PRESETS["tiny"].model, tokenizer, 32).eval()
    before = _validation_loss(untrained, tokenizer)
    _train(["--preset", "tiny", "--output-dir", str(tmp_path / "out"), "--work-dir", str(tmp_path / "work"),
            "--max-steps", "60", "--eval-steps", "30", "--eval-examples", "8", "--train-limit", "2000"])
    trained = AutoModelForCausalLM.from_pretrained(tmp_path / "out").eval()
    after = _validation_loss(trained, AutoTokenizer.from_pretrained(tmp_path / "out"))
    assert after < before - 1.0, (before, after)
    summary = json.loads((tmp_path / "out" / "training_summary.json").read_text())
    assert summary["steps"] == 60 and summary["validation_loss"] < before
    files = {p.name for p in (tmp_path / "out").iterdir()}
    assert {"model.safetensors", "config.json", "generation_config.json", "tokenizer.json"} <= files
    assert not any(name.endswith(".bin") for name in files)


def test_resume_continues_from_the_last_checkpoint(corpus, tmp_path):
    """Even after a finished run whose validation loss rose (8 training blocks at a high learning rate overfit),
    so that an earlier checkpoint scored better: --resume picks up at the last step, not the best one."""
    args = ["--preset", "tiny", "--output-dir", str(tmp_path / "out"), "--work-dir", str(tmp_path / "work"),
            "--eval-steps", "20", "--eval-examples", "4", "--train-limit", "8", "--learning-rate", "0.01"]
    _train(args + ["--max-steps", "60"])
    first = json.loads((tmp_path / "work" / "checkpoint-60" / "trainer_state.json").read_text())
    losses = [entry["eval_loss"] for entry in first["log_history"] if "eval_loss" in entry]
    assert len(losses) == 3 and min(losses) < losses[-1], losses  # the case to cover: the last is not the best
    _train(args + ["--max-steps", "80", "--resume"])
    state = json.loads((tmp_path / "work" / "checkpoint-80" / "trainer_state.json").read_text())
    assert state["global_step"] == 80
    resumed = [entry["step"] for entry in state["log_history"] if entry["step"] > 60]
    assert resumed and min(resumed) > 60 and len([e for e in state["log_history"] if "eval_loss" in e]) == 4


def test_a_preset_that_starts_from_a_trained_model_continues_its_weights(corpus, tmp_path):
    """tiny-continued starts from a tiny model: at learning rate 0 its weights stay the tiny model's exactly, its
    config takes the preset's dropout, its curve is the label-smoothed loss (above the plain cross-entropy the
    summary reports, which equals the first run's) and its summary and card name the run it continued."""
    common = ["--eval-examples", "8", "--train-limit", "64"]
    first, second = tmp_path / "tiny", tmp_path / "continued"
    first_args = ["--preset", "tiny", "--output-dir", str(first), "--work-dir", str(tmp_path / "w1"), "--max-steps",
                  "20", "--config", '{"attention_dropout": 0.0}', *common]
    _train(first_args)
    _train(["--preset", "tiny-continued", "--init-from", str(first), "--output-dir", str(second),
            "--work-dir", str(tmp_path / "w2"), "--max-steps", "4", "--eval-steps", "2", "--learning-rate", "0",
            *common])
    with safe_open(first / "model.safetensors", "pt") as a, safe_open(second / "model.safetensors", "pt") as b:
        assert sorted(a.keys()) == sorted(b.keys())
        assert all(torch.equal(a.get_tensor(k), b.get_tensor(k)) for k in a.keys())
    continued = json.loads((second / "config.json").read_text())
    assert json.loads((first / "config.json").read_text())["activation_dropout"] == 0.0
    assert continued["dropout"] == 0.2 and continued["activation_dropout"] == 0.2  # the default follows dropout
    before, after = (json.loads((d / "training_summary.json").read_text()) for d in (first, second))
    assert after["validation_loss"] == pytest.approx(before["validation_loss"], abs=2e-4)  # rounded to 4 places
    assert all(loss > after["validation_loss"] + 0.05 for _, loss in after["validation_curve"]), (after["validation_loss"], after["validation_curve"])
    assert after["started_from"]["preset"] == "tiny" and after["started_from"]["steps"] == 20
    # the command is recorded shell-quoted: pasted into a shell, it gives the run the same arguments (the JSON too)
    assert shlex.split(before["command"]) == ["python", "-m", "training.train", *first_args, "--threads", "1"]
    assert after["settings"]["label_smoothing"] == 0.1
    card = "\n".join(model_card.training_section(after))
    assert (f"started from the `tiny` model of seed {before['seed']}: 20 optimizer steps on {before['device']}, "
            f"{before['wall_clock_seconds']} s, {before['tokens_seen']} tokens seen, validation loss "
            f"{before['validation_loss']}") in card and "label smoothing: 0.1" in card


@pytest.mark.parametrize("preset, init_from, message", [
    ("tiny-continued", None, "starts from a trained tiny model: pass --init-from"),
    ("tiny", "tiny-out", "preset tiny trains from fresh weights"),
    ("tiny-continued", "continued-out", "holds a tiny-continued model; preset tiny-continued starts from a tiny"),
])
def test_init_from_is_required_exactly_where_a_preset_starts_from_a_model_of_the_named_preset(
        corpus, tmp_path, preset, init_from, message):
    for name, kind in (("tiny-out", "tiny"), ("continued-out", "tiny-continued")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "training_summary.json").write_text(json.dumps({"preset": kind}))
    args = ["--preset", preset, "--output-dir", str(tmp_path / "out"), "--work-dir", str(tmp_path / "work")]
    with pytest.raises(SystemExit, match=message.replace("-", "\\-")):
        _train(args + (["--init-from", str(tmp_path / init_from)] if init_from else []))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("shifted", [False, True])
def test_the_distillation_loss_is_cross_entropy_plus_kl_to_the_teachers_mean(shifted):
    """Against torch's own cross_entropy and kl_div on the target tokens (labels -100 are left out; a causal
    model's logits at t are scored against the label at t + 1), to float32 rounding."""
    torch.manual_seed(0)
    logits, labels = torch.randn(3, 7, 11), torch.randint(11, (3, 7))
    labels[0, 4:] = labels[2, 6:] = -100
    teachers = [torch.randn(3, 7, 11) * 2, torch.randn(3, 7, 11)]
    s, y, ts = (logits[:, :-1], labels[:, 1:], [t[:, :-1] for t in teachers]) if shifted else (logits, labels, teachers)
    keep = y != -100
    p_bar = (ts[0][keep].softmax(-1) + ts[1][keep].softmax(-1)) / 2
    kl = torch.nn.functional.kl_div(s[keep].log_softmax(-1), p_bar, reduction="batchmean")
    ce = torch.nn.functional.cross_entropy(s.flatten(0, 1), y.flatten(), ignore_index=-100)
    for weight in (0.0, 0.3, 1.0):
        got = distillation_loss(logits, teachers, labels, weight, shifted)
        assert got.item() == pytest.approx(((1 - weight) * ce + weight * kl).item(), abs=1e-6)
    assert distillation_loss(logits, [logits, logits], labels, 1.0, shifted).item() == pytest.approx(0, abs=1e-6)


@pytest.mark.parametrize("shifted", [False, True])
def test_rows_that_teach_copying_are_not_distilled(shifted):
    """With ``plain``, a row that is the text as it is scores (1 - w) CE + w KL and a row that teaches copying CE
    alone; the loss is their mean over all target tokens. Checked against the unmasked loss on each kind of row
    alone, which is that same per-token mean (float32 rounding)."""
    torch.manual_seed(1)
    logits, labels = torch.randn(4, 9, 13), torch.randint(13, (4, 9))
    labels[1, 5:] = -100
    teachers = [torch.randn(4, 9, 13) * 2]
    plain = torch.tensor([True, False, True, False])
    tokens = (labels[:, 1:] if shifted else labels) != -100
    weight = 0.7
    got = distillation_loss(logits, teachers, labels, weight, shifted, plain)
    text = distillation_loss(logits[plain], [teachers[0][plain]], labels[plain], weight, shifted)
    copies = distillation_loss(logits[~plain], [teachers[0][~plain]], labels[~plain], 0.0, shifted)
    n_text, n_copies = tokens[plain].sum(), tokens[~plain].sum()
    assert got.item() == pytest.approx(((text * n_text + copies * n_copies) / (n_text + n_copies)).item(), abs=1e-6)
    assert got.item() != pytest.approx(distillation_loss(logits, teachers, labels, weight, shifted).item(), abs=1e-3)
    everything = torch.ones(4, dtype=torch.bool)
    assert distillation_loss(logits, teachers, labels, weight, shifted, everything).item() == pytest.approx(
        distillation_loss(logits, teachers, labels, weight, shifted).item(), abs=1e-6)


def test_a_distilling_trainer_sees_which_rows_are_plain_text(tmp_path):
    """WithRepeats(mark=True) says per row whether it is the text as it is (it then equals its block exactly);
    the flag survives the Trainer's batching and the distilling loss uses it: one batch's loss equals
    distillation_loss with the batch's own flags, not the unmasked one."""
    blocks = TokenBlocks(torch.arange(3, 3 + 32 * 40) % 50 + 3, 32)
    torch.manual_seed(0)
    data = WithRepeats(blocks, 64, random_share=0.3, passage_share=0.3, copy_share=0.5, mark=True)
    items = [data[i] for i in range(len(data))]
    flags = [bool(item["plain"]) for item in items]
    assert 0 < sum(flags) < len(flags)
    for i, item in enumerate(items):
        assert torch.equal(item["input_ids"], blocks[i]["input_ids"]) == flags[i]
    assert "plain" not in WithRepeats(blocks, 64, 0.3, 0.3, 0.5)[0]

    config = dict(vocab_size=64, d_model=16, n_heads=2, n_layers=1, d_ff=32, dropout=0.0, max_position_embeddings=32)
    student, teacher = (ScratchTransformerForCausalLM(ScratchTransformerConfig(**config)) for _ in range(2))
    settings = TrainSettings(context_length=32, batch_size=8, max_steps=1, learning_rate=1e-3, warmup_steps=0,
                             eval_steps=50, distill_weight=0.8)
    trainer = DistillingTrainer(model=student, args=train.training_arguments(settings, tmp_path, 0, 1, False),
                                train_dataset=data, eval_dataset=blocks, teachers=[teacher.eval()], distill_weight=0.8)
    batch = next(iter(trainer.get_train_dataloader()))
    assert batch["plain"].dtype == torch.bool and batch["plain"].shape == (8,)
    plain = batch["plain"].clone()
    assert 0 < int(plain.sum()) < 8, "the seeded batch mixes both kinds"
    student.train()
    with torch.no_grad():
        got = trainer.compute_loss(student, dict(batch)).item()
        logits = student(input_ids=batch["input_ids"]).logits
        teacher_logits = teacher(input_ids=batch["input_ids"]).logits
    masked = distillation_loss(logits, [teacher_logits], batch["labels"], 0.8, True, plain).item()
    unmasked = distillation_loss(logits, [teacher_logits], batch["labels"], 0.8, True).item()
    assert got == pytest.approx(masked, abs=1e-5) and got != pytest.approx(unmasked, abs=1e-4)


def _teacher_kl(student_dir, teacher_dir, tokenizer) -> float:
    """Mean KL(teacher || student) over next-token distributions on validation blocks."""
    data = TokenBlocks(tokenizer(read_split("validation")[:50_000])["input_ids"], 32, 8)
    ids = torch.stack([data[i]["input_ids"] for i in range(len(data))])
    student, teacher = (AutoModelForCausalLM.from_pretrained(d).eval() for d in (student_dir, teacher_dir))
    with torch.no_grad():
        log_q, log_p = student(ids).logits.log_softmax(-1), teacher(ids).logits.log_softmax(-1)
    return (log_p.exp() * (log_p - log_q)).sum(-1).mean().item()


def test_a_distilling_preset_moves_the_student_towards_its_teacher(corpus, tmp_path):
    """tiny-distilled (distill_weight 1: the loss is KL to the teachers alone) starts from one tiny model and
    learns from another trained on other data: the student's KL to the teacher falls by more than half, and the
    summary and the model card name the teacher."""
    common = ["--eval-examples", "8", "--max-steps", "30"]
    student, teacher, distilled = tmp_path / "student", tmp_path / "teacher", tmp_path / "distilled"
    _train(["--preset", "tiny", "--output-dir", str(student), "--work-dir", str(tmp_path / "w1"),
            "--train-limit", "64", *common])
    _train(["--preset", "tiny", "--output-dir", str(teacher), "--work-dir", str(tmp_path / "w2"), "--seed", "99",
            "--learning-rate", "0.01", *common])
    (tmp_path / "w3").mkdir()  # a work dir an earlier run left: a run that does not resume starts its clock at 0
    (tmp_path / "w3" / "wall_clock.json").write_text(json.dumps({"seconds": 1e6, "step": 30}))
    _train(["--preset", "tiny-distilled", "--init-from", str(student), "--teachers", str(teacher),
            "--output-dir", str(distilled), "--work-dir", str(tmp_path / "w3"), "--train-limit", "256", *common])
    tokenizer = AutoTokenizer.from_pretrained(student)
    before, after = _teacher_kl(student, teacher, tokenizer), _teacher_kl(distilled, teacher, tokenizer)
    assert after < 0.5 * before, (before, after)
    summary = json.loads((distilled / "training_summary.json").read_text())
    assert [t["seed"] for t in summary["teachers"]] == [99] and summary["started_from"]["seed"] == 1234
    assert summary["settings"]["distill_weight"] == 1.0
    assert summary["wall_clock_seconds"] < 1000
    card = "\n".join(model_card.training_section(summary))
    teacher_run = summary["teachers"][0]
    assert ("distilled (weight 1.0: that share of the loss is KL to the teachers' mean distribution) from 1 model: "
            f"seed 99, {teacher_run['steps']} optimizer steps on {teacher_run['device']}") in card
    assert f"{teacher_run['tokens_seen']} tokens seen" in card


@pytest.mark.parametrize("preset, teachers, message", [
    ("tiny-distilled", [], "this preset distils \\(distill_weight 1.0\\): pass --teachers"),
    ("tiny-continued", ["teacher"], "this preset does not distil"),
    ("tiny-distilled", ["not-a-model"], "not a trained model folder"),
    ("tiny-distilled --distill-weight 1.5", ["teacher"], "must be between 0 and 1 .*got 1.5"),
])
def test_teachers_are_required_exactly_where_a_preset_distils(corpus, tmp_path, preset, teachers, message):
    (tmp_path / "start").mkdir()
    (tmp_path / "start" / "training_summary.json").write_text(json.dumps({"preset": "tiny"}))
    (tmp_path / "not-a-model").mkdir()
    args = ["--preset", *preset.split(), "--init-from", str(tmp_path / "start"), "--output-dir", str(tmp_path / "out"),
            "--work-dir", str(tmp_path / "work")]
    with pytest.raises(SystemExit, match=message):
        _train(args + (["--teachers", *(str(tmp_path / t) for t in teachers)] if teachers else []))
    assert not (tmp_path / "out").exists()


def test_torchrun_two_processes_on_cpu_write_one_checkpoint(corpus, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.getcwd()}
    process = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "training.train",
         "--preset", "tiny", "--output-dir", str(tmp_path / "out"), "--work-dir", str(tmp_path / "work"),
         "--max-steps", "4", "--eval-steps", "4", "--eval-examples", "8", "--train-limit", "256"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=300)
    except BaseException:  # timeout or interrupt: SIGTERM lets the torchrun agent stop its workers too
        process.send_signal(signal.SIGTERM)
        try:
            process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        raise
    assert process.returncode == 0, stderr[-3000:]
    output = stdout + stderr
    for rank in (0, 1):  # both processes trained all 4 steps on their half of each batch
        assert f"rank {rank} of 2: 4 steps, 4 examples per step on this process" in output
    summary = json.loads((tmp_path / "out" / "training_summary.json").read_text())
    assert summary["processes"] == 2 and summary["steps"] == 4
    assert len(list((tmp_path / "out").glob("*.safetensors"))) == 1
    AutoModelForCausalLM.from_pretrained(tmp_path / "out")


def test_weights_stored_as_float16_load_back_as_float32_with_the_same_outputs(tmp_path):
    from safetensors import safe_open

    from modeling import ScratchTransformerConfig, ScratchTransformerForCausalLM

    torch.manual_seed(0)
    config = ScratchTransformerConfig(vocab_size=64, d_model=32, n_heads=2, n_layers=2, d_ff=64,
                                      max_position_embeddings=32)
    model = ScratchTransformerForCausalLM(config).eval()
    model.save_pretrained(tmp_path)
    fp32_bytes = (tmp_path / "model.safetensors").stat().st_size
    store_weights_as(tmp_path, "float16")
    with safe_open(tmp_path / "model.safetensors", framework="pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.float16}
    assert (tmp_path / "model.safetensors").stat().st_size < 0.55 * fp32_bytes
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert next(loaded.parameters()).dtype == torch.float32  # config.json still says float32
    ids = torch.randint(0, 64, (2, 16))
    with torch.no_grad():
        expected, got = model(ids).logits, loaded(ids).logits
    assert not torch.equal(expected, got)  # the weights really were rounded
    torch.testing.assert_close(got, expected, rtol=0, atol=2e-3)  # float16 rounds weights by <= 2**-11 relative


def test_weights_that_do_not_fit_in_float16_are_refused(tmp_path):
    from safetensors.torch import save_file

    save_file({"w": torch.tensor([1.0, 1e6])}, tmp_path / "model.safetensors", {"format": "pt"})
    before = (tmp_path / "model.safetensors").read_bytes()
    with pytest.raises(ValueError, match="does not fit in float16"):
        store_weights_as(tmp_path, "float16")
    assert (tmp_path / "model.safetensors").read_bytes() == before  # the checkpoint is untouched


def test_the_seq2seq_float16_check_is_in_bits_per_modern_character():
    """FLOAT16_TOLERANCE is in bits per character, so a seq2seq model is measured in bits per modern character:
    the padded batch's mean loss times its target tokens, over ln 2 and the characters, equals the same sum taken
    pair by pair without padding (within 1e-5 relative)."""
    tokenizer = tokenizer_for("bpe")
    special = dict(pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                   eos_token_id=tokenizer.eos_token_id)
    model = tiny_seq2seq(vocab_size=len(tokenizer), training_context_length=64, **special)
    measured = validation_spelling_bits_per_char(model, tokenizer, data_dir(), pairs=12)
    pairs = read_pairs("validation")[:12]
    bits = 0.0
    for item in SpellingPairs(pairs, tokenizer, 64):
        with torch.no_grad():
            loss = model(input_ids=torch.tensor([item["input_ids"]]), labels=torch.tensor([item["labels"]])).loss
        bits += loss.item() * len(item["labels"]) / math.log(2)
    assert measured == pytest.approx(bits / sum(len(p["modern"]) for p in pairs), rel=1e-5)
    assert 2 < measured < 10  # a random model over 4096 tokens: about log2(4096) bits a token, ~3.4 characters


def test_float16_is_stored_when_the_checkpoint_on_disk_moves_by_less_than_the_tolerance(tmp_path):
    """The check reads both sides from disk: float32 as saved, then float16. The change it reports is that
    difference of bits per modern character, and the stored file holds float16 tensors after it."""
    tokenizer = tokenizer_for("bpe")
    special = dict(pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                   eos_token_id=tokenizer.eos_token_id)
    tiny_seq2seq(vocab_size=len(tokenizer), training_context_length=64, **special).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    before = validation_spelling_bits_per_char(*load_checkpoint(tmp_path), data_dir())
    stored, change = store_float16_if_harmless(tmp_path, data_dir())
    model, _ = load_checkpoint(tmp_path)
    after = validation_spelling_bits_per_char(model, tokenizer, data_dir())
    assert stored == "float16" and change == pytest.approx(abs(after - before), abs=1e-12)
    assert 0 < change < FLOAT16_TOLERANCE
    with safe_open(tmp_path / "model.safetensors", "pt") as weights:
        assert {weights.get_tensor(name).dtype for name in weights.keys()} == {torch.float16}
