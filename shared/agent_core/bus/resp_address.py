"""Where and as whom the lean client connects: a bus URL parsed, and what a new connection
sends first."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

from redis.asyncio import Redis

from agent_core.bus.resp_wire import Arg, Command

__all__ = ["RedisAddress"]


@dataclass(frozen=True, slots=True)
class RedisAddress:
    """Where and as whom to connect: parsed from ``redis://[[user]:password@]host[:port][/db]``
    or, for a server on this host, ``unix://[[user]:password@]/path/to/socket[?db=n]`` (then
    ``path`` is set and ``host``/``port`` are not used)."""

    host: str = "127.0.0.1"
    port: int = 6379
    db: int = 0
    username: str | None = None
    password: str | None = None
    path: str | None = None

    @classmethod
    def from_url(cls, url: str) -> RedisAddress:
        """Parse a ``redis://`` or ``unix://`` URL (the forms ``make_redis`` accepts; a unix
        URL's ``db`` and ``password`` may also be given in its query, as redis-py reads them);
        ``ValueError`` if not."""
        parts = urlsplit(url)
        username = unquote(parts.username) if parts.username else None
        password = unquote(parts.password) if parts.password else None
        if parts.scheme == "unix":
            query = parse_qs(parts.query)
            if not parts.path:
                raise ValueError("a unix:// bus URL names the socket's path")
            return cls(
                db=int(query.get("db", ["0"])[0]),
                username=username,
                password=query["password"][0] if "password" in query else password,
                path=unquote(parts.path),
            )
        if parts.scheme != "redis":
            raise ValueError(f"unsupported bus URL scheme {parts.scheme!r}")
        path = parts.path.strip("/")
        return cls(
            host=parts.hostname or "127.0.0.1",
            port=parts.port or 6379,
            db=int(path) if path else 0,
            username=username,
            password=password,
        )

    @classmethod
    def of(cls, redis: Redis) -> RedisAddress:
        """The address a redis-py client connects to (its pool's connection settings)."""
        kw = redis.connection_pool.connection_kwargs
        return cls(
            host=str(kw.get("host", "127.0.0.1")),
            port=int(kw.get("port", 6379)),
            db=int(kw.get("db", 0) or 0),
            username=kw.get("username"),
            password=kw.get("password"),
            path=kw.get("path") or None,
        )

    @property
    def where(self) -> str:
        """The server's address as a message names it: the socket's path, or ``host:port``."""
        return self.path if self.path is not None else f"{self.host}:{self.port}"

    def handshake(self) -> list[Command]:
        """The commands a new connection sends before anything else."""
        out: list[Command] = []
        if self.password is not None:
            auth: list[Arg] = ["AUTH"]
            if self.username is not None:
                auth.append(self.username)
            out.append([*auth, self.password])
        if self.db:
            out.append(["SELECT", self.db])
        return out
