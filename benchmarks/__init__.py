"""Benchmarks, one command per figure: ``python -m benchmarks.<name>`` prints what it measured.

- ``generation``: generation speed, ours against transformers' GPT2LMHeadModel with the same weights;
- ``training_step``: one training step, ours against GPT2LMHeadModel and ``minimal_gpt`` (a nanoGPT-style floor);
- ``op_count``: the operators one training step issues (torch.profiler);
- ``app_latency``: the app as a user meets it, over HTTP (``--load``: many clients at once, through ``app_load``);
- ``app_load``: C clients at once, each running rounds of /generate then /attention;
- ``hub_open``: Open a model at GPT-2 small's size, from a Hub on 127.0.0.1;
- ``parameter_count``: counting a config's parameters from its numbers (any size, no model built);
- ``hub_memory``: N visitors opening models at once under the memory bound: RSS baseline, peak and steady;
- ``real_size``: every view at GPT-2 small's size, as the app calls it (seconds, multiples of one
  forward pass, peak RSS), generation beside GPT2LMHeadModel, Watch it learn's memory;
- ``live_training``: a live training job, and whether an induction head forms within a budget;
- ``patching``: how long activation patching takes, grid by grid (``--size gpt2-small``: every grid at once and its
  first-order estimate, at GPT-2 small's size);
- ``ablation``: the head ranking of Head ablation at GPT-2 small's size, exact and estimated;
- ``measuring``: what those two share: a random GPT-2-small-size model, one forward pass's time, a call's memory;
- ``routes``: how long the routes of one prediction take (How the prediction was made), as a multiple of one forward pass;
- ``device``: the --device, --dtype and --compile flags every benchmark shares;
- ``gpt2_reference``: the GPT2LMHeadModel both speed benchmarks race, and the sizes they run at (``--size``);
- ``minimal_gpt``: the minimal GPT the training step races.
"""
