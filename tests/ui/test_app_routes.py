"""The How the prediction was made endpoint over HTTP, as a client calls it: ``prediction_routes(model_name, text,
position, threshold)`` answers the graph and its JSON (threshold, nodes, edges), an encoder-decoder's with
cross-attention edges to the source; bad input ends in the status line with the outputs cleared."""

from support.app_client import figure
from support.fixtures_checkpoints import SEQ2SEQ_NAME

TEXT = "Shall I compare thee to a summer's day? Shall I compare thee to a"


def test_the_routes_of_a_prediction_come_back_as_a_graph_and_json(client):
    plot, numbers, node, note = client.predict("shakespeare-rope", TEXT, -1, 0.05, api_name="/prediction_routes")
    assert numbers["threshold"] == 0.05 and numbers["edges"] and "⚠" not in note and "edges over 0.05" in note
    for edge in numbers["edges"]:
        assert edge["kind"] in ("attention", "feed_forward", "residual") and 0.05 < edge["weight"] <= 1
        assert (edge["head"] is None) == (edge["kind"] != "attention")
        assert set(edge) >= {"kind", "layer", "head", "source", "target", "weight"}
    ids = {n["id"] for n in numbers["nodes"]}
    assert all(e["from"] in ids and e["to"] in ids for e in numbers["edges"])
    counted = []
    for threshold in (0.001, 0.99):  # the status counts the heads the edges pass through, or says there is none
        _, routes, _, line = client.predict("shakespeare-rope", TEXT, -1, threshold, api_name="/prediction_routes")
        heads = len({(e["layer"], e["head"]) for e in routes["edges"] if e["kind"] == "attention"})
        counted.append(heads)
        assert (f"through {heads} head{'' if heads == 1 else 's'}," if heads else "through no attention head (none "
                "carries a share over the threshold: lower it to see them)") in line
    assert counted[0] > 1 and counted[1] == 0
    drawn = figure(plot)
    assert drawn["layout"]["yaxis"]["ticktext"][0] == "embeddings"
    assert f"token {numbers['position']}" in node and "would predict" in node


def test_an_encoder_decoder_answers_its_decoders_routes_with_edges_to_the_source(client):
    _, numbers, _, note = client.predict(SEQ2SEQ_NAME, "Shall I compare thee to a summer's day?", -1, 0.0001,
                                         api_name="/prediction_routes")  # a tiny model: its cross shares are tiny
    assert "⚠" not in note and "The decoder read the model's own rewrite (greedy, always, in this view): «`" in note
    assert {e["source_stack"] for e in numbers["edges"]} == {"decoder", "encoder"}
    cross = [e for e in numbers["edges"] if e["source_stack"] == "encoder"]
    assert all(e["kind"] == "attention" and e["from"].startswith("enc:") for e in cross)


def test_bad_input_clears_the_outputs_and_says_what_is_allowed(client):
    for position, threshold, said in ((-1, 2, "Threshold must be between 0 and 1"), (-1, "many", "Threshold must be a number"),
                                      (999, 0.04, "Position (−1 for the last) must be a whole number from -1 to")):
        plot, numbers, node, note = client.predict("shakespeare-rope", TEXT, position, threshold, api_name="/prediction_routes")
        assert plot is None and numbers is None and node == "" and note.startswith(f"⚠️ {said}"), note
    *_, note = client.predict("no-such-model", TEXT, -1, 0.04, api_name="/prediction_routes")
    assert note.startswith("⚠️")
