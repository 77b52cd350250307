"""Networks beside loopback that tests may connect to: the multi-host harness's own subnets
(``tests/multinode/fabric.py`` adds each fabric's while it exists). Nothing else is allowed:
``tests/conftest.py`` refuses every other outbound connection."""

from __future__ import annotations

import ipaddress

__all__ = ["ALLOWED"]

ALLOWED: list[ipaddress.IPv4Network] = []
