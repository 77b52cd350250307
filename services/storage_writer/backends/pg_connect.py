"""Connecting to PostgreSQL for the ``postgres`` backend: the DSN, the parameters every
connection gets, and the checks start-up makes of the server.

The server comes from the environment's ``SOONG_POSTGRES_DSN`` (a libpq connection string or
URI), with libpq's own ``PG*`` variables filling in what it leaves out, as libpq does. The DSN
never lives in ``config.toml``: it may carry a password.

Connecting and checking the server turn each way it can fail into one clear, typed error (the
CLI prints it as one line, the process exits non-zero):

- ``postgres_dsn_missing``: no DSN and no ``PG*`` variable either (:func:`resolve_dsn`);
- ``postgres_dsn_invalid``: the DSN is not a libpq connection string or URI (:func:`connect`);
- ``postgres_unreachable``: no answer (wrong host or port, server down, name not resolved);
- ``postgres_auth_refused``: the server refused the user or password;
- ``postgres_too_old``: a server before PostgreSQL 15 (``MERGE``, ``UNIQUE NULLS NOT
  DISTINCT`` and the faster sorts this schema relies on are 15's).

The password never reaches a message: errors name host, port and database only.

Every connection (:func:`connect`) carries a connect timeout, the writer's application name and
keepalives on both ends (:func:`connection_defaults`); what the DSN sets itself wins.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Final

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from agent_core.errors import ConfigError, StorageError

__all__ = [
    "DSN_ENV",
    "MIN_SERVER_VERSION",
    "check_server",
    "check_version",
    "connect",
    "connection_defaults",
    "resolve_dsn",
    "settings_named",
]

DSN_ENV: Final = "SOONG_POSTGRES_DSN"
MIN_SERVER_VERSION: Final = 150000  # libpq's server_version form: 15.0
_CONNECT_TIMEOUT_S: Final = 5
# What libpq reports, and SQLSTATEs, when the server refused who we are (not where we went).
_AUTH_STATES: Final = frozenset({"28000", "28P01"})
_AUTH_WORDS: Final = (
    "password authentication failed",
    "no pg_hba.conf entry",
    "authentication failed",
    "password is required",
    "does not exist",  # role "x" does not exist / database "y" does not exist
)


def resolve_dsn(env: Mapping[str, str] | None = None) -> str:
    """The DSN from ``SOONG_POSTGRES_DSN``; empty when only libpq's ``PG*`` variables name the
    server (libpq reads them itself); ``postgres_dsn_missing`` when nothing names it."""
    env = os.environ if env is None else env
    dsn = env.get(DSN_ENV, "").strip()
    if dsn or any(key in env for key in ("PGHOST", "PGSERVICE", "PGDATABASE")):
        return dsn
    raise ConfigError(
        "postgres_dsn_missing",
        f'[storage] backend is "postgres" but {DSN_ENV} is not set '
        "(e.g. postgresql://soong@db.internal:5432/soong)",
        details={"env": DSN_ENV},
    )


def _where(dsn: str) -> str:
    """host:port/dbname of a DSN, for messages (never its password)."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "the server named by " + DSN_ENV
    host = str(parts.get("host") or os.environ.get("PGHOST") or "localhost")
    port = str(parts.get("port") or os.environ.get("PGPORT") or "5432")
    db = str(parts.get("dbname") or os.environ.get("PGDATABASE") or parts.get("user") or "")
    return f"{host}:{port}/{db}"


def connect(dsn: str, *, autocommit: bool = False) -> psycopg.Connection[tuple[object, ...]]:
    """A connection (autocommit as asked, with :func:`connection_defaults` added), or the typed
    error of this module's list: ``postgres_dsn_invalid``, ``postgres_unreachable`` or
    ``postgres_auth_refused``."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise ConfigError(
            "postgres_dsn_invalid",
            f"{DSN_ENV} is not a libpq connection string or URI",
            details={"env": DSN_ENV},
        ) from exc
    conninfo = make_conninfo(dsn, **connection_defaults(parts))
    try:
        return psycopg.connect(conninfo, autocommit=autocommit)
    except psycopg.OperationalError as exc:
        raise _classify(exc, _where(dsn)) from None


# A server or host that goes silent (a power cut, a cut link: no FIN, no RST) is noticed from
# both ends within about idle + interval × count seconds instead of the kernel's two hours:
# libpq's keepalives and ``tcp_user_timeout`` on the writer's side, and the same numbers asked of
# the server for this session, so a dead writer host's backend (holding a partition's lock) ends
# and another writer can take the partition over.
_KEEPALIVE: Final = {
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
    "tcp_user_timeout": "30000",  # ms: data unacknowledged this long ends the connection
}
_SERVER_SIDE: Final = {  # the server's settings and the client parameter they mirror
    "tcp_keepalives_idle": "keepalives_idle",
    "tcp_keepalives_interval": "keepalives_interval",
    "tcp_keepalives_count": "keepalives_count",
    "tcp_user_timeout": "tcp_user_timeout",
}


# A server setting in libpq's ``options``: ``-c name=value``, ``-cname=value`` or
# ``--name=value`` (the server reads ``-`` in a name as ``_``).
_OPTION_SETTING = re.compile(r"(?:^|\s)(?:-c\s*|--)([A-Za-z0-9_.-]+)=")


def settings_named(options: str) -> set[str]:
    """The server settings a libpq ``options`` string sets, in the server's spelling (pure)."""
    return {m.group(1).replace("-", "_").lower() for m in _OPTION_SETTING.finditer(options)}


def connection_defaults(parts: Mapping[str, object]) -> dict[str, str | int]:
    """The parameters the writer adds to a DSN's ``parts`` (pure): a connect timeout, its
    application name, and keepalives on both ends (see ``_KEEPALIVE``). What the DSN sets wins,
    on either end: a client parameter it names is kept and mirrored to the server, a server
    setting its ``options`` already names (in any of libpq's spellings, :func:`settings_named`)
    is not added again, and ``keepalives=0`` turns both off.
    """
    off = str(parts.get("keepalives", "1")).strip() == "0"
    out: dict[str, str | int] = {
        "connect_timeout": _CONNECT_TIMEOUT_S,
        "application_name": "soong-storage-writer",
        **({} if off else _KEEPALIVE),
    }
    out = {k: v for k, v in out.items() if k not in parts}
    if off:
        return out
    client = {**_KEEPALIVE, **{k: str(v) for k, v in parts.items() if k in _KEEPALIVE}}
    options = str(parts.get("options") or "")
    named = settings_named(options)
    extra = [
        f"-c {name}={client[param]}" for name, param in _SERVER_SIDE.items() if name not in named
    ]
    if extra:
        out["options"] = " ".join([options, *extra]).strip()
    return out


def _classify(exc: psycopg.OperationalError, where: str) -> StorageError:
    """The typed error for a connection that failed: ``postgres_auth_refused`` when the server
    refused who we are, else ``postgres_unreachable`` (retryable); ``where`` has no password."""
    text = str(exc)
    if exc.sqlstate in _AUTH_STATES or any(word in text for word in _AUTH_WORDS):
        return StorageError(
            "postgres_auth_refused",
            f"PostgreSQL at {where} refused the credentials of {DSN_ENV} "
            "(check the user, password and pg_hba.conf)",
            details={"server": where},
        )
    return StorageError(
        "postgres_unreachable",
        f"PostgreSQL at {where} did not answer (is it running, and are host and port right?)",
        details={"server": where},
        retryable=True,
    )


def check_version(server_version: int, where: str = "the server") -> None:
    """Refuse a server older than :data:`MIN_SERVER_VERSION` (``postgres_too_old``)."""
    if server_version < MIN_SERVER_VERSION:
        major = server_version // 10000
        raise StorageError(
            "postgres_too_old",
            f"PostgreSQL at {where} is version {major}; the storage-writer needs 15 or later",
            details={"server": where, "server_version": server_version},
        )


def check_server(dsn: str) -> int:
    """Connect once, check the version; return it (libpq's integer form, e.g. 150018)."""
    with connect(dsn, autocommit=True) as conn:
        version = conn.info.server_version
        check_version(version, _where(dsn))
        return version
