"""A GPT-2 whose tokenizer was saved as vocab.json and merges.txt (no tokenizer.json), as DialoGPT and many older
fine-tunes are on the Hub, opened through the fake Hub by the real huggingface_hub client: the tokenizer is built by
transformers' own GPT2Tokenizer (never a class the repo names) and reads every text to the same ids as the same BPE
saved as tokenizer.json; the model converts with parity and its logits are transformers' own (float32, within 1e-4).
Broken files are refused by name before the weights come; a repo with tokenizer.json too fetches only that; a
SentencePiece tokenizer.model alone is refused saying what to do."""

import json
import zipfile

import pytest
import torch
from tokenizers import ByteLevelBPETokenizer
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

from explorer.core.inputs import InputProblem
from explorer.core.visitor import Visitor, visiting
from explorer.models import opening, plans, registry
from explorer.views.forward_pass import recorded_pass
from support.fixtures_checkpoints import SAMPLE_TEXT
from support.hub_repos import TINY, files_of, save_transformers_repo, transformers_model

TOLERANCE = 1e-4
END = "<|endoftext|>"
TEXTS = ("Shall I compare thee to a summer's day?", "  two spaces,\nnew lines\n\n\tand ünïcödé ½ 😀 café",
         f"the end{END}the start", " a leading space", "")
# what transformers 4's GPT2Tokenizer (the slow one) wrote beside vocab.json and merges.txt
OLD_TOKENIZER_CONFIG = {"add_prefix_space": False, "bos_token": END, "eos_token": END, "unk_token": END,
                        "errors": "replace", "model_max_length": 1024, "tokenizer_class": "GPT2Tokenizer"}
OLD_SPECIAL_TOKENS = {"bos_token": END, "eos_token": END, "unk_token": END}


def gpt2_bpe() -> ByteLevelBPETokenizer:
    """A byte-level BPE trained as GPT-2's was (its split, its end-of-text token), small."""
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator([SAMPLE_TEXT * 4], vocab_size=384, min_frequency=1, special_tokens=[END], show_progress=False)
    return bpe


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """(the folder of the old-style repo, the same BPE as a tokenizer.json tokenizer: the reference)."""
    bpe, folder = gpt2_bpe(), tmp_path_factory.mktemp("old-gpt2")
    reference = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token=END, eos_token=END, unk_token=END)
    transformers_model("gpt2", reference, vocab_size=len(reference), **TINY["gpt2"]).save_pretrained(folder)
    bpe.save_model(str(folder))  # vocab.json and merges.txt
    (folder / "tokenizer_config.json").write_text(json.dumps(OLD_TOKENIZER_CONFIG))
    (folder / "special_tokens_map.json").write_text(json.dumps(OLD_SPECIAL_TOKENS))
    return folder, reference


@pytest.fixture(scope="module")
def hub(start_fake_hub, saved, tmp_path_factory):
    folder, reference = saved
    server, files = start_fake_hub(), files_of(folder)
    server.add_repo("old/gpt2", files)
    server.add_repo("old/gpt2-broken-merges", dict(files, **{"merges.txt": files["merges.txt"] + b"zzq qqz\n"}))
    with_json = tmp_path_factory.mktemp("with-json")
    reference.save_pretrained(with_json)
    server.add_repo("old/gpt2-both", dict(files, **{"tokenizer.json": (with_json / "tokenizer.json").read_bytes()}))
    llama = files_of(save_transformers_repo(tmp_path_factory.mktemp("llama"), "llama"))
    sentencepiece_only = {k: v for k, v in llama.items() if not k.startswith("tokenizer")}
    server.add_repo("old/llama-sentencepiece", dict(sentencepiece_only, **{"tokenizer.model": b"\x0a\x0bnot read"}))
    server.add_repo("old/llama-vocab-merges", dict(sentencepiece_only, **{n: files[n] for n in plans.VOCAB_AND_MERGES}))
    return server


def test_it_opens_and_reads_every_text_to_the_ids_its_tokenizer_json_would(hub, saved):
    folder, reference = saved
    opened = opening.open_repo("old/gpt2")
    assert opened.model_type == "gpt2" and opened.parity is not None and opened.parity.gap <= TOLERANCE
    _, model, tokenizer = registry.resolve("old/gpt2")
    assert type(tokenizer).__name__ == "GPT2Tokenizer" and tokenizer.eos_token == END
    for text in TEXTS:
        ids = tokenizer(text).input_ids
        assert ids == reference(text).input_ids, text
        assert tokenizer.decode(ids) == text
    assert tokenizer(TEXTS[2]).input_ids.count(reference.convert_tokens_to_ids(END)) == 1  # the end token, whole
    assert hub.downloads("old/gpt2", "vocab.json") == 1 and hub.downloads("old/gpt2", "merges.txt") == 1

    run = recorded_pass(model, tokenizer, TEXTS[0])
    labels = [label.split(":", 1)[1] for label in run.tokens("queries")]
    assert "␣" in "".join(labels) and not any("Ġ" in label for label in labels)  # Ġ (GPT-2's space) shown as ␣
    theirs = AutoModelForCausalLM.from_pretrained(folder).eval()
    with torch.no_grad():
        expected = theirs(torch.tensor([reference(TEXTS[0]).input_ids])).logits[0]
    assert (run.logits - expected).abs().max().item() <= TOLERANCE


def test_broken_vocab_and_merges_are_refused_by_name_before_the_weights_come(hub):
    with pytest.raises(InputProblem) as refused:
        opening.open_repo("old/gpt2-broken-merges")
    message = str(refused.value)
    assert "vocab.json and merges.txt are not a byte-level BPE" in message and "`zzq` out of vocabulary" in message
    assert hub.downloads("old/gpt2-broken-merges", "merges.txt") == 1
    assert hub.downloads("old/gpt2-broken-merges", "model.safetensors") == 0


def test_a_repo_with_tokenizer_json_too_fetches_only_that(hub, saved):
    _, reference = saved
    opened = opening.open_repo("old/gpt2-both")
    _, _, tokenizer = registry.resolve(opened.name)
    assert tokenizer(TEXTS[1]).input_ids == reference(TEXTS[1]).input_ids
    assert hub.downloads("old/gpt2-both", "tokenizer.json") == 1
    assert hub.downloads("old/gpt2-both", "vocab.json") == 0 and hub.downloads("old/gpt2-both", "merges.txt") == 0


def test_a_llama_without_tokenizer_json_is_refused_saying_what_to_give(hub):
    with pytest.raises(InputProblem) as refused:
        opening.open_repo("old/llama-sentencepiece")
    assert ("lacks tokenizer.json (its tokenizer.model, a SentencePiece file, is not read here: "
            "AutoTokenizer.from_pretrained converts it and save_pretrained writes tokenizer.json beside it)") in str(refused.value)
    with pytest.raises(InputProblem, match=r"lacks tokenizer.json: it cannot be opened"):  # GPT-2's class reads those
        opening.open_repo("old/llama-vocab-merges")
    for repo in ("old/llama-sentencepiece", "old/llama-vocab-merges"):
        assert hub.downloads(repo, "model.safetensors") == 0 and hub.downloads(repo, "vocab.json") == 0


def test_an_upload_with_vocab_and_merges_opens(hub, saved, tmp_path):
    folder, reference = saved
    archive = tmp_path / "old gpt2.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for path in folder.iterdir():
            z.write(path, path.name)
    with visiting(Visitor("visitor-vocab-merges")):
        opened = opening.open_upload(archive)
        _, _, tokenizer = registry.resolve(opened.name)
    assert opened.parity.gap <= TOLERANCE and tokenizer(TEXTS[1]).input_ids == reference(TEXTS[1]).input_ids


CONFIG = json.dumps({"model_type": "gpt2", "n_embd": 32, "n_layer": 2, "n_head": 4, "vocab_size": 384, "bos_token_id": 0,
                     "eos_token_id": 0}).encode()


def test_the_plan_reads_tokenizer_json_first_and_caps_only_the_files_it_reads():
    big = plans.file_cap("vocab.json") + 1
    both = {"tokenizer.json": 10, "vocab.json": big, "merges.txt": 10, "tokenizer_config.json": 10,
            "model.safetensors": 10}
    assert plans.plan("r", both, CONFIG).files == ["config.json", "tokenizer_config.json", "tokenizer.json",
                                                   "model.safetensors"]
    alone = {k: v for k, v in both.items() if k != "tokenizer.json"}
    with pytest.raises(InputProblem, match=f"its vocab.json is {big:,} bytes"):
        plans.plan("r", alone, CONFIG)
    small = dict(alone, **{"vocab.json": 10})
    assert plans.plan("r", small, CONFIG).files == [
        "config.json", "tokenizer_config.json", "vocab.json", "merges.txt", "model.safetensors"]
    with pytest.raises(InputProblem, match=r"lacks tokenizer.json \(or vocab.json and merges.txt\): it cannot"):
        plans.plan("r", {k: v for k, v in small.items() if k != "merges.txt"}, CONFIG)


@pytest.mark.parametrize("saved_as", ["vocab and merges", "tokenizer.json"])
def test_a_tokenizer_config_naming_files_elsewhere_on_the_machine_is_not_followed(saved, tmp_path, saved_as):
    """A stranger's tokenizer_config.json may name paths ("vocab", "merges", their *_file forms, "tokenizer_file"):
    another tokenizer on the server's disk. The folder's own files are read all the same."""
    from explorer.models.converting import load_tokenizer

    _, reference = saved
    elsewhere = ByteLevelBPETokenizer()
    elsewhere.train_from_iterator(["zzzz yyyy xxxx " * 50], vocab_size=300, min_frequency=1, show_progress=False)
    (tmp_path / "elsewhere").mkdir()
    elsewhere.save_model(str(tmp_path / "elsewhere"))
    elsewhere.save(str(tmp_path / "elsewhere" / "tokenizer.json"))
    paths = {key: str(tmp_path / "elsewhere" / name) for key, name in (
        ("vocab", "vocab.json"), ("merges", "merges.txt"), ("vocab_file", "vocab.json"), ("merges_file", "merges.txt"),
        ("tokenizer_file", "tokenizer.json"))}
    folder = tmp_path / "stranger"
    folder.mkdir()
    if saved_as == "tokenizer.json":
        reference.save_pretrained(folder)
    else:
        gpt2_bpe().save_model(str(folder))
    (folder / "tokenizer_config.json").write_text(json.dumps(dict(OLD_TOKENIZER_CONFIG, **paths)))
    tokenizer = load_tokenizer(folder, "The upload", "gpt2")
    for text in TEXTS + ("zzzz yyyy xxxx",):
        assert tokenizer(text).input_ids == reference(text).input_ids, text
