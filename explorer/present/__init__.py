"""Presentation: figures, HTML and teaching text, one module per view (named as the view in ``explorer.views`` and
its tab in ``ui.tabs``), each view's teaching text beside its figures. Nothing here loads a model.

Shared by several views:

- ``figures``: plot basics (the layout, one colour per position encoding, a heat map, a message in place of a
  figure, plotly-safe token labels, the top next tokens as bars) and the attention maps' figures;
- ``clickable_html``: the click handler and style of clickable items, the token strip (all user text escaped);
- ``concepts``: the Transformer's concepts explained once (embedding, position encodings, multi-head attention,
  masks, the residual add and the norm, feed-forward, outputs shifted right, cross-attention); it says once that
  the paper's d_k is the code's d_head.

One per view:

- ``attention``: the clickable head grid with head types, the token-centred view, the heads' teaching text;
- ``steps``: attention step by step as HTML with its numbers, and the worked example's text;
- ``trace``: the forward pass's steps as a table;
- ``lens``: the logit lens's heat map and table;
- ``ablation``: the figures of an ablation and of the head ranking;
- ``patching``: activation patching's grids as heat maps, a clicked cell's top tokens, the default example's note
  and what a result's grids show;
- ``routes``: how the prediction was made: the routes as a graph (layers up, tokens across, edge width by share, heads
  named), a clicked node's lens and parts, and what the measure is and is not (contribution is not causation);
- ``sampling``: the next-token distribution as a figure;
- ``encodings``: the encodings' tables and curves, and the experiment's teaching text;
- ``generate``: the note on the encoder-decoder rewriter;
- ``gradient_step``: what one gradient step did;
- ``train_live``: the live loss curve, a head's attention on the probe, the induction scores;
- ``watch_it_learn``: a training run at one snapshot and a Hub repo's training revisions.
"""
