"""What the app computes, one module per concern, tested without a server; the tabs in ``ui`` wire it to widgets.

- ``machine``: the machine the app is sized for (``CORES``);
- ``inputs``: what users type, checked (``InputProblem`` says what was wrong and what is allowed) and echoed safely;
- ``catalog``: the checkpoints on disk (damaged ones marked with the reason), results.json, the menus' lines,
  the shared loader;
- ``generation``: decoding settings, one generate() call with per-request seeded sampling, the stop flags;
- ``batching``: decoder-only generations of concurrent requests run as one continuously batched decode;
- ``streaming``: a generation streamed token by token to the app (through ``batching``, or line by line for an
  encoder-decoder), above both;
- ``tokens``: what one forward pass reads (an encoder-decoder's decoder input is its own rewrite) and token labels;
- ``run``: ONE recorded pass of (checkpoint, text, decoding) with every site, in a bounded cache; every view of a
  text reads it, and its ``SITES`` say where each kind of attention lives;
- ``encodings``: the positional encodings as numbers, and the extrapolation experiment on any text;
- ``experiment``: the recorded comparison of the encodings (results.json) as tables and curves;
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

Learning, seen:

- ``gradient_step``: one SGD step on a copy of a model, its gradient norms, the first-order prediction;
- ``live_data`` and ``live_training``: a tiny model trained from scratch in the app, streamed snapshot by snapshot;
- ``recorded_runs``: the recorded training runs, one snapshot on a text, and the heads' composition over training;
- ``learn_figures``: their plots.

Models from the Hub:

- ``hub``: a Hub repo or an uploaded zip opened as our Transformer (checked, sized and converted, its parity
  measured; no repository code runs), held in a memory-bounded LRU, per-session uploads;
- ``hub_push``: the model trained in the app pushed to the visitor's own account, with its card;
- ``hub_timeline``: a Hub repo's training revisions (Pythia's ``step…``) as a recorded run's views.

Nothing here imports gradio.
"""
