"""An index built once per catalog snapshot and kept exactly as long as that catalog lives.

Each index module owns its cache (`KeywordIndex.of`, `RelevanceIndex.of`), so the catalog
stays discovery only and imports none of the scorers. A snapshot is immutable, so an index
built from it never goes stale; it is keyed by the catalog's identity (two equal catalogs
may each build one) and dropped when the catalog is collected. Builds are serialised, so
concurrent first searches of one snapshot build its index once.

    _INDEXES = PerCatalog(KeywordIndex.build_for)
    index = _INDEXES(catalog)
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

from siftlib.skills.catalog import Catalog

T = TypeVar("T")


class PerCatalog(Generic[T]):
    """A cache of one value per live catalog, built by `build` on first request."""

    def __init__(self, build: Callable[[Catalog], T]) -> None:
        self._build = build
        self._built: dict[int, T] = {}
        self._lock = threading.Lock()

    def __call__(self, catalog: Catalog) -> T:
        """Return the value for `catalog`, building it the first time."""
        key = id(catalog)
        found = self._built.get(key)
        if found is not None:
            return found
        with self._lock:
            found = self._built.get(key)
            if found is None:
                found = self._build(catalog)
                self._built[key] = found
                weakref.finalize(catalog, self._built.pop, key, None)
            return found
