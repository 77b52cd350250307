"""An MCP server of your own, for soong-agent's agents: a starting point to copy.

Written with the official ``mcp`` SDK (2.x, the version soong-agent installs). Tutorials written
for 1.x import ``from mcp.server.fastmcp import FastMCP``; in 2.x that class is
``mcp.server.mcpserver.MCPServer`` (the old import fails with a pointer to the migration guide),
and the decorators are the same.

Declare it in ``config.toml`` (the README's "MCP servers" section) and the model sees its tools
as ``mcp__reports__word_count`` and ``mcp__reports__table_summary``::

    [mcp.servers.reports]
    transport = "stdio"
    command = [".venv/bin/python", "examples/mcp_server.py"]

Run it by hand over stdio (``python examples/mcp_server.py``) or as streamable HTTP
(``python examples/mcp_server.py --http 8765``; then ``transport = "http"`` and
``url = "http://127.0.0.1:8765/mcp"``).
"""

from __future__ import annotations

import argparse
import csv
import io

from mcp.server.mcpserver import MCPServer

server = MCPServer("reports")


@server.tool()
def word_count(text: str) -> dict[str, int]:
    """Count the words, lines and characters of a text."""
    return {"words": len(text.split()), "lines": len(text.splitlines()), "chars": len(text)}


@server.tool()
def table_summary(csv_text: str) -> str:
    """Summarise a CSV table: its columns, its row count, and the sum of each numeric column."""
    rows = list(csv.reader(io.StringIO(csv_text)))
    if not rows:
        return "an empty table"
    header, body = rows[0], rows[1:]
    sums = []
    for i, name in enumerate(header):
        try:
            sums.append(f"{name}={sum(float(r[i]) for r in body if len(r) > i):g}")
        except ValueError:
            continue  # not a numeric column
    return f"{len(body)} rows; columns: {', '.join(header)}; sums: {', '.join(sums) or 'none'}"


def main() -> None:
    """Serve over stdio, or streamable HTTP on loopback with ``--http PORT``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP")
    args = parser.parse_args()
    if args.http is None:
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.http)


if __name__ == "__main__":
    main()
