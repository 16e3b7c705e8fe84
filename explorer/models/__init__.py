"""explorer.models: the models the app serves, the shipped checkpoints and those opened from outside as OUR Transformer.

``registry``: THE owner of every model the app holds (shipped, Hub, upload, trained): whose each name is (everyone's,
    or one browser session's), ``resolve`` for the visitor asking, and the memory of them all (weights, tokenizers,
    cached views) in one LRU bounded by ``SCRATCH_HUB_MEMORY``.
``catalog``: the shipped checkpoints on disk (what each is, whether it can be served, menu lines), the evaluation's
    results, and the one load lock.
``plans``: what may be opened (the families, the limits in force) and the ``Plan`` of a folder or a repo's listing,
    checked before a weight is read or fetched; a repo's code never runs.
``hub_files``: the Hub a model comes from (repo ids, revisions, endpoint, token, cache, its failures in words) and
    ``fetch``, which sizes a repo from its metadata and downloads only the planned files.
``hub_cache``: the Hub cache on disk within ``SCRATCH_HUB_DISK`` (the least recently opened revisions nobody uses go
    first); a refused open's files removed.
``jobs``: one job per key however many ask, in a daemon thread, a few per visitor; requesters follow its progress and
    give up on a stall.
``tokenizer_file``: what a stranger's tokenizer.json may make the machine do (its regular expressions, how much
    longer it makes a text), checked before it is read.
``converting``: a planned folder loaded behind the lock, converted to our Transformer, its parity measured.
``uploads``: a zip of a save_pretrained folder unpacked safely into a folder of its own under this process's folder.
``held``: what the registry holds for an opened model (``Opened``, its menu line) and what a model costs in memory
    (weights, tokenizer).
``opening``: opening a Hub repo (``start_open``, ``open_repo``) or an upload (``open_upload``) for the visitor asking.
``push``: pushing a model trained in the app to the visitor's own Hub account.
"""
