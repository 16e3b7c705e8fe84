"""explorer.generation.decoding: decoding settings, prompts kept inside the model, streaming, seeded sampling, stopping."""

import threading
from dataclasses import replace

import pytest
import torch

from explorer.generation import decoding, streaming
from explorer.generation.decoding import DecodingSettings, sanitize_decoding
from explorer.core.inputs import InputProblem
from support.fixtures_checkpoints import SEQ2SEQ_NAME, load_named

TEXT = "Shall I compare thee to a summer's day? Thou art more lovely and more temperate."


def test_sampling_at_temperature_zero_becomes_greedy():
    settings, notices = sanitize_decoding("Sampling", 0, 40, 0.9, 1.0, 10, 0)
    assert not settings.do_sample and notices == [
        "Temperature 0 means always taking the most likely token: decoding greedily instead of sampling."]


def test_greedy_ignores_the_sampling_controls_without_complaint():
    settings, notices = sanitize_decoding("Greedy", 0.7, 50, 0.9, 1.0, 10, 0)
    assert settings == DecodingSettings(False, max_new_tokens=10) and notices == []
    assert sanitize_decoding("greedy", "junk", None, [1], 1.0, 10, 0)[0].do_sample is False  # unused: not read
    assert settings.describe() == "greedy"


def test_settings_say_how_they_decode():
    settings, _ = sanitize_decoding("Sampling", 0.8, 40, 0.95, 1.1, 10, 7)
    assert settings.describe() == "sampling (temperature 0.8, top-k 40, top-p 0.95, seed 7), repetition penalty 1.1"
    assert sanitize_decoding("Sampling", 1, 0, 1, 1, 10, 0)[0].describe() == "sampling (temperature 1, seed 0)"


@pytest.mark.parametrize("max_new, expected, notice", [
    (0, 1, "Max new tokens was 0; using 1, the least allowed."), (-5, 1, "was -5"),
    (10**9, decoding.MAX_NEW_TOKENS, "Max new tokens 1,000,000,000 is above the limit 512; using 512."), ("30", 30, None),
])
def test_max_new_tokens_is_kept_in_range(max_new, expected, notice):
    settings, notices = sanitize_decoding("Sampling", 1.0, 0, 1.0, 1.0, max_new, 0)
    assert settings.max_new_tokens == expected and (notices == [] if notice is None else notice in notices[0])


def test_out_of_range_sampling_values_are_replaced_with_a_notice():
    settings, notices = sanitize_decoding("sampling", 9, -3, 1.5, 0, 10, 0)
    assert settings == DecodingSettings(True, 5.0, 0, 1.0, 1.0, 10, 0)
    assert notices == ["Repetition penalty must be above 0 and at most 10; got 0, using 1 (off).",
                       "Temperature 9 is above the maximum 5; using 5.",
                       "Top-k must be 0 (off) or a whole number of tokens; got -3, turning it off.",
                       "Top-p must be above 0 and at most 1; got 1.5, using 1 (off)."]


@pytest.mark.parametrize("field, value, message", [
    ("mode", "beam", "Decoding must be 'Sampling' or 'Greedy'; got `beam`."),
    ("mode", ["Sampling"], "Decoding must be 'Sampling' or 'Greedy'; got `['Sampling']`."),
    ("seed", 2**64, "Seed must be a whole number from 0 to 4,294,967,295; got `18446744073709551616`."),
    ("seed", -2**63 - 1, "Seed must be a whole number from 0 to 4,294,967,295; got `-9223372036854775809`."),
    ("seed", None, "Seed must be a whole number"),
    ("temperature", "hot", "Temperature must be a number (0 to 5; 0 is greedy); got `hot` (a text)."),
    ("temperature", None, "Temperature must be a number (0 to 5; 0 is greedy); got `None` (nothing)."),
    ("temperature", float("nan"), "Temperature must be a number"),
    ("top_p", float("inf"), "Top-p must be a number (above 0, at most 1; 1 = off); got `inf`"),
    ("top_k", "many", "Top-k must be a number (0 = off, or a whole number of tokens)"),
    ("repetition_penalty", {}, "Repetition penalty must be a number"),
    ("max_new_tokens", "junk", "Max new tokens must be a whole number from 1 to 512; got `junk`."),
])
def test_values_that_cannot_be_read_are_refused_with_what_is_allowed(field, value, message):
    values = dict(mode="Sampling", temperature=0.8, top_k=40, top_p=0.95, repetition_penalty=1.1, max_new_tokens=10, seed=0)
    values[field] = value
    with pytest.raises(InputProblem) as problem:
        sanitize_decoding(**values)
    assert message in str(problem.value)


def test_long_prompt_keeps_its_end_with_a_notice(tiny_checkpoints):
    model, tokenizer = load_named(tiny_checkpoints, "shakespeare-rope")
    full = tokenizer(TEXT * 10).input_ids
    ids, max_new, notices = decoding.encode_prompt(model, tokenizer, TEXT * 10, 20)
    assert ids.shape[1] == 64 and ids[0].tolist() == full[-64:] and max_new == 20
    assert "keeping its last 64" in notices[0]
    assert decoding.encode_prompt(model, tokenizer, "Shall I", 20)[2] == []


def test_learned_positions_bound_prompt_plus_new_tokens(tiny_checkpoints):
    model, tokenizer = load_named(tiny_checkpoints, "shakespeare-learned")
    ids, max_new, notices = decoding.encode_prompt(model, tokenizer, TEXT * 10, 500)
    assert max_new == 63 and ids.shape[1] + max_new <= 64 and len(notices) == 2


def test_seq2seq_source_keeps_its_beginning(tiny_checkpoints):
    model, tokenizer = load_named(tiny_checkpoints, SEQ2SEQ_NAME)
    ids, _, notices = decoding.encode_prompt(model, tokenizer, TEXT * 10, 20)
    assert ids[0].tolist() == tokenizer(TEXT * 10).input_ids[:64] and "first 64" in notices[0]


def test_token_streamer_releases_every_token_and_never_half_a_character(tokenizer):
    ids = tokenizer("a 🙂 b c", add_special_tokens=False).input_ids
    streamer = decoding.TokenStreamer(tokenizer, skip_prompt=True)
    streamer.put(torch.tensor([[tokenizer.bos_token_id]]))  # the prompt: skipped
    for i in ids:
        streamer.put(torch.tensor([i]))
    streamer.end()
    pieces = list(streamer)
    assert "".join(pieces) == "a 🙂 b c" and streamer.n_tokens == len(ids)
    assert not any("\ufffd" in p for p in pieces)
    assert len([p for p in pieces if p]) == len(ids) - 3  # the emoji's 4 byte tokens come out as one piece


def test_gumbel_sampler_draws_from_the_softmax():
    logits = torch.tensor([[1.0, 0.0, -1.0, -30.0]])
    sampler = decoding.GumbelSampler(seed=0)
    draws = torch.tensor([int(sampler(None, logits).argmax()) for _ in range(4000)])
    frequencies = torch.bincount(draws, minlength=4).float() / len(draws)
    assert torch.allclose(frequencies, logits.softmax(-1)[0], atol=0.025)


def _generate(model, tokenizer, settings):
    ids = tokenizer("Shall I", return_tensors="pt").input_ids
    run = decoding.start_generation(model, tokenizer, ids, settings)
    text = "".join(run.streamer)
    run.thread.join()
    assert not run.error
    return text, run


def test_seeded_sampling_repeats_even_with_concurrent_requests(tiny_checkpoints):
    model, tokenizer = load_named(tiny_checkpoints, "shakespeare-rope")
    settings, _ = sanitize_decoding("sampling", 1.0, 0, 1.0, 1.0, 30, 123)
    alone = _generate(model, tokenizer, settings)[0]
    texts = []
    threads = [threading.Thread(target=lambda s=s: texts.append((s, _generate(model, tokenizer, replace(settings, seed=s))[0])))
               for s in (123, 7, 123)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [text for seed, text in texts if seed == 123] == [alone, alone]
    assert [text for seed, text in texts if seed == 7] != [alone]


def test_streamed_text_is_the_generated_text_and_counts_its_tokens(tiny_checkpoints):
    model, tokenizer = load_named(tiny_checkpoints, "shakespeare-alibi")
    settings, _ = sanitize_decoding("greedy", 1.0, 0, 1.0, 1.0, 15, 0)
    text, run = _generate(model, tokenizer, settings)
    ids = tokenizer("Shall I", return_tensors="pt").input_ids
    expected = decoding.generate_ids(model, ids, settings)
    assert text == tokenizer.decode(expected[0, ids.shape[1]:], skip_special_tokens=True)
    assert run.streamer.n_tokens == expected.shape[1] - ids.shape[1] and run.tokens_per_second() > 0


def test_stop_flag_ends_generation(tiny_checkpoints):
    model, tokenizer = load_named(tiny_checkpoints, "shakespeare-rope")
    settings, _ = sanitize_decoding("greedy", 1.0, 0, 1.0, 1.0, 400, 0)
    ids = tokenizer("Shall I", return_tensors="pt").input_ids
    run = decoding.start_generation(model, tokenizer, ids, settings)
    next(iter(run.streamer))
    run.stop.set()
    run.thread.join(timeout=10)
    assert not run.thread.is_alive() and run.streamer.n_tokens < 400


def test_stop_registry_stops_only_the_sessions_own_generation():
    registry, mine, theirs = decoding.StopRegistry(), threading.Event(), threading.Event()
    registry.register("me", mine)
    registry.register("them", theirs)
    assert registry.stop("me") and mine.is_set() and not theirs.is_set()
    registry.release("them", theirs)
    assert not registry.stop("them") and not registry.stop(None) and not theirs.is_set()


def test_seq2seq_generation_streams_the_rewrite(tiny_checkpoints):
    model, tokenizer = load_named(tiny_checkpoints, SEQ2SEQ_NAME)
    settings, _ = sanitize_decoding("greedy", 1.0, 0, 1.0, 1.0, 10, 0)
    text, run = _generate(model, tokenizer, settings)
    assert 0 < run.streamer.n_tokens <= 10  # the decoder start token is not counted
    assert text == decoding.generate_text(model, tokenizer, "Shall I", settings)[0]


class _Streamed:
    """What GenerationStats reads of a finished call's TokenStreamer."""

    def __init__(self, n_tokens, started, first_token_at, unreadable=0):
        self.n_tokens, self.started, self.first_token_at = n_tokens, started, first_token_at
        self.unreadable = unreadable


def test_generation_stats_sum_the_calls_and_keep_the_first_tokens_latency():
    stats = decoding.GenerationStats()
    assert stats.tokens_per_second == 0.0 and stats.describe() == "**0 tokens** · **0.0 tokens/s**"
    stats.add(_Streamed(0, 10.0, None), ended_at=10.5)  # a line that produced nothing: no latency from it
    stats.add(_Streamed(12, 20.0, 20.25), ended_at=22.0)
    stats.add(_Streamed(3, 30.0, 30.1, unreadable=2), ended_at=30.5)
    assert stats.n_tokens == 15 and stats.unreadable == 2 and stats.seconds == pytest.approx(3.0, abs=1e-12)
    assert stats.first_token_latency == pytest.approx(0.25, abs=1e-12) and stats.tokens_per_second == pytest.approx(5.0)
    assert stats.describe() == "**15 tokens** · **5.0 tokens/s** · first token after 250 ms"
    one = decoding.GenerationStats()
    one.add(_Streamed(1, 0.0, 0.002), ended_at=0.004)
    assert one.describe() == "**1 token** · **250.0 tokens/s** · first token after 2 ms"


def _consume(stream):
    states = list(stream)
    return states, [s for s in states if s.starting], [s for s in states if not s.starting and s.stats is None]


def test_a_continuation_streams_after_its_prompt_and_equals_generate(tiny_checkpoints):
    model, tokenizer = load_named(tiny_checkpoints, "shakespeare-alibi")
    settings, _ = sanitize_decoding("greedy", 1.0, 0, 1.0, 1.0, 15, 0)
    states, starts, tokens = _consume(streaming.stream_generation(model, tokenizer, "Shall I", settings, threading.Event()))
    continuation, _ = decoding.generate_text(model, tokenizer, "Shall I", settings)
    n_new = decoding.generate_ids(model, tokenizer("Shall I", return_tensors="pt").input_ids, settings).shape[1] - \
        len(tokenizer("Shall I").input_ids)
    final = states[-1]
    assert final.text == "Shall I" + continuation and not final.stopped and final.n_lines == 1
    assert len(starts) == 1 and starts[0].text == "Shall I" and starts[0].prompt_tokens == len(tokenizer("Shall I").input_ids)
    assert [s.n_tokens for s in tokens] == sorted(s.n_tokens for s in tokens) and tokens[-1].n_tokens == n_new
    assert final.stats.n_tokens == n_new and final.stats.tokens_per_second > 0 and final.stats.first_token_latency > 0


def test_an_encoder_decoder_rewrites_line_by_line_each_line_as_generate_rewrites_it(tiny_checkpoints):
    model, tokenizer = load_named(tiny_checkpoints, SEQ2SEQ_NAME)
    settings, _ = sanitize_decoding("greedy", 1.0, 0, 1.0, 1.0, 8, 0)
    lines = ["Shall I compare thee", "Thou art more louely"]
    states, starts, _ = _consume(streaming.stream_generation(model, tokenizer, f"{lines[0]}\n\n  {lines[1]}\n", settings,
                                                              threading.Event()))
    rewrites = [decoding.generate_text(model, tokenizer, line, settings)[0] for line in lines]
    new_tokens = [decoding.generate_ids(model, tokenizer(line, return_tensors="pt").input_ids, settings).shape[1] - 1
                  for line in lines]  # the decoder start token is not a new token
    assert states[-1].text == "\n".join(rewrites) and states[-1].n_lines == 2  # the blank line is skipped
    assert [(s.line, s.prompt_tokens, s.n_tokens) for s in starts] == [
        (k, len(tokenizer(line).input_ids), sum(new_tokens[:k])) for k, line in enumerate(lines)]
    assert starts[1].text == rewrites[0] + "\n" and states[-1].stats.n_tokens == sum(new_tokens)


def test_stop_ends_the_line_and_skips_the_lines_left(tiny_checkpoints):
    model, tokenizer = load_named(tiny_checkpoints, SEQ2SEQ_NAME)
    settings, _ = sanitize_decoding("greedy", 1.0, 0, 1.0, 1.0, 60, 0)
    stop = threading.Event()
    seen = []
    for state in streaming.stream_generation(model, tokenizer, "one line\nanother line\na third", settings, stop):
        seen.append(state)
        if not state.starting and state.stats is None:
            stop.set()
    final = seen[-1]
    assert final.stopped and final.line == 0 and "\n" not in final.text and not any(s.line > 0 for s in seen)
    assert 1 <= final.stats.n_tokens < 60


def test_closing_the_stream_early_stops_the_generation_thread(tiny_checkpoints):
    model, tokenizer = load_named(tiny_checkpoints, "shakespeare-rope")
    settings, _ = sanitize_decoding("greedy", 1.0, 0, 1.0, 1.0, 400, 0)
    stop = threading.Event()
    stream = streaming.stream_generation(model, tokenizer, "Shall I", settings, stop)
    before = set(threading.enumerate())
    while next(stream).starting:
        pass
    (thread,) = [t for t in threading.enumerate() if t.name == "generate" and t not in before]
    stream.close()
    thread.join(timeout=10)
    assert stop.is_set() and not thread.is_alive()


def test_a_failed_call_raises_in_the_stream(tiny_checkpoints):
    model, tokenizer = load_named(tiny_checkpoints, "shakespeare-rope")
    settings = DecodingSettings(False, max_new_tokens=5, repetition_penalty=-1.0)  # generate() refuses it
    with pytest.raises(ValueError, match="strictly positive"):  # raised in the thread, re-raised here
        list(streaming.stream_generation(model, tokenizer, "Shall I", settings, threading.Event()))


def test_a_sentencepiece_continuation_keeps_the_space_after_its_prompt():
    """A SentencePiece decoder drops the space a text starts with: the continuation, decoded alone, began 'I' and
    read 'Shall II I' after its prompt, in the Generate tab's stream and in Compare encodings' text alike."""
    from support.fixtures_checkpoints import causal_lm
    from support.sentencepiece import sentencepiece_tokenizer

    tokenizer = sentencepiece_tokenizer()
    model = causal_lm(tokenizer).eval()
    settings, _ = sanitize_decoding("greedy", 1.0, 0, 1.0, 1.0, 6, 0)
    ids, _, _ = decoding.encode_prompt(model, tokenizer, "Shall I", 6)
    out = decoding.generate_ids(model, ids, settings)
    assert tokenizer.convert_ids_to_tokens(int(out[0, ids.shape[1]])).startswith("▁")  # a word after a space
    whole = tokenizer.decode(out[0], skip_special_tokens=True)
    states, _, _ = _consume(streaming.stream_generation(model, tokenizer, "Shall I", settings, threading.Event()))
    assert whole.startswith("Shall I ") and states[-1].text == whole
    assert "Shall I" + decoding.generate_text(model, tokenizer, "Shall I", settings)[0] == whole


def test_a_model_that_ends_on_any_of_several_tokens_and_has_no_pad_token_generates_and_stops_at_each():
    """Llama 3's chat models: eos_token_id a list, no pad token. generate pads with the first end-of-text token, and
    a row ends on whichever comes (here the second, the fifth token greedy writes); streamed the same."""
    from support.families import family

    model, tokenizer = family("llama")
    prompt = tokenizer("Shall I compare thee", return_tensors="pt").input_ids
    settings, _ = sanitize_decoding("greedy", 1.0, 0, 1.0, 1.0, 12, 0)
    saved = model.generation_config.eos_token_id, model.generation_config.pad_token_id
    try:
        model.generation_config.eos_token_id, model.generation_config.pad_token_id = None, None
        free = decoding.generate_ids(model, prompt, settings)[0, prompt.shape[1]:].tolist()
        fifth = free[4]
        unused = next(i for i in range(model.config.vocab_size) if i not in free)
        model.generation_config.eos_token_id = [unused, fifth]
        ended = decoding.generate_ids(model, prompt, settings)[0, prompt.shape[1]:].tolist()
        assert ended == free[:free.index(fifth) + 1] and decoding.padding_id(model.generation_config) == unused
        states = list(streaming.stream_generation(model, tokenizer, "Shall I compare thee", settings, threading.Event()))
        assert states[-1].stats.n_tokens == len(ended)
    finally:
        model.generation_config.eos_token_id, model.generation_config.pad_token_id = saved


def _pointing_past_the_tokenizer(tokenizer, padding: int, sure: bool):
    """A model scoring ``padding`` more ids than ``tokenizer`` has (a vocabulary padded to a round size). Its final
    norm's gain is 0, so every position reads the norm's bias β, and its untied head scores β against the last
    (padded) id's row 10 β: greedy writes that id at every step when ``sure``, otherwise the head's rows are random."""
    from support.fixtures_checkpoints import causal_lm

    model = causal_lm(tokenizer, "rope", vocab_size=len(tokenizer) + padding, tie_word_embeddings=False)
    if sure:
        with torch.no_grad():
            norm = model.model.decoder.stack.norm
            norm.weight.zero_()
            norm.bias.normal_()
            model.lm_head.weight.zero_()
            model.lm_head.weight[-1] = 10 * norm.bias
    return model


def test_tokens_the_tokenizer_cannot_spell_are_counted_and_said():
    """Ids past the tokenizer's entries decode to no text: the stream counts them and says why nothing showed,
    instead of guessing at an end or special tokens; a model whose tokens are all readable says nothing of it."""
    from support.hub_repos import tokenizer as test_tokenizer

    tok = test_tokenizer()
    settings, _ = sanitize_decoding("greedy", 1.0, 0, 1.0, 1.0, 6, 0)
    model = _pointing_past_the_tokenizer(tok, 8, sure=True)
    last = list(streaming.stream_generation(model, tok, "Shall I", settings, threading.Event()))[-1]
    written = decoding.generate_ids(model, tok("Shall I", return_tensors="pt").input_ids, settings)[0, -6:]
    assert written.tolist() == [len(tok) + 7] * 6 and last.text == "Shall I"
    assert last.stats.unreadable == last.stats.n_tokens == 6
    assert f"6 of the 6 new tokens are ids the tokenizer has no entry for (its ids end at {len(tok) - 1}, the model " \
           f"scores {len(tok) + 8})" in " ".join(last.notices)
    assert not any("no visible text" in notice for notice in last.notices)
    plain = _pointing_past_the_tokenizer(tok, 0, sure=False)
    last = list(streaming.stream_generation(plain, tok, "Shall I", settings, threading.Event()))[-1]
    assert last.stats.unreadable == 0 and last.stats.n_tokens > 0 and not any("no entry" in n for n in last.notices)
