"""redis-py's TCP connection with a write that never drops a cancel.

redis-py bounds a command's write with ``asyncio.wait_for`` when a socket timeout is set. On
Python 3.11 ``wait_for`` returns the result and drops a cancel that lands as the awaited work
completes, so a task cancelled at that moment goes on as if nothing happened: a lease heartbeat
stopped that way renewed its lease forever (docs/architecture.md, "Faults and recovery"), and a
run cancelled as one of its writes completed would not stop. :class:`CancelSafeConnection` bounds
the same write with ``asyncio.timeout``, which hands the cancel on; everything else, reads
included (they already use ``asyncio.timeout``), is redis-py's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from redis.asyncio import Connection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = ["CancelSafeConnection"]


class CancelSafeConnection(Connection):
    """A :class:`redis.asyncio.Connection` whose writes are cancelled like any other await.

    The contract is redis-py's: a write that outlasts ``socket_timeout`` closes the connection and
    raises redis-py's ``TimeoutError``; an ``OSError`` closes it and raises its
    ``ConnectionError``; any other interruption (a cancel) closes it (the command may be half
    sent) and propagates.
    """

    async def send_packed_command(
        self, command: bytes | str | Iterable[bytes], check_health: bool = True
    ) -> None:
        if not self.is_connected:
            await self.connect_check_health(check_health=False)
        if check_health:
            await self.check_health()  # type: ignore[no-untyped-call]
        if isinstance(command, str):
            command = command.encode()
        if isinstance(command, bytes):
            command = [command]
        writer = self._writer
        assert writer is not None  # connected above
        try:
            async with asyncio.timeout(self.socket_timeout):
                writer.writelines(command)
                await writer.drain()
        except TimeoutError:  # before OSError: on 3.11 TimeoutError is one
            await self.disconnect(nowait=True)
            raise RedisTimeoutError("Timeout writing to socket") from None
        except OSError as exc:
            await self.disconnect(nowait=True)
            raise RedisConnectionError(f"Error while writing to socket: {exc}") from exc
        except BaseException:
            await self.disconnect(nowait=True)
            raise
