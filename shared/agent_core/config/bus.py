"""The bus's topology and TLS settings: ``[bus] topology``, ``sentinels``, ``sentinel_master``
and ``[bus.tls]`` (the rest of ``[bus]`` is ``BusSettings`` in ``schema.py``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

__all__ = ["BusTlsSettings", "Topology", "check_topology"]

Topology = Literal["standalone", "sentinel", "cluster"]

_HOST_PORT = re.compile(r"[A-Za-z0-9.\-]+:\d{1,5}|\[[0-9A-Fa-f:]+\]:\d{1,5}")


class BusTlsSettings(BaseModel):
    """PEM files for a ``rediss://`` bus: the CA that signed the servers' certificates and, when
    the servers ask for client certificates, this client's certificate and key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None

    @field_validator("ca_file", "cert_file", "key_file")
    @classmethod
    def _readable(cls, path: Path | None) -> Path | None:
        # Checked when the configuration loads: a missing file is a clear error at start-up,
        # not a TLS handshake failure at the first command.
        if path is not None and not path.is_file():
            raise ValueError(f"no such file: {path}")
        return path

    @property
    def given(self) -> bool:
        """Whether any file is set."""
        return any((self.ca_file, self.cert_file, self.key_file))


def check_topology(
    url: str | None,
    topology: Topology,
    sentinels: list[str],
    sentinel_master: str | None,
    tls: BusTlsSettings,
) -> None:
    """Raise ``ValueError`` (said plainly) for a ``[bus]`` whose parts do not fit together."""
    if topology == "sentinel":
        if len(sentinels) < 1 or not sentinel_master:
            raise ValueError(
                'topology "sentinel" needs sentinels = ["host:port", ...] and sentinel_master'
            )
    elif sentinels or sentinel_master:
        raise ValueError(f'sentinels and sentinel_master apply to topology "sentinel" only, '
                         f'not "{topology}"')  # fmt: skip
    bad = [s for s in sentinels if _HOST_PORT.fullmatch(s) is None]
    if bad:
        raise ValueError(f"sentinels must be host:port entries, not {bad}")
    if tls.given and (url is None or not url.startswith("rediss://")):
        raise ValueError("[bus.tls] files are given but redis_url is not a rediss:// URL")
    if (tls.cert_file is None) != (tls.key_file is None):
        raise ValueError("[bus.tls] cert_file and key_file go together")
    if url is not None and url.startswith("unix://") and topology != "standalone":
        raise ValueError(f'a unix:// redis_url is one node on this host, not a "{topology}"')
    if url is None and topology != "standalone":
        raise ValueError(f'topology "{topology}" needs redis_url (the embedded bus is one node)')
