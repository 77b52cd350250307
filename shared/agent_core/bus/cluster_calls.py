"""The request/reply calls of a Valkey Cluster on lean sockets: one :class:`LeanRedis` per primary.

On a Cluster, redis-py's ``RedisCluster`` made every call of :attr:`Bus.calls`, and its
machinery (per-command node lookup objects, a pool per node, retry wrappers) was most of the
Cluster's extra CPU per turn (docs/performance.md, "On a Valkey Cluster"). :class:`ClusterCalls`
makes the same calls on one lean socket per primary:

* the slot map comes from ``CLUSTER SLOTS`` (node addresses as the cluster announces them; an
  empty address means the node that answered), read on first use and again after a ``MOVED`` or
  a lost connection (a failover);
* a command is routed by the hash slot of its key (``redis.crc.key_slot``, redis-py's own
  function). Which argument is the key is explicit: :data:`KEY_POSITION` for the commands the
  services send through :attr:`Bus.calls`, and ``EVAL``/``EVALSHA`` by their ``numkeys``.
  Anything else (a command not in the table, a script without keys) goes to the redis-py
  cluster client (:class:`RedisPyCalls`), as before;
* ``MOVED``: the map is read again and the command retried on the new owner; ``ASK``: ``ASKING``
  then the command on the named node, in one write; ``TRYAGAIN``/``CLUSTERDOWN`` and a lost
  connection: retried after a short back-off, the map read again, at most :data:`ATTEMPTS` tries
  in all (at-least-once, as :class:`LeanRedis`'s own retries: a command may have run before the
  connection broke);
* :meth:`ClusterCalls.execute_many` sends each node's commands in one write, all nodes at once,
  and returns the replies in the commands' order; commands redirected are sent again in order;
* :meth:`ClusterCalls.transaction` needs its commands in one slot (the bus's keys are hash-tagged
  for that) and runs ``MULTI``/``EXEC`` on that slot's node.

Left out: TLS and Sentinel (redis-py's, as before); reads from replicas; ``ASK`` inside a
transaction (the transaction is retried until the migration ends or the attempts run out);
multi-key commands are routed by their first key (the server refuses a cross-slot one with
``CROSSSLOT``, as it would redis-py's).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from redis.crc import key_slot
from redis.exceptions import (
    AskError,
    ClusterDownError,
    ConnectionError,
    MovedError,
    ResponseError,
    TryAgainError,
)

from agent_core.bus.resp import LeanRedis
from agent_core.bus.resp_address import RedisAddress
from agent_core.bus.resp_wire import Arg, Command, error_from

__all__ = ["ATTEMPTS", "KEY_POSITION", "ClusterCalls", "key_of"]

log = logging.getLogger(__name__)

# Tries of one command in all (redirections, TRYAGAIN/CLUSTERDOWN, lost connections). With the
# back-off below the last try comes ~3.5 s after the first: a failover with a node timeout of a
# second or two promotes the replica within that.
ATTEMPTS = 7
_MAX_BACKOFF_S = 1.0
SLOTS = 16384

# Where the key is: the first argument, for the commands the services send through
# ``Bus.calls`` (grep the callers: publish, the consumer's replies and XACK, the run-events
# batcher, the run queue and its claim prelude, the gateway's wake-ups, the memory queue) and
# the other commands of one key the bus's data types have. EVAL/EVALSHA are read from their
# numkeys. A command left out goes to redis-py's cluster client, whose transactions start a
# thread per call: the claim prelude's INCR, missing here, made every claim take that path.
KEY_POSITION: dict[bytes, int] = {
    name: 1
    for name in (
        b"XADD", b"XACK", b"XLEN", b"XRANGE", b"XREVRANGE", b"XTRIM", b"XDEL",
        b"SET", b"GET", b"GETDEL", b"INCR", b"INCRBY", b"DECR", b"DEL", b"UNLINK", b"EXISTS",
        b"TYPE", b"EXPIRE", b"PEXPIRE", b"TTL", b"PTTL", b"PERSIST",
        b"RPUSH", b"LPUSH", b"LPOP", b"RPOP", b"LLEN", b"LINDEX", b"LRANGE", b"LREM", b"LTRIM",
        b"ZADD", b"ZREM", b"ZSCORE", b"ZCARD", b"ZRANGE", b"ZRANGEBYSCORE",
        b"HSET", b"HGET", b"HMGET", b"HGETALL", b"HDEL", b"HINCRBY", b"HEXISTS", b"HLEN",
        b"SADD", b"SREM", b"SMEMBERS", b"SISMEMBER", b"SCARD",
        b"SPUBLISH",
    )
}  # fmt: skip


def _bytes(arg: Arg) -> bytes:
    if isinstance(arg, bytes):
        return arg
    if isinstance(arg, str):
        return arg.encode()
    return repr(arg).encode()


def key_of(command: Command) -> bytes | None:
    """The key ``command`` is routed by, or ``None`` when the table does not say."""
    name = _bytes(command[0]).upper()
    if name in (b"EVALSHA", b"EVAL"):
        if len(command) > 3 and int(command[2]) > 0:
            return _bytes(command[3])
        return None
    position = KEY_POSITION.get(name)
    if position is None or len(command) <= position:
        return None
    return _bytes(command[position])


def _slot(command: Command) -> int | None:
    key = key_of(command)
    return None if key is None else key_slot(key)


def _retryable(reply: Any) -> bool:
    return isinstance(reply, MovedError | AskError | TryAgainError | ClusterDownError)


class ClusterCalls:
    """:class:`~agent_core.bus.calls.BusCalls` on a Cluster: one lean socket per primary, routed
    by slot, with redis-py's cluster client (``fallback``) for what the key table leaves out.
    Bound to the event loop it first runs on, as :class:`LeanRedis` is."""

    def __init__(self, seeds: Sequence[RedisAddress], fallback: Any) -> None:
        if not seeds:
            raise ValueError("a cluster needs at least one node to start from")
        self._seeds = list(seeds)
        self._credentials = seeds[0]
        self.fallback = fallback
        self._slots: list[tuple[str, int] | None] = [None] * SLOTS
        self._nodes: dict[tuple[str, int], LeanRedis] = {}
        self._refreshing: asyncio.Future[None] | None = None
        self._known: list[tuple[str, int]] = []
        self.refreshes = 0  # how often the map was read (observability and tests)
        self.moved = 0  # MOVED replies followed
        self.asked = 0  # ASK replies followed

    # -- the slot map ---------------------------------------------------------------------------

    def _node(self, address: tuple[str, int]) -> LeanRedis:
        node = self._nodes.get(address)
        if node is None:
            c = self._credentials
            node = self._nodes[address] = LeanRedis(
                RedisAddress(address[0], address[1], 0, c.username, c.password), retries=0
            )
        return node

    async def refresh(self) -> None:
        """Read the slot map again (one read for all the callers that ask at once)."""
        refreshing = self._refreshing
        if refreshing is None:
            refreshing = self._refreshing = asyncio.ensure_future(self._read_map())
        try:
            await asyncio.shield(refreshing)
        finally:
            if refreshing.done() and self._refreshing is refreshing:
                self._refreshing = None

    async def _read_map(self) -> None:
        # every node the last map named, replicas too: the seed may be the primary that died
        candidates = [*self._nodes, *self._known, *((s.host, s.port) for s in self._seeds)]
        last: Exception | None = None
        for address in dict.fromkeys(candidates):
            try:
                reply = await self._node(address).execute("CLUSTER", "SLOTS")
            except (ConnectionError, ResponseError) as exc:
                last = exc
                continue
            slots: list[tuple[str, int] | None] = [None] * SLOTS
            known: list[tuple[str, int]] = []
            for entry in reply:
                start, end = int(entry[0]), int(entry[1])
                nodes = [
                    (node[0].decode() if node[0] else address[0], int(node[1]))
                    for node in entry[2:]
                ]
                known += nodes
                for slot in range(start, end + 1):
                    slots[slot] = nodes[0]  # the primary comes first
            self._slots = slots
            self._known = list(dict.fromkeys(known))
            self.refreshes += 1
            for gone in set(self._nodes) - set(slots) - {(s.host, s.port) for s in self._seeds}:
                await self._nodes.pop(gone).aclose()
            return
        raise ConnectionError(f"no node of the cluster answered CLUSTER SLOTS: {last}")

    async def _owner(self, slot: int) -> tuple[str, int] | None:
        """The node serving ``slot`` by the map (read first if it has none); ``None`` while
        none does (a failed primary's slots during its failover): the caller retries."""
        if self._slots[slot] is None:
            await self.refresh()
        return self._slots[slot]

    async def address_of(self, key: bytes) -> RedisAddress | None:
        """The primary serving ``key``'s slot by the map, as whom the calls connect (``None``
        while no node serves it); a caller that meets ``MOVED`` there calls :meth:`refresh`."""
        owner = await self._owner(key_slot(key))
        if owner is None:
            return None
        c = self._credentials
        return RedisAddress(owner[0], owner[1], 0, c.username, c.password)

    async def _recover(self, failures: int, reply: Exception) -> None:
        """After a failed try: wait (except after a redirection) and read the map again."""
        if isinstance(reply, MovedError):
            self.moved += 1
            self._slots[reply.slot_id] = (reply.host, int(reply.port))
        else:
            await asyncio.sleep(min(_MAX_BACKOFF_S, 0.05 * 2**failures))
        try:
            await self.refresh()
        except ConnectionError:
            log.warning("cannot read the cluster's slot map; retrying on the old one")

    # -- the calls ------------------------------------------------------------------------------

    async def execute(self, *args: Arg) -> Any:
        """Run one command on its slot's node; return its reply (as :meth:`LeanRedis.execute`)."""
        slot = _slot(args)
        if slot is None:
            return await self.fallback.execute(*args)
        reply = (await self._run([args], [slot]))[0]
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def execute_packed(self, payload: bytes) -> Any:
        """Run one command packed by the caller (unpacked here to find its key)."""
        from agent_core.bus.calls import _unpack

        return await self.execute(*_unpack(payload))

    async def execute_many(
        self, commands: Sequence[Command], *, raise_on_error: bool = True
    ) -> list[Any]:
        """Run ``commands`` (each on its own), one write per node; replies in order."""
        if not commands:
            return []
        slots = [_slot(c) for c in commands]
        if None in slots:
            replies: list[Any] = await self.fallback.execute_many(
                commands, raise_on_error=raise_on_error
            )
            return replies
        replies = await self._run(commands, [s for s in slots if s is not None])
        if raise_on_error:
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
        return replies

    async def _run(self, commands: Sequence[Command], slots: Sequence[int]) -> list[Any]:
        """Every command's reply or error (exceptions in place), redirections followed."""
        replies: list[Any] = [None] * len(commands)
        todo = list(range(len(commands)))
        failures = 0
        while True:
            groups: dict[tuple[str, int], list[int]] = {}
            again: list[int] = []
            trouble: Exception | None = None
            for i in todo:
                owner = await self._owner(slots[i])
                if owner is None:
                    again.append(i)
                    trouble = replies[i] = ClusterDownError(f"slot {slots[i]} is served by no node")
                else:
                    groups.setdefault(owner, []).append(i)
            outcomes = await self._send_groups(commands, groups)
            for ix, outcome in zip(groups.values(), outcomes, strict=True):
                if isinstance(outcome, ConnectionError):
                    again += ix
                    trouble = outcome
                    for i in ix:
                        replies[i] = outcome
                    continue
                if isinstance(outcome, BaseException):
                    raise outcome
                for i, reply in zip(ix, outcome, strict=True):
                    # MovedError derives from AskError: a MOVED is not an ASK
                    if isinstance(reply, AskError) and not isinstance(reply, MovedError):
                        reply = await self._asking(reply, commands[i])
                    replies[i] = reply
                    if _retryable(reply):
                        again.append(i)
                        trouble = reply
            if not again:
                return replies
            failures += 1
            if failures >= ATTEMPTS:
                return replies  # the last errors stand, in place
            assert trouble is not None
            await self._recover(failures, trouble)
            todo = sorted(again)

    async def _send_groups(
        self, commands: Sequence[Command], groups: dict[tuple[str, int], list[int]]
    ) -> list[Any]:
        """Each node's replies, in the order of ``groups``; a node whose send failed has the
        exception in their place (on one node only a ``ConnectionError``; any other raises).

        Most calls name one node: that one is awaited directly, since a task per call (what
        ``gather`` makes of each awaitable) costs more than the call's own work on the client.
        Several nodes are written to at once, each by a task of its own."""
        if len(groups) == 1:
            [(address, ix)] = groups.items()
            try:
                return [await self._send(address, [commands[i] for i in ix])]
            except ConnectionError as exc:
                return [exc]
        outcomes: list[Any] = await asyncio.gather(
            *(self._send(address, [commands[i] for i in ix]) for address, ix in groups.items()),
            return_exceptions=True,
        )
        return outcomes

    async def _send(self, address: tuple[str, int], commands: list[Command]) -> list[Any]:
        return await self._node(address).execute_many(commands, raise_on_error=False)

    async def _asking(self, ask: AskError, command: Command) -> Any:
        """``ASKING`` then ``command`` on the node a migration named, in one write."""
        self.asked += 1
        try:
            replies = await self._node((ask.host, int(ask.port))).execute_many(
                [["ASKING"], command], raise_on_error=False
            )
        except ConnectionError as exc:
            return exc
        return replies[1]

    async def transaction(
        self, commands: Sequence[Command], *, then: Sequence[Command] = ()
    ) -> list[Any]:
        """``commands`` as one ``MULTI``/``EXEC`` on their one slot's node, then ``then`` (each
        on its own). Errors raise as :meth:`LeanRedis.transaction`'s do; a transaction refused
        while queued (a redirection, ``TRYAGAIN``) ran nothing and is tried again."""
        slots = {_slot(c) for c in commands}
        if None in slots or len(slots) != 1:
            results: list[Any] = await self.fallback.transaction(commands, then=then)
            return results
        slot = slots.pop()
        assert slot is not None
        failures = 0
        while True:
            address = await self._owner(slot)
            trouble: Exception | None = None
            try:
                if address is None:
                    raise ClusterDownError(f"slot {slot} is served by no node")
                replies = await self._send(address, [["MULTI"], *commands, ["EXEC"]])
            except (ConnectionError, ClusterDownError) as exc:
                trouble = exc
            else:
                queued = replies[1:-1]
                refused = [r for r in queued if isinstance(r, ResponseError)]
                if not refused:
                    results = replies[-1]
                    if isinstance(results, ResponseError):
                        raise results
                    for reply in results:
                        if isinstance(reply, ResponseError):
                            raise error_from(reply)
                    break
                if not _retryable(refused[0]):
                    raise refused[0]
                trouble = refused[0]
            failures += 1
            if failures >= ATTEMPTS:
                raise trouble
            await self._recover(failures, trouble)
        if then:
            await self.execute_many(then)
        return list(results)

    async def aclose(self) -> None:
        """Close every node's socket (the redis-py fallback is its owner's to close)."""
        nodes, self._nodes = self._nodes, {}
        for node in nodes.values():
            await node.aclose()
