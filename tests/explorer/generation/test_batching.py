"""explorer.generation.batching: concurrent generations decode in one batch, joining it mid-decode, and each request's text
is the one ``generate`` gives it alone, token for token."""

import threading
import time

import pytest
import torch

from explorer.generation import batching, decoding, streaming
from explorer.generation.decoding import DecodingSettings
from support.fixtures_checkpoints import SEQ2SEQ_NAME, load_named

PROMPTS = ["Shall I", "Shall I compare thee to a summer's day? Thou art more lovely",  # shorter and longer
           "To be, or not", "Rough winds do shake the darling buds of May, and summer's lease hath all too short",
           "Thou", "So long as men can breathe or eyes can see"]
SETTINGS = [DecodingSettings(True, 0.8, 40, 0.95, 1.1, 60, 11), DecodingSettings(True, 1.0, 0, 1.0, 1.0, 25, 12),
            DecodingSettings(False, repetition_penalty=1.3, max_new_tokens=40), DecodingSettings(True, 1.3, 5, 0.8, 1.0, 33, 13),
            DecodingSettings(True, 0.8, 40, 0.95, 1.1, 45, 14),  # shaped with the first, sampled with its own seed
            DecodingSettings(False, repetition_penalty=1.3, max_new_tokens=30)]  # shaped with the third


def alone(model, tokenizer, prompt, settings):
    """(new token ids, streamed text) of the request made alone through ``generate``: its text as streamed,
    since a streamer may show a character cut between byte tokens as it stood then."""
    ids, max_new, _ = decoding.encode_prompt(model, tokenizer, prompt, settings.max_new_tokens)
    settings = DecodingSettings(**{**settings.__dict__, "max_new_tokens": max_new})
    run = decoding.start_generation(model, tokenizer, ids, settings)
    text = "".join(run.streamer)
    return decoding.generate_ids(model, ids, settings)[0, ids.shape[1]:].tolist(), text


def start(model, tokenizer, prompt, settings, stop=None):
    ids, max_new, _ = decoding.encode_prompt(model, tokenizer, prompt, settings.max_new_tokens)
    return batching.start_batched(model, tokenizer, ids, DecodingSettings(**{**settings.__dict__, "max_new_tokens": max_new}),
                                  stop)


@pytest.mark.parametrize("name", ["shakespeare-rope", "shakespeare-alibi", "shakespeare-learned", "shakespeare-sinusoidal",
                                  "shakespeare-none"])
def test_requests_joining_a_running_batch_each_get_their_solo_text(tiny_checkpoints, name):
    model, tokenizer = load_named(tiny_checkpoints, name)
    expected = [alone(model, tokenizer, p, s) for p, s in zip(PROMPTS, SETTINGS)]
    loop = batching.decode_loop(model)
    loop.largest_batch = 0
    first = start(model, tokenizer, PROMPTS[0], SETTINGS[0])
    pieces = iter(first.streamer)
    text = next(pieces)  # the first request is decoding alone; the others join it between two steps, together
    with loop.lock:  # (the loop takes them at its next step, so none can end before the last joins)
        runs = [start(model, tokenizer, p, s) for p, s in zip(PROMPTS[1:], SETTINGS[1:])]
    texts = [text + "".join(pieces)] + ["".join(run.streamer) for run in runs]
    first.thread.join(timeout=30)
    assert not any(run.error for run in [first, *runs])
    assert texts == [t for _, t in expected]
    assert [run.streamer.n_tokens for run in [first, *runs]] == [len(ids) for ids, _ in expected]
    assert loop.largest_batch == len(PROMPTS) and not loop.rows and not first.thread.is_alive()


def test_stopping_one_request_ends_it_alone(tiny_checkpoints):
    model, tokenizer = load_named(tiny_checkpoints, "shakespeare-rope")
    long = DecodingSettings(True, 0.8, 40, 0.95, 1.1, 300, 5)
    stop = threading.Event()
    stopped, other = start(model, tokenizer, PROMPTS[0], long, stop), start(model, tokenizer, PROMPTS[1], long)
    next(iter(stopped.streamer))
    stop.set()
    "".join(stopped.streamer)  # ends once the flag is seen, after at most the token being made
    assert stopped.streamer.n_tokens < 300 and not stopped.error
    solo_ids, solo_text = alone(model, tokenizer, PROMPTS[1], long)
    assert "".join(other.streamer) == solo_text and other.streamer.n_tokens == len(solo_ids) > stopped.streamer.n_tokens


def test_a_request_that_fails_reports_its_error_and_the_batch_goes_on(tiny_checkpoints):
    model, tokenizer = load_named(tiny_checkpoints, "shakespeare-rope")
    good = start(model, tokenizer, PROMPTS[0], SETTINGS[0])
    ids = tokenizer("x" * 10, return_tensors="pt").input_ids
    bad = batching.start_batched(model, tokenizer, ids + 10**6, SETTINGS[1])  # token ids past the vocabulary
    "".join(bad.streamer)
    assert bad.error and "token ids must be in [0, 383]" in str(bad.error[0])
    assert "".join(good.streamer) == alone(model, tokenizer, PROMPTS[0], SETTINGS[0])[1] and not good.error


def test_a_reader_that_falls_behind_gets_the_queued_text_in_one_piece(tokenizer):
    streamer = batching.BatchStreamer(tokenizer, skip_prompt=True)
    streamer.put(torch.tensor([[tokenizer.bos_token_id]]))  # the prompt: skipped
    ids = tokenizer("a b c d", add_special_tokens=False).input_ids
    streamer.put(torch.tensor([ids[0]]))
    first = next(iter(streamer))  # read as soon as it came: one token
    for i in ids[1:]:
        streamer.put(torch.tensor([i]))
    streamer.end()
    assert first == "a" and list(streamer) == [tokenizer.decode(ids[1:])] and streamer.n_tokens == len(ids)


def test_generations_outside_a_batch_take_turns_two_at_a_time(tiny_checkpoints, monkeypatch):
    """An encoder-decoder generates line by line through ``generate``, each request in its own thread: at most two
    of those calls run at once (the machine has 2 cores), however many requests come."""
    model, tokenizer = load_named(tiny_checkpoints, SEQ2SEQ_NAME)
    running, most, lock, generate = [0], [0], threading.Lock(), model.generate

    def counted(*args, **kwargs):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            return generate(*args, **kwargs)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(model, "generate", counted)
    settings = DecodingSettings(False, max_new_tokens=20)
    streams = [streaming.stream_generation(model, tokenizer, "Thou art more louely\nand more temperate", settings,
                                            threading.Event()) for _ in range(5)]
    threads = [threading.Thread(target=list, args=(stream,)) for stream in streams]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert most[0] == 2


@pytest.mark.parametrize("crowded", [False, True])
def test_a_crowded_stream_updates_at_most_every_interval_and_a_lone_one_every_token(tokenizer, monkeypatch, crowded):
    monkeypatch.setattr(batching, "SHARED_UPDATE_S", 0.5)
    streamer = batching.BatchStreamer(tokenizer, crowded=lambda: crowded, skip_prompt=True)
    streamer.put(torch.tensor([[tokenizer.bos_token_id]]))  # the prompt: skipped
    a, b, c = tokenizer("a b c", add_special_tokens=False).input_ids
    streamer.put(torch.tensor([a]))
    pieces, start = iter(streamer), time.perf_counter()
    assert next(pieces) == "a"  # the first update never waits
    streamer.put(torch.tensor([b]))
    later = threading.Timer(0.02, lambda: (streamer.put(torch.tensor([c])), streamer.end()))
    later.start()
    rest = [piece for piece in pieces if piece]  # the end of the stream may come as an empty piece
    later.join()
    if crowded:  # one update half a second after the first, with all that came meanwhile
        assert rest == [" b c"] and time.perf_counter() - start >= 0.5
    else:
        assert rest == [" b", " c"]


def test_a_decode_loop_does_not_keep_its_model_alive(tiny_checkpoints):
    """Once its generations end, a model's decode loop holds it weakly: a model nobody else holds is freed."""
    import gc
    import weakref

    from checkpointing.loading import load_checkpoint

    model, tokenizer = load_checkpoint(tiny_checkpoints / "shakespeare-rope")  # a copy of its own, not the registry's
    run = start(model, tokenizer, PROMPTS[0], DecodingSettings(False, max_new_tokens=5))
    assert len("".join(run.streamer)) > 0
    run.thread.join(timeout=30)
    assert not run.thread.is_alive() and batching.decode_loop(model).model is model
    gone = weakref.ref(model)
    del model, run
    gc.collect()
    assert gone() is None
