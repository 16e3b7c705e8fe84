"""What the app computes, one module per concern, tested without a server; the tabs in ``ui`` wire it to widgets.

- ``inputs``: what users type, checked (``InputProblem`` says what was wrong and what is allowed) and echoed safely;
- ``catalog``: the checkpoints on disk (damaged ones marked with the reason), results.json, the menus' lines,
  the shared loader;
- ``generation``: decoding settings, streamed generation with per-request seeded sampling, the stop flags;
- ``tokens``: what one forward pass reads (an encoder-decoder's decoder input is its own rewrite) and token labels;
- ``run``: ONE recorded pass of (checkpoint, text, decoding) with every site, in a bounded cache; every view of a
  text reads it, and its ``SITES`` say where each kind of attention lives;
- ``encodings``: the positional encodings as numbers, and the extrapolation experiment on any text;
- ``attention``: every layer x head's weights of the run, and the choice of kind, layer and head;
- ``trace``: the shape of every step of one forward pass, read from the run's recording;
- ``figures``: plotly figures of all of the above, one colour per position encoding.

The teaching views (every number the model's own, each proven equal to it in a test):

- ``steps``: one attention sublayer recomputed from its input and the layer's weights, step by step for one head
  and query, each step compared with the run's recording; ``worked_example``: the notes' example, done right;
- ``lens``: the logit lens; ``ablation``: heads removed by an edit in a new recording, and ranked;
- ``patching``: activation patching, the clean run's values written into the corrupted run's recording, batched
  (``patching_figures``: its heat maps);
- ``sampling``: the next-token distribution exactly as ``generate`` samples from it; ``heads``: head types;
- ``teaching``: the explanations beside the views; ``teach_figures`` and ``teach_html``: their plots and HTML.

Nothing here imports gradio.
"""
