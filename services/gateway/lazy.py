"""Parts of the gateway built on first use: the MCP and A2A doors.

Their SDKs (``mcp``'s server, ``a2a-sdk`` with protobuf and Google's API core) take seconds of
CPU to import, which every gateway start would pay (and every test stack) though most
deployments never receive an MCP or A2A call. :class:`Lazy` imports and builds its part when the
first request needs it, once, and closes it at stop only if it was ever built.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

__all__ = ["Closable", "Lazy"]


class Closable(Protocol):
    """What a lazily built part must offer: a close at the service's stop."""

    async def close(self) -> None: ...


T = TypeVar("T", bound=Closable)


class Lazy(Generic[T]):
    """A part built by ``factory`` on the first :meth:`get` (concurrent first calls build once)."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._built: T | None = None
        self._lock: asyncio.Lock | None = None  # made in the loop that first asks

    async def get(self) -> T:
        """The part, built now if this is the first call."""
        if self._built is None:
            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock:
                if self._built is None:
                    # The import runs on the loop: a one-off pause of the first call only.
                    self._built = self._factory()
        return self._built

    @property
    def built(self) -> bool:
        """Whether the part exists (a test's and the stop's question)."""
        return self._built is not None

    async def close(self) -> None:
        """Close the part if it was built; nothing to do otherwise."""
        if self._built is not None:
            await self._built.close()
