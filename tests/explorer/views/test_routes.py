"""explorer.views.routes: every update of the residual stream split into its parts (they sum to it, within 1e-5 in
float32, on every family we hold), each part and share recomputed by hand from the weights, and the route of a
repeated passage's next token on shakespeare-main through its induction head L4.H7 and the previous-token head L3.H0."""

import pytest
import torch

from explorer.core.inputs import InputProblem
from explorer.present.routes import TEACHING
from explorer.views.architecture import describe
from explorer.views.routes.graph import (DEFAULT_THRESHOLD, Tracer, layer_note, node_reading, prediction_routes,
                                        split_sums)
from explorer.views.routes.split import Part, Splitter, steps_of
from modeling import record
from modeling.convert import from_transformers
from support.hub_repos import TINY, tiny_transformers_model
from support.shipped import shipped
from support.tiny_models import random_ids, tiny_causal_lm, tiny_seq2seq

TOLERANCE = dict(rtol=0, atol=1e-5)
LENGTH = 12

OURS = {
    "rope": lambda: tiny_causal_lm("rope"),
    "rope, grouped-query": lambda: tiny_causal_lm("rope", n_kv_heads=2),
    "alibi": lambda: tiny_causal_lm("alibi"),
    "learned": lambda: tiny_causal_lm("learned"),
    "sinusoidal": lambda: tiny_causal_lm("sinusoidal"),
    "post-norm": lambda: tiny_causal_lm("alibi", norm_first=False, final_layer_norm=False),
    "attention-only": lambda: tiny_causal_lm("rope", feed_forward="none"),
    "encoder-decoder": lambda: tiny_seq2seq("sinusoidal"),
    "encoder-decoder, post-norm": lambda: tiny_seq2seq("rope", norm_first=False),
    "encoder-decoder, attention-only": lambda: tiny_seq2seq("rope", feed_forward="none"),
}
CONVERTED = {family: (lambda family=family: from_transformers(tiny_transformers_model(family)).eval()) for family in TINY}


def recorded(model):
    """One recorded pass over random tokens (an encoder-decoder reads them as its source, and 7 decoder tokens)."""
    ids = random_ids(1, LENGTH)
    inputs = {"input_ids": ids}
    if model.config.is_encoder_decoder:
        inputs["decoder_input_ids"] = random_ids(1, 7, seed=2)
    with torch.inference_mode(), record() as recording:
        model(**inputs, use_cache=False)
    return recording


def sublayer_output(recording, step) -> torch.Tensor:
    """(T, D) what the step's sublayers added, as the model recorded them."""
    names = {"self": ("self", "output"), "cross": ("cross", "output"), "ffn": ("ffn", "output")}
    return sum(recording["decoder", step.layer, names[s][0], names[s][1]][0] for s in step.sublayers)


@pytest.mark.parametrize("build", list(OURS.values()) + list(CONVERTED.values()), ids=list(OURS) + list(CONVERTED))
def test_the_parts_of_every_update_sum_to_the_residual_vector_it_makes(build):
    """x + Σ_h Σ_j A^h[i,j] v^h_j W_O^h + b_O (+ FFN) is the stream after the update (pre-norm), or the sum its norm
    reads (post-norm: LN(sum) is the recorded stream); the attention terms and bias alone are its recorded output."""
    model = build()
    recording = recorded(model)
    splitter, config = Splitter(model, recording), model.config
    length = recording["decoder", 0, None, "input"].shape[1]
    steps = steps_of(config)
    assert len(steps) == config.n_layers * (1 if config.parallel_residual else
                                           1 + config.is_encoder_decoder + (config.feed_forward != "none"))
    with torch.inference_mode():
        for step in steps:
            positions = list(range(length))
            vectors, parts = splitter.vectors(step, positions), splitter.parts_of(step)
            assert vectors.shape == (length, len(parts), config.d_model)
            before = recording["decoder", step.layer, None, step.before][0]
            after = recording["decoder", step.layer, None, step.after][0]
            torch.testing.assert_close(vectors.sum(1), before + sublayer_output(recording, step), **TOLERANCE)
            if config.norm_first:
                torch.testing.assert_close(vectors.sum(1), after, **TOLERANCE)
            else:
                block = model.model.decoder.stack.layers[step.layer]
                norm = {"self": block.self_attn_norm, "cross": block.cross_attn_norm, "ffn": block.feed_forward_norm}
                torch.testing.assert_close(norm[step.sublayers[-1]].norm(vectors.sum(1)), after, **TOLERANCE)
            for sublayer in set(step.sublayers) - {"ffn"}:
                mine = torch.tensor([p.attention == sublayer and p.kind in ("attention", "bias") for p in parts])
                torch.testing.assert_close(vectors[:, mine].sum(1), recording["decoder", step.layer, sublayer, "output"][0],
                                           **TOLERANCE)
    tracer = Tracer(model, recording, 0.01, [str(p) for p in range(length)], [str(p) for p in range(LENGTH)])
    with torch.inference_mode():
        tracer.trace(length - 1)
    top = tracer.feeding[f"r{len(steps)}:{length - 1}"]
    assert abs(sum(share for _, share in top) - 1) < 1e-5 and tracer.edges  # the shares of a vector sum to 1


def by_hand_norm(norm, x):
    """LayerNorm or RMSNorm from its formula and weights."""
    if isinstance(norm, torch.nn.LayerNorm):
        centred = x - x.mean(-1, keepdim=True)
        y = centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + norm.eps) * norm.weight
        return y if norm.bias is None else y + norm.bias
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + norm.eps) * norm.weight


@pytest.mark.parametrize("build", [OURS["rope, grouped-query"], OURS["learned"], CONVERTED["llama"], CONVERTED["gpt2"]],
                         ids=["ours, grouped-query", "ours, learned", "llama (grouped-query)", "gpt2"])
def test_each_part_and_share_equals_a_recomputation_from_the_weights(build):
    """Layer 1's attention and feed-forward at the last position, by hand: LN(x) from its formula, v = LN(x) W_V + b_V
    from the rows of qkv_proj, head h's term A^h[i,j] v^{h // group}_j (W_O[:, h])^T (the weights A from the recording:
    the steps view proves them), the FFN from its two matrices; shares max(0, |y|_1 − |y − c|_1) / Σ."""
    model = build()
    recording = recorded(model)
    config, layer, i = model.config, 1, LENGTH - 1
    block = model.model.decoder.stack.layers[layer]
    attention_step, ffn_step = [s for s in steps_of(config) if s.layer == layer]
    with torch.inference_mode():
        x = recording["decoder", layer, None, "input"][0]
        normed = by_hand_norm(block.self_attn_norm.norm, x)
        heads, kv_heads, d_head = config.n_heads, config.n_kv_heads, config.d_head
        w, b = block.self_attn.qkv_proj.weight, block.self_attn.qkv_proj.bias
        v_rows = slice(heads * d_head + kv_heads * d_head, None)
        v = normed @ w[v_rows].T + (0 if b is None else b[v_rows])  # (S, H_kv d_head)
        v = v.view(LENGTH, kv_heads, d_head)
        a = recording["decoder", layer, "self", "weights"][0, :, i]  # (H, S)
        w_o = block.self_attn.out_proj.weight
        expected = [x[i]]
        for h in range(heads):
            for j in range(LENGTH):
                expected.append(a[h, j] * v[j, h // (heads // kv_heads)] @ w_o[:, h * d_head:(h + 1) * d_head].T)
        if block.self_attn.out_proj.bias is not None:
            expected.append(block.self_attn.out_proj.bias)
        expected = torch.stack(expected)
        got = Splitter(model, recording).vectors(attention_step, [i])[0]
        torch.testing.assert_close(got, expected, **TOLERANCE)
        y = expected.sum(0)
        raw = torch.tensor([max(0.0, float(y.abs().sum() - (y - c).abs().sum())) for c in expected])
        _, split = next(Splitter(model, recording).split(attention_step, [i]))
        torch.testing.assert_close(split.shares[0], raw / raw.sum(), **TOLERANCE)

        mid = recording["decoder", layer, None, "after_self_attention"][0, i]
        ffn = block.feed_forward
        hidden = by_hand_norm(block.feed_forward_norm.norm, mid) @ ffn.linear1.weight.T
        hidden = hidden + (0 if ffn.linear1.bias is None else ffn.linear1.bias)
        if ffn.gated:
            gate, up = hidden.chunk(2)
            hidden = torch.nn.functional.silu(gate) * up
        else:
            hidden = ffn.activation(hidden)
        out = hidden @ ffn.linear2.weight.T + (0 if ffn.linear2.bias is None else ffn.linear2.bias)
        torch.testing.assert_close(Splitter(model, recording).vectors(ffn_step, [i])[0], torch.stack([mid, out]),
                                   **TOLERANCE)


@pytest.mark.parametrize("build", list(OURS.values()) + list(CONVERTED.values()), ids=list(OURS) + list(CONVERTED))
def test_the_sums_the_note_gives_carry_the_biases_the_split_adds(build):
    """The line above the graph gives one sum per update of a layer, in the graph's order: b_O where the split has a
    bias part (Llama, Mistral: none), b_V where the values it reads carry one (GPT-2, Pythia, ours), the feed-forward
    where the update has one; the fixed teaching text gives no bias of its own."""
    model = build()
    splitter, layer = Splitter(model, recorded(model)), model.model.decoder.stack.layers[0]
    steps = [step for step in steps_of(model.config) if step.layer == 0]
    sums = split_sums(describe(model)).split("; ")
    assert len(sums) == len(steps) and sums[0] in layer_note(model)
    for step, formula in zip(steps, sums):
        biases = sum(part.kind == "bias" for part in splitter.parts_of(step))
        value_biases = sum(getattr(layer, f"{s}_attn").qkv_proj.bias is not None for s in step.sublayers if s != "ffn")
        assert (formula.count("+ b_O"), formula.count("+ b_V")) == (biases, value_biases), formula
        assert ("FFN(" in formula) == ("ffn" in step.sublayers) and ("memory_j" in formula) == ("cross" in step.sublayers)
    assert "b_O" not in TEACHING and "b_V" not in TEACHING


def test_grouped_query_heads_read_their_groups_values():
    """Query heads 0 and 1 share key/value head 0 (4 heads, 2 kv heads): their terms from one source differ only by
    their weights and their own slice of W_O."""
    model = OURS["rope, grouped-query"]()
    assert model.config.n_kv_heads == 2
    parts = Splitter(model, recorded(model)).parts_of(steps_of(model.config)[0])
    assert parts[1:1 + LENGTH] == [Part("attention", 0, j, "self") for j in range(LENGTH)]


# --- the graph, on real checkpoints ---

REPEATS = {  # a passage, then its start again: the next token is the one after the earlier copy
    "Thou art more lovely and more temperate. Thou art more lovely and more": "␣tem",
    "The quality of mercy is not strained; it droppeth as the gentle rain. The quality of mercy is not strained; "
    "it droppeth as the": "␣gentle",
    "With mirth and laughter let old wrinkles come, and let my liver rather heat with wine. With mirth and laughter "
    "let old wrinkles come, and let my liver": "␣rather",
}


@pytest.fixture(scope="module")
def main_routes(main):
    model, tokenizer = main
    return {text: prediction_routes(model, tokenizer, text) for text in REPEATS}


@pytest.mark.parametrize("text", list(REPEATS))
def test_a_repeated_passage_runs_through_the_induction_head_and_the_previous_token_head_feeding_it(main_routes, text):
    """The strongest attention edge into the prediction is L4.H7 from the token after the earlier copy (s), with over
    half of the vector's share; into s, below layer 4, the strongest edge from s − 1 is the previous-token head L3.H0.
    Measured: L4.H7 0.545 / 0.701 / 0.525, L3.H0 0.077 / 0.056 / 0.080 (the three texts, in order)."""
    routes = main_routes[text]
    last = routes.position
    assert routes.predicted == REPEATS[text]
    into_last = [e for e in routes.edges if e.kind == "attention" and e.target == last]
    induction = max(into_last, key=lambda e: e.weight)
    assert (induction.layer, induction.head) == (4, 7) and induction.weight > 0.5
    s = induction.source
    assert routes.tokens[s] == REPEATS[text] and routes.tokens[s - 1] == routes.tokens[last]
    previous = [e for e in routes.edges if e.kind == "attention" and e.target == s and e.source == s - 1 and e.layer < 4]
    strongest = max(previous, key=lambda e: e.weight)
    assert (strongest.layer, strongest.head) == (3, 0) and strongest.weight > DEFAULT_THRESHOLD


def test_the_graph_is_traced_back_from_the_prediction_and_its_json_has_what_the_api_promises(main_routes):
    routes = next(iter(main_routes.values()))
    answer = routes.to_json()
    assert answer["threshold"] == DEFAULT_THRESHOLD and {"nodes", "edges"} <= set(answer)
    ids = {node["id"] for node in answer["nodes"]}
    top = f"r{len(routes.rows) - 1}:{routes.position}"
    assert top in ids
    for edge in answer["edges"]:
        assert {"kind", "layer", "head", "source", "target", "weight"} <= set(edge)
        assert edge["kind"] in ("attention", "feed_forward", "residual")
        assert (edge["head"] is None) == (edge["kind"] != "attention")
        assert DEFAULT_THRESHOLD < edge["weight"] <= 1 and edge["from"] in ids and edge["to"] in ids
    # every node an edge leaves from was reached: an edge goes into it, or it is the prediction's node
    reached = {edge["to"] for edge in answer["edges"]} | {top}
    assert {edge["from"] for edge in answer["edges"] if edge["from"].startswith("r")} - reached <= {
        node["id"] for node in answer["nodes"] if node["row"] == 0}


def test_a_node_reads_out_what_the_stream_there_would_predict_and_what_feeds_it(main, main_routes):
    model, tokenizer = main
    text = next(iter(main_routes))
    routes = main_routes[text]
    final = node_reading(routes, f"r{len(routes.rows) - 1}:{routes.position}")
    assert final.top[0][0] == routes.predicted  # the last row's lens is the model's own prediction
    torch.testing.assert_close(torch.tensor(final.top[0][1]), routes.run.logits[routes.position].softmax(-1).max(), **TOLERANCE)
    assert abs(sum(share for _, share in final.feeding) - 1) < 1e-5 and final.feeding[0][0].startswith("residual")
    with pytest.raises(InputProblem, match="No node"):
        node_reading(routes, "r99:0")


def test_a_higher_threshold_keeps_fewer_edges_and_bad_input_says_what_is_allowed(main):
    model, tokenizer = main
    text = next(iter(REPEATS))
    loose, strict = (prediction_routes(model, tokenizer, text, -1, t) for t in (0.02, 0.2))
    assert len(strict.edges) < len(loose.edges)
    assert {(e.kind, e.layer, e.head, e.source, e.target) for e in strict.edges} <= {
        (e.kind, e.layer, e.head, e.source, e.target) for e in loose.edges}
    for bad in (0, 1, -0.5, "lots"):
        with pytest.raises(InputProblem, match="Threshold"):
            prediction_routes(model, tokenizer, text, -1, bad)
    with pytest.raises(InputProblem, match="Position"):
        prediction_routes(model, tokenizer, text, 500)
    earlier = prediction_routes(model, tokenizer, text, 3)
    assert earlier.position == 3 and all(e.target <= 3 for e in earlier.edges)


def test_an_encoder_decoder_traces_the_rewrites_last_word_by_default_and_its_stop_when_asked():
    """folio-to-modern's decoder reads its rewrite up to its last word, after which it predicts <|endoftext|> (the
    end of the line): −1 (the default) traces the last word's prediction instead, a word it wrote, and says so;
    the stop's position, typed, traces the stop; a decoder-only model's −1 stays its last token."""
    model, tokenizer = shipped("folio-to-modern")
    text = "Thou art more louely and more temperate. Thou art more louely and more"
    for position in (None, -1, "-1", -1.0):
        routes = prediction_routes(model, tokenizer, text, position)
        last = len(routes.tokens) - 1
        assert routes.position == last - 1 and routes.predicted == routes.tokens[last] == "␣more"
        assert (f"Position −1 traces how the rewrite's last word, `␣more`, was predicted (after token {last - 1}): after "
                f"that word the model predicts `<|endoftext|>`, the end of the line, its choice to stop. Type {last} "
                "to trace that choice.") in routes.notices
    stop = prediction_routes(model, tokenizer, text, last)
    assert stop.position == last and stop.predicted == "<|endoftext|>" and not any("−1" in n for n in stop.notices)
    main = prediction_routes(*shipped("shakespeare-main"), text, -1)
    assert main.position == len(main.tokens) - 1 and not any("−1" in n for n in main.notices)


def test_an_encoder_decoder_shows_the_decoders_routes_with_cross_attention_edges_to_the_source():
    """folio-to-modern rewriting a line: its decoder's last position (it decides to stop) reads the source's last
    token through cross-attention heads of layers 1 and 2 (L1.H6 0.092, the largest)."""
    model, tokenizer = shipped("folio-to-modern")
    routes = prediction_routes(model, tokenizer, "Shall I compare thee to a Summers day?", 11)
    cross = [e for e in routes.to_json()["edges"] if e["source_stack"] == "encoder"]
    assert cross and all(e["kind"] == "attention" and e["from"].startswith("enc:") for e in cross)
    assert all(0 <= e["source"] < len(routes.source_tokens) for e in cross)
    assert node_reading(routes, cross[0]["from"]).top is None
