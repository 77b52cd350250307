"""A real MCP server, written with the official SDK, for the MCP client's tests and bench.

Run it as ``python -m tests.fakes.mcp_server`` (stdio) or with ``--http`` (streamable HTTP on a
loopback port it picks itself: it prints ``PORT <n>`` on stdout once it accepts connections).

Tools: ``echo`` (its text back), ``add``, ``upper`` (the bench's work), ``crash`` (the process
dies mid-call), ``hang`` (sleeps far past any call timeout), ``huge`` (a result of ``size``
characters), ``grow`` (adds the tool ``extra`` and sends ``notifications/tools/list_changed``),
``fail`` (an ``is_error`` result), ``secret`` (for deny lists), ``whoami`` (the process id, the
working directory, one environment variable and one request header), ``getenv``. ``--name`` renames the
server; ``--crash-on-start`` makes the process exit before it answers anything, ``--hang-on-start``
keeps it alive without ever answering.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations


def build(name: str) -> MCPServer:
    """The fake server and its tools."""
    server: MCPServer = MCPServer(name, log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def upper(text: str) -> str:
        """The text in upper case."""
        return text.upper()

    @server.tool()
    def crash() -> str:
        """Kill the server process in the middle of the call."""
        os._exit(3)

    @server.tool()
    async def hang(seconds: float = 3600.0) -> str:
        """Sleep for ``seconds`` before answering."""
        await asyncio.sleep(seconds)
        return "woke up"

    @server.tool()
    def huge(size: int) -> str:
        """A result of ``size`` characters (numbered lines)."""
        lines = [f"line {i:06d} " + "x" * 40 for i in range(size // 52 + 1)]
        return "\n".join(lines)[:size]

    @server.tool()
    def fail() -> str:
        """Always fails (an is_error result)."""
        raise ToolError("this tool always fails")

    @server.tool()
    def secret() -> str:
        """A tool a deny list should hide."""
        return "the secret"

    @server.tool()
    def whoami(ctx: Context) -> str:
        """Process id, working directory, FAKE_MCP_VALUE and the X-Fake header (if any)."""
        headers = ctx.headers or {}
        header = headers.get("x-fake", "")
        return f"{os.getpid()} {os.getcwd()} {os.environ.get('FAKE_MCP_VALUE', '')} {header}"

    @server.tool()
    def getenv(name: str) -> str:
        """The value of an environment variable of the server's process, or <unset>."""
        return os.environ.get(name, "<unset>")

    @server.tool()
    async def grow(ctx: Context) -> str:
        """Add the tool ``extra`` and tell the client its tool list changed."""

        def extra() -> str:
            """A tool that exists only after ``grow``."""
            return "extra!"

        if "extra" not in {t.name for t in await server.list_tools()}:
            server.add_tool(extra)
        await ctx.session.send_tool_list_changed()
        return "grown"

    return server


async def _serve_http(server: MCPServer) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    web = uvicorn.Server(config)
    task = asyncio.create_task(web.serve(sockets=[sock]))
    while not web.started:
        await asyncio.sleep(0.01)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await task


COMMAND = [sys.executable, "-m", "tests.fakes.mcp_server"]
REPO = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def http_server() -> Iterator[str]:
    """The fake over streamable HTTP in a subprocess: its endpoint URL; stopped on exit."""
    proc = subprocess.Popen([*COMMAND, "--http"], cwd=REPO, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--name", default="fake")
    parser.add_argument("--crash-on-start", action="store_true")
    parser.add_argument("--hang-on-start", action="store_true")
    args = parser.parse_args()
    if args.crash_on_start:
        sys.exit(5)
    if args.hang_on_start:  # alive, reading nothing: initialize is never answered
        while True:
            time.sleep(3600)
    server = build(args.name)
    if args.http:
        asyncio.run(_serve_http(server))
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
