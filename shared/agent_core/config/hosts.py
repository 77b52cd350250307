"""Host entries of ``sandbox.allowed_hosts``: parsed where the configuration is checked, used by
the sandbox's proxy (:mod:`agent_core.tools.sandbox.proxy`) to let a connection through."""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_PORTS", "parse_host_entry", "split_host_port"]

DEFAULT_PORTS: Final = frozenset({80, 443})


def split_host_port(text: str) -> tuple[str, int | None]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port``; raises ``ValueError``."""
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"{text!r} is not host[:port]")
        port_text = rest[1:] if rest else None
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    else:
        host, port_text = text, None
    port = None
    if port_text is not None:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(f"{text!r}: the port must be 1-65535")
        port = int(port_text)
    if not host or any(c in host for c in " /\\@?#\x00"):
        raise ValueError(f"{text!r} is not a host name")
    return host.lower().rstrip("."), port


def parse_host_entry(entry: str) -> tuple[str, frozenset[int]]:
    """An ``allowed_hosts`` entry: ``name``, ``*.domain`` (its subdomains), either with
    ``:port`` (without one, 80 and 443). Raises ``ValueError`` for anything else."""
    host, port = split_host_port(entry.strip())
    if "*" in host and not (host.startswith("*.") and "*" not in host[2:] and len(host) > 2):
        raise ValueError(f"{entry!r}: a wildcard is allowed only as a leading '*.'")
    return host, frozenset({port}) if port is not None else DEFAULT_PORTS
