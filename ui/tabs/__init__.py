"""The page's thirteen tabs, one module each, in the page's order (``app.TABS``); each holds the tab's layout and its
handlers side by side, and its ``tab(choices, value, decoding)`` returns a ``ui.tab.TabParts``:

- ``generate``: Generate: a prompt continued (or rewritten, for an encoder-decoder) token by token, with the decoding
  controls the other tabs' encoder-decoder views read too.
- ``encodings``: Compare encodings: the five position encodings drawn, the extrapolation experiment (recomputed on
  your own text), one prompt continued by each encoding's model.
- ``attention``: Attention heads: every layer × head as a clickable grid with the heads' types, one head enlarged, one
  token's attention in every head of a layer.
- ``trace``: Inside the forward pass: the real shape of every step of one forward pass, and the next-token chart.
- ``steps``: Attention, step by step: the worked example, then one head and one query token with the model's numbers.
- ``lens``: Logit lens: the residual stream after each layer read through the final norm and unembedding.
- ``ablation``: Head ablation: chosen heads removed (loss and next token before and after), or every head ranked.
- ``sampling``: Sampling, seen: the next-token distribution after temperature, top-k, top-p and the penalty.
- ``patching``: Activation patching: a clean and a corrupted text, the grids of patched runs (decoder-only models).
- ``routes``: How the prediction was made: the routes of one next-token prediction as a graph (heads and blocks whose
  share of each residual vector passes a threshold), a clicked node's logit lens and what feeds it.
- ``gradient_step``: One gradient step: the loss, every gradient norm, one SGD step before and after (decoder-only
  models).
- ``train_live``: Train one yourself: a tiny Transformer trained in the app, streamed step by step; its model offered
  to the page (``ui.trained_model``).
- ``watch_it_learn``: Watch it learn: a recorded training run snapshot by snapshot, and a Hub repo's training
  checkpoints measured.
"""
