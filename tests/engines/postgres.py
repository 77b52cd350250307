"""A private PostgreSQL cluster for the tests: Debian's server binaries, ``initdb`` in a temporary
folder, one server on a free loopback port; a fresh database per test module.

PostgreSQL refuses to run as root, and CI runs the suite as root: the cluster's folder is handed
to an unprivileged user (Debian's ``postgres`` account, which the package creates, else
``nobody``) and ``initdb`` and ``pg_ctl`` run as that user through ``runuser``. The server listens
on 127.0.0.1 only, with password (SCRAM) authentication on TCP, so a test can also be refused.

Durability is off (``fsync``, ``synchronous_commit``, ``full_page_writes``): the cluster dies with
the session, and no test here kills the server to prove a commit survives a power loss.

A primary and its streaming standby (:func:`start_pair`, one pair per test module:
``postgres_pair``) are the failover tests': the standby is a ``pg_basebackup -R`` copy of the
primary on another free port, synchronous (``synchronous_standby_names``, with the primary's
``synchronous_commit`` on) so that a commit is acknowledged only once the standby has it. A test
kills the primary's postmaster (:meth:`PostgresCluster.kill`) and promotes the standby.

The multi-host tests start one on the harness's fabric instead (``start_cluster(listen=...,
clients=...)``): it listens on the engines' address and lets the hosts' subnet in, with the
same password authentication.

One cluster per pytest process (per xdist worker): start-up costs ~1 s, a ``CREATE DATABASE``
~50 ms. ``.ci/run`` installs the ``postgresql`` package, so nothing skips for want of it.
"""

from __future__ import annotations

import glob
import ipaddress
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import quote

import psycopg
import pytest

from agent_core.service.valkey import find_free_port

__all__ = [
    "PostgresCluster",
    "PostgresPair",
    "postgres_cluster",
    "postgres_dsn",
    "postgres_pair",
    "start_cluster",
    "start_pair",
]

SUPERUSER = "soong"


def server_bin_dir() -> Path:
    """The newest installed server's ``bin`` folder (``/usr/lib/postgresql/<major>/bin``)."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if not found:
        raise RuntimeError(
            "PostgreSQL's server is not installed (apt-get install postgresql; .ci/run does)"
        )
    return Path(found[-1]).parent


def _unprivileged_user() -> str:
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise RuntimeError("no unprivileged account (postgres or nobody) to run PostgreSQL as")


@dataclass
class PostgresCluster:
    """A running server: ``dsn(db)`` reaches it as the superuser over TCP with a password."""

    root: Path
    port: int
    password: str
    user: str | None  # the account the server runs as when started by root; None: ourselves
    bin_dir: Path
    host: str = "127.0.0.1"

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def dsn(self, dbname: str = "postgres", *, password: str | None = None) -> str:
        """A libpq URI for ``dbname`` (``password`` overrides the right one, for refusals)."""
        secret = quote(self.password if password is None else password, safe="")
        return f"postgresql://{SUPERUSER}:{secret}@{self.host}:{self.port}/{dbname}"

    def create_database(self, name: str) -> str:
        """A new, empty database; returns its DSN."""
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def drop_database(self, name: str) -> None:
        """Drop ``name``, ending the sessions still connected to it."""
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        """Stop the server at once and remove its folder."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    def kill(self, timeout_s: float = 30) -> None:
        """SIGKILL the postmaster, as a crash would: no shutdown checkpoint, no goodbye to the
        clients or the standby. Returns once it and every process it had started are gone.

        Its backends notice the postmaster's death and exit, but in their own time: a backend
        that had not yet noticed took a command sent just after the kill, committed it (its
        walsender still streaming to the standby) and acknowledged it, which a test that means
        "the server is gone" must not see (a CI flake).
        """
        pid = int((self.data_dir / "postmaster.pid").read_text().split()[0])
        children = _children(pid)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + timeout_s
        while live := [p for p in (pid, *children) if _alive(p)]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"PostgreSQL processes {live} outlived their postmaster")
            time.sleep(0.01)

    def promote(self) -> None:
        """Promote this standby to a primary (``pg_ctl promote``, waiting until it is one)."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-w", "promote")

    def _run(
        self, tool: str, *args: str, check: bool = True, env: Mapping[str, str] | None = None
    ) -> None:
        command = [str(self.bin_dir / tool), *args]
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
            env=None if env is None else {**os.environ, **env},
        )
        if check and result.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{tool} failed: {result.stderr.strip()}\n{tail}")


def _new_cluster(parent: Path | None, host: str = "127.0.0.1") -> PostgresCluster:
    """A cluster's folder (owned by the server's account) and its port, password and binaries;
    ``host``: the address it will listen on."""
    root = Path(tempfile.mkdtemp(prefix="soong-pg-", dir=parent))
    user = _unprivileged_user() if os.geteuid() == 0 else None
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    return PostgresCluster(
        root=root,
        port=find_free_port(),
        password=secrets.token_urlsafe(16),
        user=user,
        bin_dir=server_bin_dir(),
        host=host,
    )


def _start(cluster: PostgresCluster, settings: Mapping[str, str]) -> None:
    """``pg_ctl start`` the cluster's data folder on its port, loopback only."""
    options = " ".join(
        [
            f"-p {cluster.port}",
            f"-k {cluster.root}",
            f"-c listen_addresses={cluster.host}",
            *(f"-c {name}={value}" for name, value in settings.items()),
        ]
    )
    log = str(cluster.root / "server.log")
    cluster._run("pg_ctl", "-D", str(cluster.data_dir), "-l", log, "-o", options, "-w", "start")


_FAST: Final = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def start_cluster(
    parent: Path | None = None,
    *,
    durable: bool = False,
    settings: Mapping[str, str] = {},
    listen: str = "127.0.0.1",
    clients: str | None = None,
) -> PostgresCluster:
    """``initdb`` a new cluster in a temporary folder and start it on a free loopback port;
    ``durable``: with PostgreSQL's own durability (fsync at commit), as deployed (benches);
    ``settings``: server settings over the defaults; ``listen``: the one address it listens on
    (the loopback's by default); ``clients``: a network (CIDR) whose hosts may log in with the
    password too (``initdb``'s rules let in the loopback only)."""
    cluster = _new_cluster(parent, listen)
    pwfile = cluster.root / "pwfile"
    pwfile.write_text(cluster.password + "\n")
    os.chmod(pwfile, 0o600)
    if cluster.user is not None:
        entry = pwd.getpwnam(cluster.user)
        os.chown(pwfile, entry.pw_uid, entry.pw_gid)
    try:
        cluster._run(
            "initdb",
            "-D",
            str(cluster.data_dir),
            "-U",
            SUPERUSER,
            f"--pwfile={pwfile}",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )
        if clients is not None:
            hba = cluster.data_dir / "pg_hba.conf"
            with hba.open("a") as rules:  # the server's account owns the file; root appends
                rules.write(f"host all all {ipaddress.ip_network(clients)} scram-sha-256\n")
        _start(cluster, {**({} if durable else _FAST), "max_connections": "200", **settings})
    except BaseException:
        cluster.stop()
        raise
    return cluster


@dataclass
class PostgresPair:
    """A primary and its synchronous streaming standby, and one database on both."""

    primary: PostgresCluster
    standby: PostgresCluster
    dbname: str

    def dsn(self) -> str:
        """The DSN a writer is given for failover: both servers, whichever is the primary."""
        p, s = self.primary, self.standby
        secret = quote(p.password, safe="")
        return (
            f"postgresql://{SUPERUSER}:{secret}@{p.host}:{p.port},{s.host}:{s.port}/"
            f"{self.dbname}?target_session_attrs=read-write"
        )

    def stop(self) -> None:
        """Stop both servers (a killed primary's folder is removed all the same)."""
        self.standby.stop()
        self.primary.stop()


# How long a pair's set-up may wait for its standby to stream (a hang guard, not a figure).
_STREAMING_WITHIN_S: Final = 60.0


def start_pair(parent: Path | None = None) -> PostgresPair:
    """A primary (``synchronous_commit`` on), a database on it, and a standby made by
    ``pg_basebackup -R`` from it on another free port, streaming synchronously."""
    primary = start_cluster(parent, settings={"synchronous_commit": "on"})
    standby: PostgresCluster | None = None
    try:
        dbname = "soong_" + secrets.token_hex(6)
        primary.create_database(dbname)
        standby = _new_cluster(parent)
        standby.password = primary.password  # a copy of the primary: the same roles
        primary._run(
            "pg_basebackup",
            "-D",
            str(standby.data_dir),
            "-d",
            primary.dsn(),
            "-R",  # standby.signal and primary_conninfo: it follows the primary when started
            "-X",
            "stream",
            "--checkpoint=fast",  # not a spread one: the copy starts at once
            "--no-sync",
        )
        # The primary's synchronous settings are passed at its start or set after the copy,
        # so the standby, once promoted, waits for no standby of its own.
        _start(standby, {**_FAST, "max_connections": "200"})
        with psycopg.connect(primary.dsn(), autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
            conn.execute("SELECT pg_reload_conf()")
            deadline = time.monotonic() + _STREAMING_WITHIN_S
            while (
                conn.execute(
                    "SELECT 1 FROM pg_stat_replication WHERE state = 'streaming' "
                    "AND sync_state = 'sync'"
                ).fetchone()
                is None
            ):
                if time.monotonic() > deadline:
                    raise RuntimeError("the standby did not stream synchronously")
                time.sleep(0.05)
    except BaseException:
        if standby is not None:
            standby.stop()
        primary.stop()
        raise
    return PostgresPair(primary, standby, dbname)


@pytest.fixture(scope="module")
def postgres_pair() -> Iterator[PostgresPair]:
    """A primary and its synchronous standby for the test module (one pair per module: a
    failover test uses it up)."""
    pair = start_pair()
    try:
        yield pair
    finally:
        pair.stop()


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """One PostgreSQL server per pytest process (per xdist worker), stopped at its end."""
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def postgres_dsn(postgres_cluster: PostgresCluster) -> Iterator[str]:
    """A fresh database for the test module; its DSN (dropped after the module)."""
    name = "soong_" + secrets.token_hex(6)
    dsn = postgres_cluster.create_database(name)
    try:
        yield dsn
    finally:
        postgres_cluster.drop_database(name)


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from ``/proc``)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended while listed
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")
