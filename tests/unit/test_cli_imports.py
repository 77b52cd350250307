"""Building the command line imports nothing heavy: ``soong-agent --help`` (or a typo) answers
at once instead of spending seconds importing the client, pydantic and the bus. Each command
module registered under the entry points builds only its parsers; the command's own code loads
when it runs. (How much CPU ``--help`` costs is a figure of ``bench/cli.py``.)"""

from __future__ import annotations

import subprocess
import sys

from agent_core.bus import SERVICE_NAMES
from services.stack.cli import SERVICES
from tests.conftest import REPO

# What must not load just to print the help: each costs a large share of a second.
_HEAVY = ("pydantic", "redis", "faststream", "httpx", "rich", "fastapi", "openai", "anthropic")

_PROBE = f"""
import sys
from agent_core.cli import build_parser
build_parser().format_help()
print(",".join(sorted(m for m in {_HEAVY!r} if m in sys.modules)))
"""


def test_building_the_parser_imports_nothing_heavy() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


def test_the_probe_sees_a_heavy_import() -> None:
    probe = _PROBE.replace("build_parser().format_help()", "import pydantic")
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert done.stdout.strip() == "pydantic"


def test_importing_the_sdk_package_loads_the_client_only_when_used() -> None:
    code = (
        "import sys, soong_agent; before = 'soong_agent._client' in sys.modules; "
        "soong_agent.AsyncClient; print(before, 'soong_agent._client' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert done.stdout.split() == ["False", "True"], done.stderr


def test_importing_the_sdk_package_loads_no_bus_client_nor_broker() -> None:
    # The HTTP SDK talks to the gateway only: a program that imports it pays for no bus library.
    code = (
        "import sys, soong_agent\n"
        "print(sorted(m for m in ('redis', 'faststream', 'hiredis') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_sdk_client_loads_no_broker_library() -> None:
    # Using the client loads the server's models (one definition each); FastStream, the broker
    # library, is none of theirs.
    code = (
        "import sys, soong_agent, soong_agent.types\n"
        "soong_agent.AsyncClient, soong_agent.Client\n"
        "print('soong_agent._client' in sys.modules, 'faststream' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert done.stdout.split() == ["True", "False"], done.stderr


_USE_THE_CLIENT = """
import asyncio, sys
import httpx
import soong_agent

def answer(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"scope": "user", "content": "- likes tea", "etag": "e1"})

async def main() -> None:
    client = soong_agent.AsyncClient(
        "http://gateway.test", "key", transport=httpx.MockTransport(answer)
    )
    memory = await client.memory.read()
    assert memory.etag == "e1", memory
    await client.aclose()

asyncio.run(main())
print(sorted(m for m in ("redis", "faststream", "hiredis") if m in sys.modules))
"""


def test_using_the_sdk_client_loads_no_bus_client_nor_broker() -> None:
    # Its models (the memory files' among them) load, never the bus client they sit beside.
    done = subprocess.run(
        [sys.executable, "-c", _USE_THE_CLIENT],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_serve_offers_every_service() -> None:
    assert SERVICES == SERVICE_NAMES


def test_the_key_commands_load_redis_but_not_the_broker_library() -> None:
    # `soong-agent keys` talks to Redis alone: FastStream (about half a second of CPU) stays out.
    code = (
        "import sys\n"
        "from services.gateway.devkey import reachable_redis\n"
        "from services.gateway.keys import ApiKeyStore\n"
        "from services.stack.commands import settings_with_stack\n"
        "print('redis' in sys.modules, 'faststream' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert done.stdout.split() == ["True", "False"], done.stderr


def test_every_name_of_the_bus_package_is_what_it_names_after_any_import_order() -> None:
    # A submodule imported first binds its name on the package: a lazily loaded name equal to
    # a submodule's would then be the module, not the function (as `publish` once was).
    code = (
        "import importlib, pkgutil, agent_core.bus as bus\n"
        "for m in pkgutil.iter_modules(bus.__path__):\n"
        "    importlib.import_module(f'agent_core.bus.{m.name}')\n"
        "kinds = {type(getattr(bus, n)).__name__ for n in bus.__all__}\n"
        "print(sorted(kinds))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "module" not in done.stdout and done.stdout.strip(), done.stdout
