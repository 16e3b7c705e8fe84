"""The views: what each tab computes from a model, one module per view, tested without a server (the tab of the same
name in ``ui.tabs`` wires it to widgets; ``explorer.present`` draws it). Every number is the model's own.

- ``forward_pass``: ONE recorded pass of (checkpoint, text, decoding) with every ``modeling.Site`` of it kept, in a
  bounded cache, read by every view of that text; and the kinds of attention (``AttentionKind``, ``ATTENTION_KINDS``:
  "self", "encoder", "decoder", "cross"), the one place that maps a kind to the model's modules and records;
- ``architecture``: what a model is (norm, feed-forward, key/value heads and who shares them, biases, head, residual,
  rotary share, embedding scale), built once from its config and modules: every view's prose and formulas read it;
- ``attention``: every layer x head's weights of the pass, and the choice of kind, layer and head kept to what the
  model has;
- ``heads``: head types (previous token, first-token sink, same token, induction) scored from the weights;
- ``steps``: one attention sublayer recomputed from its input and the layer's weights, step by step for one head and
  query, each step compared with the pass's recording; ``worked_example``: the teaching notes' example, done right;
- ``trace``: the shape of every step of one forward pass, read from its recording;
- ``lens``: the logit lens, each layer's residual stream read by the final norm and the LM head;
- ``vocabulary``: hidden states read against the whole vocabulary a chunk at a time, never their (rows, vocab)
  logits whole: log-normalisers, next-token log-probabilities, chunked logits (the lens, the ranking, patching);
- ``ablation``: heads removed by an edit in a new recording, the loss before and after, every head ranked (each
  layer's heads run from that layer on); ``ablation_estimate``: every head's cost to first order (the head-mask
  gradient, one backward pass);
- ``first_order``: first-order estimates' common parts: the gradient of a metric at named sites (zero probes added
  by ``record``'s edits), and how an estimate agrees with the exact answer (correlation, wrong signs, ranks);
- ``patching``: activation patching, a package (its docstring lists its modules): the clean run's values written into
  the corrupted run's recording, cell by cell of each grid, batched;
- ``routes``: how the prediction was made, a package (its docstring lists its modules): every update of the
  residual stream split into its parts (each head from each source token, the feed-forward, the stream before), and
  the graph of those over a share threshold, traced back from the prediction (Ferrando & Voita's routes);
- ``sampling``: the next-token distribution exactly as ``generate`` samples from it;
- ``encodings``: the positional encodings as numbers, and the extrapolation experiment on any text;
- ``experiment``: the recorded comparison of the encodings (``results.json``) as tables and curves.
"""
