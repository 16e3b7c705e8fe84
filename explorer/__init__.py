"""What the app computes, one module per concern, tested without a server; ``app.py`` only wires it to widgets.

- ``inputs``: what users type, checked (``InputProblem`` says what was wrong and what is allowed) and echoed safely;
- ``catalog``: the checkpoints on disk (damaged ones marked with the reason), results.json, the menus' lines,
  the shared loader;
- ``generation``: decoding settings, streamed generation with per-request seeded sampling, the stop flags;
- ``tokens``: what one forward pass reads (an encoder-decoder's decoder input is its own rewrite) and token labels;
- ``encodings``: the positional encodings as numbers, and the extrapolation experiment on any text;
- ``attention``: every layer x head's weights, cached, and the choice of kind, layer and head;
- ``trace``: the shape of every step of one forward pass, read from the model's own intermediates;
- ``figures``: plotly figures of all of the above, one colour per position encoding.

Nothing here imports gradio.
"""
