"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) served from files the gateway ships.

The pages load their scripts, styles and icon from ``/docs/static/`` (vendored copies of
``swagger-ui-dist`` 5.35.0 and ``redoc`` 2.5.4, see ``static/docs/README.md``) and nothing else: no
CDN, no web fonts, no validator badge, so the API documents itself on a machine with no network.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["STATIC_PREFIX", "add_docs_routes"]

STATIC_PREFIX = "/docs/static"
_ASSETS = Path(__file__).parent / "static" / "docs"


def add_docs_routes(app: FastAPI, *, openapi_url: str = "/openapi.json") -> None:
    """Add ``/docs``, ``/redoc`` and their assets (the app must be made with ``docs_url=None``
    and ``redoc_url=None``)."""
    app.mount(STATIC_PREFIX, StaticFiles(directory=_ASSETS), name="docs-static")
    title = f"{app.title} — API"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=title,
            swagger_js_url=f"{STATIC_PREFIX}/swagger-ui-bundle.js",
            swagger_css_url=f"{STATIC_PREFIX}/swagger-ui.css",
            swagger_favicon_url=f"{STATIC_PREFIX}/favicon-32x32.png",
            # No badge that asks validator.swagger.io about the document.
            swagger_ui_parameters={"validatorUrl": None},
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=title,
            redoc_js_url=f"{STATIC_PREFIX}/redoc.standalone.js",
            redoc_favicon_url=f"{STATIC_PREFIX}/favicon-32x32.png",
            with_google_fonts=False,
        )
