"""explorer.models: the models the app serves, the shipped checkpoints and those opened from outside as OUR Transformer.

``catalog``: the shipped checkpoints (what each is, whether it can be served, menu lines), the evaluation's results,
    the one load lock, and the menus' list of opened models (``resolve`` serves a name of either kind).
``plans``: what may be opened (the families, the limits in force) and the ``Plan`` of a folder or a repo's listing,
    checked before a weight is read or fetched; a repo's code never runs.
``hub_files``: the Hub a model comes from (repo ids, revisions, endpoint, token, cache, its failures in words) and
    ``fetch``, which sizes a repo from its metadata and downloads only the planned files.
``jobs``: one job per key however many ask, in a daemon thread; requesters follow its progress and give up on a stall.
``converting``: a planned folder loaded behind the lock, converted to our Transformer, its parity measured.
``uploads``: a zip of a save_pretrained folder unpacked safely into a folder of its own under this process's folder.
``held``: the opened models (``Opened``, their menu lines), the memory-bounded LRU ``HELD``, each session's own models.
``opening``: opening a Hub repo (``start_open``, ``open_repo``) or an upload (``open_upload``) and registering it.
``push``: pushing a model trained in the app to the visitor's own Hub account.
"""
