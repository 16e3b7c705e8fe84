"""The one bounded cache type (``LRUCache``): what views derive (recorded passes, timelines, snapshots), kept by key,
least recently used out first. A value computed from a model the registry holds names that model as its ``owner``:
the registry counts the bytes each model's values hold (``owner_bytes``) against the app's memory bound, and drops
them all with the model (``release``), so no cache keeps a model alive that the registry let go.
"""

import dataclasses
import threading
import weakref
from collections import OrderedDict

_caches: "weakref.WeakSet[LRUCache]" = weakref.WeakSet()  # every cache made, for ``release`` and ``owner_bytes``


class LRUCache:
    """The ``size`` most recently used values by key, shared by all threads. Requests for a key being computed wait
    for it, so concurrent requests for one text cost one run."""

    def __init__(self, size: int):
        self.size = size
        self._values: OrderedDict = OrderedDict()  # key -> (value, owner)
        self._lock = threading.Lock()
        self._computing: dict = {}  # key -> the lock its computation holds
        _caches.add(self)

    def _cached(self, key):
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return True, self._values[key][0]
            return False, self._computing.setdefault(key, threading.Lock())

    def get(self, key, compute, owner=None):
        """The value of ``key``, ``compute()``d on first use; ``owner``: the model it was computed from, if any."""
        found, value = self._cached(key)
        if found:
            return value
        with value:  # the key's lock: one computation at a time per key
            found, cached = self._cached(key)
            if found:
                return cached
            try:
                result = compute()
            except BaseException:
                with self._lock:
                    self._computing.pop(key, None)
                raise
            with self._lock:
                self._computing.pop(key, None)
                self._values[key] = (result, owner)
                while len(self._values) > self.size:
                    self._values.popitem(last=False)
            return result

    def _drop_owned(self, owner) -> None:
        with self._lock:
            for key in [k for k, (_, o) in self._values.items() if o is owner]:
                del self._values[key]

    def _owned(self, owner) -> list:
        with self._lock:
            return [value for value, o in self._values.values() if o is owner]


def release(owner) -> None:
    """Drop every cached value computed from ``owner`` (a model the registry let go), in every cache."""
    for cache in list(_caches):
        cache._drop_owned(owner)


def owner_bytes(owner) -> int:
    """Bytes of the arrays every cache holds for ``owner`` (``nbytes``)."""
    return nbytes([value for cache in list(_caches) for value in cache._owned(owner)])


def nbytes(value, _seen: set | None = None) -> int:
    """Bytes of the tensors and arrays in ``value``, each storage once, found through dicts, lists, tuples and plain
    objects' attributes. Models and tokenizers are not walked into: the registry counts them itself."""
    seen = set() if _seen is None else _seen
    if id(value) in seen or value is None or isinstance(value, (str, bytes, int, float, bool, type)):
        return 0
    seen.add(id(value))
    storage = getattr(value, "untyped_storage", None)
    if callable(storage):  # a torch tensor: its storage, once however many views share it
        key = ("storage", storage().data_ptr())
        if key in seen:
            return 0
        seen.add(key)
        return storage().nbytes()
    if hasattr(value, "dtype") and hasattr(value, "nbytes"):  # a numpy array
        return int(value.nbytes)
    if hasattr(value, "named_parameters") or hasattr(value, "convert_tokens_to_ids"):  # a model, a tokenizer
        return 0
    if isinstance(value, dict):
        return sum(nbytes(v, seen) for v in list(value.values()))
    if isinstance(value, (list, tuple, set, frozenset)):
        return sum(nbytes(v, seen) for v in list(value))
    if dataclasses.is_dataclass(value) or hasattr(value, "__dict__"):
        return sum(nbytes(v, seen) for v in list(vars(value).values()))
    return 0
