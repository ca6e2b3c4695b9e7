"""A bounded, thread-safe memo: the per-worker caches of pure results (canonical URLs, link verdicts).

Entries live in insertion order; :meth:`BoundedMemo.put` moves a key to the
end, and when the memo is full the oldest entries go first (first in, first
out, refreshed on write). A lookup is one dict read (atomic in CPython);
writes take a lock, so the fetcher's parse threads and the event loop can
share one memo.
"""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedMemo(Generic[K, V]):
    """At most ``max_entries`` (≥ 1) key → value pairs; ``None`` is not a storable value.

    Raises:
        ValueError: ``max_entries`` below 1.
    """

    def __init__(self, max_entries: int) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, got {max_entries}")
        self.max_entries = max_entries
        self._data: dict[K, V] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: K) -> V | None:
        """The value stored for ``key``, or None."""
        return self._data.get(key)

    def put(self, key: K, value: V) -> None:
        """Store ``value`` for ``key`` as the newest entry, evicting the oldest ones beyond the bound."""
        with self._lock:
            data = self._data
            data.pop(key, None)
            while len(data) >= self.max_entries:
                del data[next(iter(data))]  # dicts keep insertion order: the oldest entry first
            data[key] = value

    def discard(self, key: K) -> None:
        """Forget ``key`` (nothing happens when it is not stored)."""
        with self._lock:
            self._data.pop(key, None)

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._data.clear()
