"""Caches bounded by what they hold, for processes that run for days.

A cache bounded by its number of entries bounds nothing when entries grow: a daemon's
parsed root tree gains an entry per landing and is parsed again at every landing, a raw
tree kept for the next landing grows the same way, a contract may be a few hundred bytes
or a megabyte. `Bounded` counts each entry by a cost (its entries, its bytes) and lets the
least recently used leave first once the sum passes its budget; an entry costlier than the
whole budget is kept alone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def _one(_: object) -> int:
    return 1


class Bounded(Generic[K, V]):
    """Key → value, the most recently used kept within `budget` (the sum of `cost`)."""

    def __init__(self, budget: int, cost: Callable[[V], int] = _one) -> None:
        self.budget = budget
        self._cost = cost
        self._items: dict[K, tuple[V, int]] = {}  # insertion order: least recently used first
        self.held = 0  # the sum of the costs of what is kept

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def get(self, key: K) -> V | None:
        """The value (now the most recently used), or None."""
        found = self._items.pop(key, None)
        if found is None:
            return None
        self._items[key] = found
        return found[0]

    def put(self, key: K, value: V) -> V:
        """Keep `value` under `key` (the least recently used leave to make room); `value`."""
        cost = self._cost(value)
        old = self._items.pop(key, None)
        if old is not None:
            self.held -= old[1]
        while self._items and self.held + cost > self.budget:
            self.held -= self._items.pop(next(iter(self._items)))[1]
        self._items[key] = (value, cost)
        self.held += cost
        return value

    def clear(self) -> None:
        self._items.clear()
        self.held = 0


class Shared(Bounded[K, V]):
    """`Bounded` for a module's cache that every thread of a process reads and fills (the
    daemon's landing loop and its promoter): each call holds one lock."""

    def __init__(self, budget: int, cost: Callable[[V], int] = _one) -> None:
        super().__init__(budget, cost)
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            return super().get(key)

    def put(self, key: K, value: V) -> V:
        with self._lock:
            return super().put(key, value)

    def clear(self) -> None:
        with self._lock:
            super().clear()
