"""A private PostgreSQL cluster for the tests: Debian's server binaries, ``initdb`` in a temporary
folder, one server on a free loopback port; a fresh database per test module.

PostgreSQL refuses to run as root, and CI runs the suite as root: the cluster's folder is handed
to an unprivileged user (Debian's ``postgres`` account, which the package creates, else
``nobody``) and ``initdb`` and ``pg_ctl`` run as that user through ``runuser``. The server listens
on 127.0.0.1 only, with password (SCRAM) authentication on TCP, so a test can also be refused.

Durability is off (``fsync``, ``synchronous_commit``, ``full_page_writes``): the cluster dies with
the session, and no test here kills the server to prove a commit survives a power loss.

One cluster per pytest process (per xdist worker): start-up costs ~1 s, a ``CREATE DATABASE``
~50 ms. ``.ci/run`` installs the ``postgresql`` package, so nothing skips for want of it.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

from agent_core.service.valkey import find_free_port

__all__ = ["PostgresCluster", "postgres_cluster", "postgres_dsn", "start_cluster"]

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

    def _run(self, tool: str, *args: str, check: bool = True) -> None:
        command = [str(self.bin_dir / tool), *args]
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
        if check and result.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{tool} failed: {result.stderr.strip()}\n{tail}")


def start_cluster(parent: Path | None = None, *, durable: bool = False) -> PostgresCluster:
    """``initdb`` a new cluster in a temporary folder and start it on a free loopback port;
    ``durable``: with PostgreSQL's own durability (fsync at commit), as deployed (benches)."""
    root = Path(tempfile.mkdtemp(prefix="soong-pg-", dir=parent))
    user = _unprivileged_user() if os.geteuid() == 0 else None
    cluster = PostgresCluster(
        root=root,
        port=find_free_port(),
        password=secrets.token_urlsafe(16),
        user=user,
        bin_dir=server_bin_dir(),
    )
    pwfile = root / "pwfile"
    pwfile.write_text(cluster.password + "\n")
    os.chmod(pwfile, 0o600)
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
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
        fast = ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        options = " ".join(
            [
                f"-p {cluster.port}",
                f"-k {root}",
                "-c listen_addresses=127.0.0.1",
                *([] if durable else fast),
                "-c max_connections=200",
            ]
        )
        log = str(root / "server.log")
        cluster._run("pg_ctl", "-D", str(cluster.data_dir), "-l", log, "-o", options, "-w", "start")
    except BaseException:
        cluster.stop()
        raise
    return cluster


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
