"""How the prediction was made: the information flow routes of one next-token prediction (Ferrando & Voita 2024,
"Information flow routes"), from the text's ONE recorded pass and tensor arithmetic, no other run of the model.

Every residual vector the model writes is a sum of parts (the stream before, each head's term from each source
token, the output bias, the feed-forward's output); each part's share of the vector is its L1 proximity. The graph
keeps the parts whose share is over a threshold, traced back from the prediction's node; a node is split only when
the route reaches it, so memory stays bounded.

- ``split``: the updates of the decoder's residual stream (``Step``) and their parts and shares, in bounded chunks;
- ``graph``: ``prediction_routes``: the graph traced back from the prediction (``Routes``: nodes, edges, its JSON),
  and what a clicked node holds (``node_reading``: the logit lens there, the parts feeding it).
"""
