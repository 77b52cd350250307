"""The process's bus client: one redis-py client and the object that makes its request/reply
calls, through the lean client where it speaks the topology and through redis-py where it does not.

:class:`Bus` is made once per process (the service context owns it; a command or test that has
no context makes its own) and passed to whatever calls the bus: nothing finds it by lookup. Its
:attr:`Bus.calls` is the :class:`~agent_core.bus.resp.LeanRedis` connecting where the redis-py
client does (one plain node, where the lean client's saving was measured), on a plain-TCP
Cluster :class:`~agent_core.bus.cluster_calls.ClusterCalls` (one lean socket per primary, routed
by slot), or :class:`RedisPyCalls`, the same calls made through the redis-py client itself
(Sentinel, TLS: redis-py finds the primary again and speaks TLS).
:class:`LeanScript` calls a Lua script through it. :attr:`Bus.rounds` (:class:`WriteRounds`)
writes what many writers of the process queue (the runs' events) in one batch per round.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from typing import Any, Protocol

import hiredis
from redis.asyncio import Redis
from redis.exceptions import NoScriptError

from agent_core.bus.cluster_calls import ClusterCalls
from agent_core.bus.resp import LeanRedis
from agent_core.bus.resp_address import RedisAddress
from agent_core.bus.resp_wire import Arg, Command

__all__ = [
    "Bus",
    "BusCalls",
    "LeanScript",
    "RedisPyCalls",
    "RoundSource",
    "WriteRounds",
    "plain_cluster_seeds",
    "speaks_plain_resp",
]


class BusCalls(Protocol):
    """The calls :attr:`Bus.calls` gives: :class:`LeanRedis`, ``ClusterCalls`` or
    :class:`RedisPyCalls`."""

    async def execute(self, *args: Arg) -> Any: ...
    async def execute_packed(self, payload: bytes) -> Any: ...
    async def execute_many(
        self, commands: Sequence[Command], *, raise_on_error: bool = True
    ) -> list[Any]: ...
    async def transaction(
        self, commands: Sequence[Command], *, then: Sequence[Command] = ()
    ) -> list[Any]: ...
    async def aclose(self) -> None: ...


class RedisPyCalls:
    """The calls of :class:`LeanRedis`, made through a redis-py client: the topologies the lean
    socket does not speak (Sentinel, Cluster, TLS) hand them to redis-py, which finds the primary
    again after a failover, follows ``MOVED``/``ASK`` and speaks TLS (docs/architecture.md,
    "Bus"). Replies are redis-py's for the same command (raw, without ``decode_responses``)."""

    def __init__(self, redis: Any) -> None:
        self._redis = redis

    async def execute(self, *args: Arg) -> Any:
        """Run one command; return its reply."""
        return await self._redis.execute_command(*args)

    async def execute_packed(self, payload: bytes) -> Any:
        """Run one command packed by the caller (a RESP array of
        :func:`~agent_core.bus.resp_wire.bulk` strings)."""
        return await self.execute(*_unpack(payload))

    async def execute_many(
        self, commands: Sequence[Command], *, raise_on_error: bool = True
    ) -> list[Any]:
        """Run ``commands`` (each on its own, in one pipeline); replies in order."""
        if not commands:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for command in commands:
                pipe.execute_command(*command)
            replies: list[Any] = await pipe.execute(raise_on_error=raise_on_error)
        return replies

    async def transaction(
        self, commands: Sequence[Command], *, then: Sequence[Command] = ()
    ) -> list[Any]:
        """``commands`` as one transaction (their keys share a slot), then ``then``."""
        async with self._redis.pipeline(transaction=True) as pipe:
            for command in commands:
                pipe.execute_command(*command)
            results: list[Any] = await pipe.execute()
        if then:
            await self.execute_many(then)
        return results

    async def aclose(self) -> None:
        """Nothing of its own to close: the redis-py client owns the connections."""


def _unpack(payload: bytes) -> list[bytes]:
    """The arguments of one RESP array of bulk strings (what
    :func:`~agent_core.bus.resp_wire.encode` packs)."""
    reader = hiredis.Reader()
    reader.feed(payload)
    parts = reader.gets()
    if not isinstance(parts, list):
        raise ValueError("not a RESP array")
    return [bytes(p) for p in parts]


def plain_cluster_seeds(redis: Any) -> list[RedisAddress] | None:
    """The nodes a plain-TCP ``RedisCluster`` starts from (with its credentials), or ``None``
    for anything else (a single node, Sentinel, a Cluster on TLS)."""
    if isinstance(redis, Redis) or not hasattr(redis, "nodes_manager"):
        return None
    kw = redis.connection_kwargs
    connection_class = getattr(kw.get("connection_class"), "__name__", "")
    if kw.get("ssl") or "SSL" in connection_class or "Unix" in connection_class:
        return None
    return [
        RedisAddress(node.host, int(node.port), 0, kw.get("username"), kw.get("password"))
        for node in redis.nodes_manager.startup_nodes.values()
    ]


def speaks_plain_resp(redis: Any) -> bool:
    """Whether ``redis`` is one plain connection target, over TCP or a unix socket (what
    :class:`LeanRedis` speaks); not TLS, Sentinel or a Cluster."""
    if not isinstance(redis, Redis):
        return False  # a RedisCluster
    pool = redis.connection_pool
    if type(pool).__name__ == "SentinelConnectionPool":
        return False
    return not pool.connection_kwargs.get("ssl", False) and "SSL" not in getattr(
        pool.connection_class, "__name__", ""
    )


class RoundSource(Protocol):
    """A writer whose queued commands :class:`WriteRounds` writes (a run's event stream)."""

    def take(self) -> list[Command]:
        """The commands queued since the last call (none is fine), in the order to write them;
        from now on they are the round's."""
        ...

    def written(self, error: BaseException | None) -> None:
        """The round that held what :meth:`take` returned is over: written, or failed with
        ``error``."""
        ...


class WriteRounds:
    """Writes the commands many writers queue in one batch per round, on one bus's calls.

    Idle, a writer's commands are written at once (a round starts when it wakes the rounds);
    busy, whatever queued up during a round — from any number of writers — goes out in the next
    one, so 50 streaming runs cost a few round trips per tick, not 50. A writer's commands keep
    their order (each round takes them in the order it queued them). Made by :attr:`Bus.rounds`
    for one event loop; its task runs on that loop.
    """

    def __init__(self, bus: Bus) -> None:
        self._bus = bus
        self._ready: dict[RoundSource, None] = {}  # writers with work, in the order they woke
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    def wake(self, source: RoundSource) -> None:
        """``source`` has work: it is taken in the next round (needs the running loop)."""
        self._ready[source] = None
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="bus-write-rounds")

    async def aclose(self) -> None:
        """Write what is queued, then end the rounds' task (a task left pending when its loop
        closes is destroyed mid-wait, and asyncio says so)."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._ready:
                sources = list(self._ready)
                self._ready.clear()
                await self._write_round(sources)
            if self._closing:
                return

    async def _write_round(self, sources: list[RoundSource]) -> None:
        commands: list[Command] = []
        taken: list[RoundSource] = []
        for source in sources:
            try:
                commands += source.take()
            except Exception as exc:  # that writer's round failed; the others' goes on
                source.written(exc)
            else:
                taken.append(source)
        error: BaseException | None = None
        try:
            await self._bus.calls.execute_many(commands)  # one write on the lean socket
        except Exception as exc:  # every writer of the round hears of it
            error = exc
        finally:  # however the round ended, its writers never wait for it again
            for source in taken:
                source.written(error)


class Bus:
    """One process's bus client: the redis-py client (blocking reads, scripts it registers,
    admin) and :attr:`calls`, its request/reply calls on the lean socket where that speaks the
    topology. Made once by its owner, passed to every user, closed by :meth:`aclose`.

    Constructing it does no I/O. The lean client connects on first use and is bound to the event
    loop it first ran on: used from another loop (a command or test that runs several), it is
    made again for that loop, as a redis-py connection would be.
    """

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self.plain = speaks_plain_resp(redis)
        self._lean: LeanRedis | ClusterCalls | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # A plain-TCP Cluster: lean sockets per primary, redis-py for what they leave out.
        self._seeds = plain_cluster_seeds(redis)
        # Sentinel, TLS: redis-py's own connections, loop-bound by redis-py itself
        lean = self.plain or self._seeds is not None
        self._redis_py: RedisPyCalls | None = None if lean else RedisPyCalls(redis)
        self._rounds: WriteRounds | None = None
        self._rounds_loop: asyncio.AbstractEventLoop | None = None

    @property
    def calls(self) -> BusCalls:
        """The request/reply calls of this bus for the running event loop."""
        if self._redis_py is not None:
            return self._redis_py
        loop = asyncio.get_running_loop()
        if self._lean is None or self._loop is not loop:
            if self._seeds is not None:
                self._lean = ClusterCalls(self._seeds, RedisPyCalls(self.redis))
            else:
                self._lean = LeanRedis(RedisAddress.of(self.redis))
            self._loop = loop
        return self._lean

    @property
    def rounds(self) -> WriteRounds:
        """The batched writes of this bus for the running event loop (made on first use, and
        again for another loop, as :attr:`calls` is)."""
        loop = asyncio.get_running_loop()
        if self._rounds is None or self._rounds_loop is not loop:
            self._rounds = WriteRounds(self)
            self._rounds_loop = loop
        return self._rounds

    async def aclose(self) -> None:
        """Write the batched writes still queued, close the lean socket, then the redis-py
        client (idempotent).

        A lean socket of another loop is left alone: that loop's transports cannot be touched
        from this one (and once it is closed they are of no use to anyone)."""
        rounds, self._rounds = self._rounds, None
        if rounds is not None and self._rounds_loop is asyncio.get_running_loop():
            await rounds.aclose()
        lean, self._lean = self._lean, None
        if lean is not None and self._loop is asyncio.get_running_loop():
            await lean.aclose()
        await self.redis.aclose()


class LeanScript:
    """A Lua script called through a :class:`Bus`'s :attr:`~Bus.calls`, as redis-py's
    ``register_script`` calls it: ``EVALSHA`` with the script's SHA-1, and ``EVAL`` with its text
    when the server does not hold it (after a restart or ``SCRIPT FLUSH``; ``EVAL`` caches it
    again). Replies are raw, as redis-py's are without ``decode_responses``."""

    def __init__(self, bus: Bus, text: str) -> None:
        self._bus = bus
        self.text = text
        self.sha = hashlib.sha1(text.encode()).hexdigest()

    async def __call__(self, keys: Sequence[Arg] = (), args: Sequence[Arg] = ()) -> Any:
        """Run the script on ``keys`` with ``args``; error replies raise as in :meth:`LeanRedis.execute`."""
        lean = self._bus.calls
        try:
            return await lean.execute("EVALSHA", self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return await lean.execute("EVAL", self.text, len(keys), *keys, *args)
