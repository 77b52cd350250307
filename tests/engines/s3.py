"""A real S3-compatible server for the tests: moto's server mode on a free port, one per test
session (``s3_server``), with request signing enforced, so that refused credentials are refused
as a real store refuses them.

moto lets the first few requests through unsigned; :func:`start_moto` spends exactly those on
creating an IAM user with every permission and its key, which every later request must use.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["Cuttable", "MotoS3", "s3_server", "start_moto"]

# The unsigned requests moto lets through before it checks signatures: the three below.
_UNSIGNED = 3


@dataclass
class MotoS3:
    """A running moto server and the credentials it accepts."""

    endpoint: str
    access_key_id: str
    secret_access_key: str
    process: subprocess.Popen[bytes]

    def env(self) -> dict[str, str]:
        """The standard AWS variables a service needs to reach this server."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": "us-east-1",
        }

    def client(self) -> object:
        """A boto3 S3 client of this server (for test set-up and checks)."""
        import boto3  # only where a test uses the server (every session loads this module)

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
            region_name="us-east-1",
        )

    def new_bucket(self, name: str) -> str:
        """Create bucket ``name`` (once; a second call is no error) and return its name."""
        client = self.client()
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):  # type: ignore[attr-defined]
            client.create_bucket(Bucket=name)  # type: ignore[attr-defined]
        return name

    def stop(self) -> None:
        """Stop the server (its objects live in its memory only)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def start_moto(log: Path, host: str = "127.0.0.1", port: int | None = None) -> MotoS3:
    """Start moto's S3 server (``moto_serve``) on ``host`` (a free port unless given) and set up its one
    IAM user; raises if it does not answer within 30 s."""
    port = port or _free_port(host)
    endpoint = f"http://{host}:{port}"
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(_UNSIGNED)}
    with log.open("ab") as out:
        proc = subprocess.Popen(
            # moto's server with each request atomic (``moto_serve``: S3's conditional writes
            # refuse a racing second one and its reads pair a body with its own ETag; moto's
            # threaded server alone does neither).
            [sys.executable, str(Path(__file__).with_name("moto_serve.py")), host, str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection((host, port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"moto did not start: {log.read_text()[-2000:]}") from None
            time.sleep(0.1)
    import boto3

    iam = boto3.client(
        "iam",
        endpoint_url=endpoint,
        aws_access_key_id="setup",
        aws_secret_access_key="setup",
        region_name="us-east-1",
    )
    iam.create_user(UserName="soong")
    key = iam.create_access_key(UserName="soong")["AccessKey"]
    every = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
    }
    iam.put_user_policy(UserName="soong", PolicyName="all", PolicyDocument=json.dumps(every))
    return MotoS3(endpoint, key["AccessKeyId"], key["SecretAccessKey"], proc)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoS3]:
    """One moto server for the whole test session (each test module takes buckets of its own)."""
    server = start_moto(tmp_path_factory.mktemp("moto") / "moto.log")
    try:
        yield server
    finally:
        server.stop()


class Cuttable:
    """A loopback TCP relay in front of the S3 server that a test can cut and restore: the
    store going away and coming back, as clients see it (refused connections, then answers),
    without stopping the server other tests share."""

    def __init__(self, target: str) -> None:
        host, port = target.removeprefix("http://").split(":")
        self._target = (host, int(port))
        self._port = _free_port("127.0.0.1")
        self.endpoint = f"http://127.0.0.1:{self._port}"
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self.restore()

    def restore(self) -> None:
        """Accept connections again (on the same port)."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self._port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Refuse new connections and drop the open ones."""
        with self._lock:
            listener, self._listener = self._listener, None
            conns, self._open = self._open, []
        for s in [*conns, *([listener] if listener else [])]:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                upstream = socket.create_connection(self._target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)
