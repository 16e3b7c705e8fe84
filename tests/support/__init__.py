"""What the tests share besides conftest.py's fixtures, imported as ``from support.<module> import ...``:

- app_client: the app over HTTP as a client sees it: a raw call to an endpoint, a plot and its arrays;
- app_process: `python app.py` in a subprocess, and events joined through its queue as a browser joins them;
- browser: Chromium's launch and the steps a visitor takes in a page (open a tab, pick, fill, wait, screenshot);
- fake_hub: a Hugging Face Hub on 127.0.0.1 (its state), and a server that never answers;
- fake_hub_handler: how the fake Hub answers HTTP, one method per route family (API, files, upload, OAuth);
- fixtures_checkpoints: tiny random checkpoints in the shipped layout, and recorded training runs;
- gradient_reference: one SGD step the plain way (autograd's dense gradients), to check the gradient step against;
- hub_repos: the repos the Hub tests serve, good and bad;
- local_server: a free port on 127.0.0.1;
- offline_hub: a Hugging Face cache on disk, and a Python process that loads from it offline;
- sentencepiece: a Llama 2-style (SentencePiece, byte fallback) tokenizer, trained and loaded as a Hub repo's is;
- shipped: the shipped checkpoints (and the tiny ones) loaded once per session;
- tiny_models: tiny random models, the one source of ``tiny_config``.
"""
