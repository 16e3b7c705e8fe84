"""Activation patching: where does the information that decides an answer live?

Two texts of the same token length: a clean one, whose next token the model gets right, and a corrupted one that
differs in a few tokens. Run the corrupted text, but in ONE cell of a grid (a layer's residual stream at one
position, one head's output, ...) write in the value that place had in the clean run. If the answer comes back,
what the clean run carried there was enough to decide it.

The metric is the logit difference at the last position, LD = logit(answer) - logit(wrong answer), normalised:

    restored = (LD_patched - LD_corrupted) / (LD_clean - LD_corrupted)

0 is the corrupted run, 1 the clean run. A patch is an edit of the request's own recording (``modeling.record``'s
``edits``) at a ``modeling.Site``: the shared model is never changed, and requests running at once never see each
other's patches.

- ``grids``: the grids (what each patches, its rows and columns), one ``Patch`` per cell, and which grids a request
  asks for and a model has;
- ``runs``: the patched forward passes, batched (batch row i carries patch i), each from its first patched layer
  (``forward_from``) and position (the corrupted run's keys and values before it);
- ``texts``: the default example and texts of its kind, and corrupted copies made from a clean text;
- ``analysis``: ``activation_patching``: the texts and answers checked, the clean and corrupted runs, every cell's
  patched run, and the result (``Patching``: one ``PatchGrid`` per grid, and its JSON);
- ``estimates``: attribution patching, every cell of every grid to first order from one backward pass.
"""
