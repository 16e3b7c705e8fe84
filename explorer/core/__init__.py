"""What every part of the explorer needs, and nothing of the model.

- ``inputs``: what users type or send, checked before any work is done (``InputProblem`` says what was wrong and what
  is allowed), and echoed back safely;
- ``parity``: how an opened model's parity (its largest logit gap to transformers') reads, good or not;
- ``machine``: the machine the app is sized for (``CORES``), and the time one request's exact runs may take;
- ``settings``: every limit the app's operator may set (an environment variable each), read when it is used;
- ``visitor``: who is asking (``current()``, set by the UI around each request);
- ``caches``: the one bounded cache type (``LRUCache``), whose values name the model they were computed from, so the
  registry counts and drops them with it.
"""
