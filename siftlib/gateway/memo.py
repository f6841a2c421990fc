"""Values built once per cache entry held in memory, instead of once per cache hit.

    memo = EntryMemo[bytes](entries=1024)
    data = memo.get(response.stored, "web", lambda: encode(response.stored))

A cache hit carries the very object its store's memory front holds (a search's hits tuple,
a stored page), so what a hit's answer costs to encode, most of a hit once its entry is in
memory, is paid once per entry. Values are keyed by that object's identity and hold it, so
an id is never reused while remembered; past `entries` the oldest is forgotten.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["EntryMemo"]

_V = TypeVar("_V")


class EntryMemo(Generic[_V]):
    """Values built from held objects, by the object's identity and a tag, at most `entries`."""

    def __init__(self, entries: int = 1024) -> None:
        self._entries = entries
        self._memo: OrderedDict[tuple[int, Hashable], tuple[object, _V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, held: object, tag: Hashable, build: Callable[[], _V]) -> _V:
        """Return the value remembered for `held` and `tag`, building it the first time."""
        key = (id(held), tag)
        with self._lock:
            found = self._memo.get(key)
        if found is not None and found[0] is held:
            return found[1]
        value = build()
        with self._lock:
            self._memo[key] = (held, value)
            if len(self._memo) > self._entries:
                self._memo.popitem(last=False)
        return value
