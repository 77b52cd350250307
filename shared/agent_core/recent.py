"""A map bounded to the keys used most recently: the caches of parsed files, paths and costs that
a long-running process keeps (each would otherwise grow with every file, session or node seen).

Python's ``functools.lru_cache`` caches a function's results by its arguments; these caches are
keyed by something else than what computes the value (a file's path, checked against its stamp;
a node's id, checked against the node object), so they need a map, not a decorator.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

__all__ = ["Recent"]

K = TypeVar("K")
V = TypeVar("V")


class Recent(Generic[K, V]):
    """At most ``size`` entries; a :meth:`get` that finds its key and every :meth:`put` make
    the key the most recent, and a put past ``size`` drops the least recent. Not thread-safe:
    one thread (or one event loop) uses it. Values are never ``None`` (which :meth:`get` returns
    for a key not held)."""

    __slots__ = ("_entries", "size")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("a Recent map holds at least one entry")
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The value of ``key`` (now the most recent), ``None`` if it is not held."""
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        """Hold ``value`` for ``key`` as the most recent, dropping the least recent past the
        bound."""
        entries = self._entries
        entries[key] = value
        entries.move_to_end(key)
        if len(entries) > self.size:
            entries.popitem(last=False)

    def pop(self, key: K) -> V | None:
        """Drop ``key``; its value, ``None`` if it was not held."""
        return self._entries.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list[K]:
        """The keys held, least recent first."""
        return list(self._entries)
