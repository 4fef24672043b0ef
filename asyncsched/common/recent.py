"""The most recently used entries, a bounded number of them.

The decision path keeps a few large values per request shape (an answer per flavor, a host
view per answer, the column rows of each view's list, the allocation requests of each shape):
each in a :class:`Recent`, which holds at most ``size`` of them and forgets the one used
longest ago.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Recent(Generic[K, V]):
    """At most ``size`` entries, the most recently used last (a dict keeps insertion order)."""

    __slots__ = ("_items", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: dict[K, V] = {}

    def __len__(self) -> int:
        return len(self._items)

    def peek(self, key: K) -> V | None:
        """The entry, left where it is in the order."""
        return self._items.get(key)

    def get(self, key: K) -> V | None:
        """The entry, now the most recently used."""
        value = self._items.pop(key, None)
        if value is not None:
            self._items[key] = value
        return value

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` as the most recently used; forget the oldest past ``size``."""
        items = self._items
        items.pop(key, None)
        items[key] = value
        while len(items) > self.size:
            del items[next(iter(items))]

    def clear(self) -> None:
        self._items.clear()
