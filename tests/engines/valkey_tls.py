"""Valkey topologies on TLS for tests: one server, a Sentinel set and a Cluster, each speaking
TLS only, with client certificates required and a CA made for the run (:func:`make_test_ca`).

The embedded binary is built without TLS, so these are Debian's ``redis-server`` (built with it;
``.ci/run`` installs it) and its ``redis-cli``. Each is the plain topology of
:mod:`tests.engines.valkey_topologies` with its servers swapped: replicas, sentinels and the
cluster bus talk TLS to each other too (``tls-replication``, ``tls-cluster``), presenting the
client certificate, and :meth:`Topology.bus_settings` carries the certificates the services'
``[bus] tls`` would name.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from agent_core.service.valkey import find_free_port
from tests.engines.valkey_topologies import (
    ClusterSet,
    SentinelSet,
    Server,
    Topology,
)

__all__ = [
    "TestCa",
    "TlsClusterSet",
    "TlsSentinelSet",
    "TlsServer",
    "TlsStandalone",
    "make_test_ca",
    "start_tls",
]

_READY_S = 20.0


@dataclass(frozen=True)
class TestCa:
    """A CA made for one test run, with a server certificate for 127.0.0.1 and a client one."""

    ca_file: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_test_ca(root: Path) -> TestCa:
    """Write a fresh CA and the certificates it signs under ``root`` (PEM, keys unencrypted)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    root.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    def write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> Path:
        path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return path

    def write_cert(cert: x509.Certificate, path: Path) -> Path:
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return path

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("soong test CA"))
        .issuer_name(name("soong test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )

    def issue(common: str, usage: x509.ObjectIdentifier) -> tuple[x509.Certificate, Any]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(common))
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if usage == ExtendedKeyUsageOID.SERVER_AUTH:
            san = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return builder.sign(ca_key, hashes.SHA256()), key

    server, server_key = issue("127.0.0.1", ExtendedKeyUsageOID.SERVER_AUTH)
    client, client_key = issue("soong client", ExtendedKeyUsageOID.CLIENT_AUTH)
    return TestCa(
        ca_file=write_cert(ca, root / "ca.pem"),
        server_cert=write_cert(server, root / "server.pem"),
        server_key=write_key(server_key, root / "server.key"),
        client_cert=write_cert(client, root / "client.pem"),
        client_key=write_key(client_key, root / "client.key"),
    )


class TlsServer(Server):
    """One ``redis-server`` (or sentinel) on a TLS port only: ``port`` is its TLS port."""

    def __init__(
        self,
        data_dir: Path,
        port: int,
        ca: TestCa,
        extra: list[str] | None = None,
        *,
        sentinel: bool = False,
    ) -> None:
        super().__init__(data_dir, port, extra, sentinel=sentinel)
        self.ca = ca

    def tls_lines(self) -> list[tuple[str, str]]:
        """Its TLS settings: the server's certificate, the client one it presents to the others
        (a server certificate is not good for a client's part), clients checked, replication on
        TLS."""
        ca = self.ca
        return [
            ("port", "0"),
            ("tls-port", str(self.port)),
            ("tls-cert-file", str(ca.server_cert)),
            ("tls-key-file", str(ca.server_key)),
            ("tls-client-cert-file", str(ca.client_cert)),
            ("tls-client-key-file", str(ca.client_key)),
            ("tls-ca-cert-file", str(ca.ca_file)),
            ("tls-auth-clients", "yes"),
            ("tls-replication", "yes"),
        ]

    def argv(self) -> list[str]:
        if self.sentinel:
            return ["redis-server", str(self.data_dir / "sentinel.conf"), "--sentinel"]
        # The embedded server's command line on Debian's binary, its TLS settings last: a
        # later ``--port 0`` overrides the plain port the line starts with.
        _, *args = super().argv()
        tls = (arg for name, value in self.tls_lines() for arg in (f"--{name}", value))
        return ["redis-server", *args, *tls]

    def tls_kwargs(self) -> dict[str, Any]:
        """redis-py's arguments for a client of it."""
        return {
            "ssl": True,
            "ssl_ca_certs": str(self.ca.ca_file),
            "ssl_certfile": str(self.ca.client_cert),
            "ssl_keyfile": str(self.ca.client_key),
        }

    def client(self) -> redis.Redis:
        return redis.Redis(host=self.host, port=self.port, socket_timeout=5, **self.tls_kwargs())

    def wait_ready(self, timeout_s: float) -> None:
        """Block until a TLS PING answers; ``RuntimeError`` if it exits or times out."""
        deadline = time.monotonic() + timeout_s
        client = redis.Redis(
            host=self.host, port=self.port, socket_timeout=0.5, **self.tls_kwargs()
        )
        try:
            while True:
                if self.process is not None and self.process.poll() is not None:
                    raise RuntimeError(f"redis-server exited; see {self.data_dir}")
                with contextlib.suppress(redis.RedisError):
                    if client.ping():
                        return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server (TLS) did not answer on {self.port}")
                time.sleep(0.05)
        finally:
            client.close()


def _tls_settings(ca: TestCa) -> dict[str, str]:
    return {
        "ca_file": str(ca.ca_file),
        "cert_file": str(ca.client_cert),
        "key_file": str(ca.client_key),
    }


class TlsStandalone(Topology):
    """One node on TLS only."""

    kind = "standalone"

    def __init__(self, root: Path) -> None:
        self.ca = make_test_ca(root / "ca")
        self.servers = [TlsServer(root / "node", find_free_port(), self.ca)]

    @property
    def url(self) -> str:
        return f"rediss://127.0.0.1:{self.servers[0].port}"

    def bus_settings(self) -> dict[str, object]:
        return {**super().bus_settings(), "tls": _tls_settings(self.ca)}

    def start(self) -> None:
        """Start the server and wait until a TLS PING answers."""
        self.servers[0].start(_READY_S)


class TlsSentinelSet(SentinelSet):
    """:class:`SentinelSet` on TLS: the data nodes, the sentinels and their links."""

    def __init__(self, root: Path) -> None:
        self.ca = make_test_ca(root / "ca")
        super().__init__(root)

    def _server(
        self, data_dir: Path, port: int, extra: list[str] | None = None, *, sentinel: bool = False
    ) -> Server:
        return TlsServer(data_dir, port, self.ca, extra, sentinel=sentinel)

    def _sentinel_conf(self, sentinel: Server, primary: Server) -> str:
        assert isinstance(sentinel, TlsServer)
        plain = super()._sentinel_conf(sentinel, primary).replace(f"port {sentinel.port}\n", "")
        return "".join(f"{name} {value}\n" for name, value in sentinel.tls_lines()) + plain

    @property
    def url(self) -> str:
        return f"rediss://{self.host}"

    def bus_settings(self) -> dict[str, object]:
        return {**super().bus_settings(), "tls": _tls_settings(self.ca)}


class TlsClusterSet(ClusterSet):
    """:class:`ClusterSet` on TLS: the nodes, their cluster bus and the replication."""

    def __init__(self, root: Path) -> None:
        self.ca = make_test_ca(root / "ca")
        super().__init__(root)

    def _server(self, data_dir: Path, port: int, extra: list[str], host: str) -> Server:
        return TlsServer(data_dir, port, self.ca, [*extra, "--tls-cluster", "yes"])

    def _cli(self) -> list[str]:
        ca = self.ca
        return [
            "redis-cli", "--tls", "--cacert", str(ca.ca_file),
            "--cert", str(ca.client_cert), "--key", str(ca.client_key),
        ]  # fmt: skip

    @property
    def url(self) -> str:
        return f"rediss://127.0.0.1:{self.servers[0].port}"

    def bus_settings(self) -> dict[str, object]:
        return {**super().bus_settings(), "tls": _tls_settings(self.ca)}


def start_tls(kind: str, root: Path) -> Topology:
    """The (not yet started) TLS topology of ``kind``: ``tls`` (one server), ``tls_sentinel`` or
    ``tls_cluster``; on loopback only."""
    kinds: dict[str, type[TlsStandalone | TlsSentinelSet | TlsClusterSet]] = {
        "tls": TlsStandalone,
        "tls_sentinel": TlsSentinelSet,
        "tls_cluster": TlsClusterSet,
    }
    return kinds[kind](root)
