"""What the app computes, tested without a server; the tabs in ``ui`` wire it to widgets. Nothing here imports gradio.

Subpackages by concern, each importing only those above it in this list (``tests/project/test_layering.py``):

- ``core``: what every part needs: users' input checked and echoed safely, the machine the app is sized for;
- ``models``: where models come from: the shipped checkpoints on disk (the catalog and its loader), models opened
  from the Hugging Face Hub or uploaded, the model trained in the app pushed to a visitor's account;
- ``generation``: decoding settings, one generate() call, continuous batching of concurrent requests, streaming to
  the app, and what one forward pass reads (tokens);
- ``views``: one module per view of a text, all reading ONE recorded forward pass (``views.forward_pass``);
- ``learning``: learning itself: one gradient step, a tiny model trained live, training runs watched snapshot by
  snapshot (recorded ones and a Hub repo's revisions);
- ``present``: one module per view with ITS figures, HTML and teaching text; what several views share, once. It draws
  what a view computed and loads no model.

A tab is one name in three places: ``ui/tabs/lens.py`` wires ``explorer/views/lens.py`` and shows it with
``explorer/present/lens.py``.
"""
