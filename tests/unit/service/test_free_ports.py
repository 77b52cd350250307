"""Ports handed to the stack's processes: the kernel may hand a port out again as soon as it was
released, so ``soong-agent up`` once gave a service's ops port the very port its gateway was
about to bind (a test's ``SOONG_GATEWAY_PORT``, found free a moment before): the ops server
answered ``/readyz`` on the gateway's URL and every API call got ``not found``. A port promised
to someone is excluded, and each process's port differs from the others'."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace, TracebackType
from typing import Any

import pytest

import agent_core.service.valkey as valkey
from services.stack import up


class _Kernel:
    """Hands out ports from a script, as ``bind(("127.0.0.1", 0))`` would."""

    def __init__(self, ports: list[int]) -> None:
        self.ports: Iterator[int] = iter(ports)

    def socket(self, *_: Any) -> _Kernel._Socket:
        return self._Socket(next(self.ports))

    def patch(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Stand in for the ``socket`` module of ``find_free_port``'s module only."""
        fake = SimpleNamespace(socket=self.socket, AF_INET=0, SOCK_STREAM=0)
        monkeypatch.setattr(valkey, "socket", fake)

    class _Socket:
        def __init__(self, port: int) -> None:
            self.port = port

        def __enter__(self) -> _Kernel._Socket:
            return self

        def __exit__(self, *_: type[BaseException] | BaseException | TracebackType | None) -> None:
            return None

        def bind(self, _: tuple[str, int]) -> None:
            return None

        def getsockname(self) -> tuple[str, int]:
            return ("127.0.0.1", self.port)


GATEWAY = 41000


def test_a_promised_port_is_never_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    _Kernel([GATEWAY, GATEWAY, 41001]).patch(monkeypatch)
    assert valkey.find_free_port(exclude={GATEWAY}) == 41001


def test_the_stacks_ops_ports_are_distinct_and_never_the_gateways(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The kernel offers the gateway's port first, then every port twice.
    offered = [GATEWAY] + [p for p in range(41001, 41020) for _ in (0, 1)]
    _Kernel(offered).patch(monkeypatch)
    specs, ops = up._children({}, 2, "127.0.0.1", GATEWAY)
    ports = [int(url.rsplit(":", 1)[1]) for url in ops.values()]
    assert GATEWAY not in ports
    assert len(ports) == len(set(ports)) == len(ops) >= 5  # writer, wal, memory, 2 workers, gw
    assert {int(s.env["SOONG_OPS_PORT"]) for s in specs} == set(ports)
