"""The web console: static files served at ``/console`` from the package itself.

The console is plain ES modules and a vendored Preact (``console/vendor/``), so there is nothing
to build and nothing is loaded from elsewhere. Its pages carry a Content-Security-Policy that
allows scripts, styles and connections to this origin only (plus the one inline import map, by
its hash), so a rendered message can never run code or send the API key anywhere. Files are
revalidated on every load (``no-cache`` with ETag), so an upgraded gateway serves the new console
at once. The mount is added after every API route: matching an API path never reaches it.
"""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from starlette.datastructures import MutableHeaders
from starlette.staticfiles import StaticFiles
from starlette.types import Message, Receive, Scope, Send

__all__ = ["CONSOLE_DIR", "content_security_policy", "mount_console"]

CONSOLE_DIR = Path(__file__).with_name("console")
_IMPORT_MAP = re.compile(r'<script type="importmap">(.*?)</script>', re.DOTALL)


def content_security_policy(index_html: str) -> str:
    """The console's policy: this origin only, and the page's inline import map by its hash."""
    hashes = [
        "'sha256-" + base64.b64encode(hashlib.sha256(m.encode()).digest()).decode() + "'"
        for m in _IMPORT_MAP.findall(index_html)
    ]
    return "; ".join(
        [
            "default-src 'none'",
            " ".join(["script-src 'self'", *hashes]),
            "style-src 'self'",
            "img-src 'self' blob: data:",
            "connect-src 'self'",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        ]
    )


class _ConsoleFiles:
    """Starlette's static files with the console's security and caching headers."""

    def __init__(self, directory: Path) -> None:
        self._files = StaticFiles(directory=directory, html=True)
        csp = content_security_policy((directory / "index.html").read_text(encoding="utf-8"))
        self._headers = {
            "Content-Security-Policy": csp,
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-cache",
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in self._headers.items():
                    headers[name] = value
            await send(message)

        await self._files(scope, receive, with_headers)


def mount_console(app: FastAPI, directory: Path = CONSOLE_DIR) -> None:
    """Serve the console at ``/console/`` (``/console`` redirects there)."""

    @app.get("/console", include_in_schema=False)
    async def console_root() -> RedirectResponse:
        return RedirectResponse("/console/", status_code=308)

    app.mount("/console", _ConsoleFiles(directory), name="console")
