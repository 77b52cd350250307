"""``/docs`` and ``/redoc`` render with no network: every asset the pages load is served by the
gateway itself (nothing from a CDN), and the document they load is there."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.e2e.gateway.conftest import Gw

pytestmark = pytest.mark.e2e

_ASSET = re.compile(r"""(?:src|href|spec-url)=["']([^"']+)["']""")
_SCRIPT_URL = re.compile(r"""\burl:\s*['"]([^'"]+)['"]""")


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_every_asset_of_the_page_is_served_by_the_gateway(gw: Gw, page: str) -> None:
    with httpx.Client(base_url=gw.stack.gateway_url, timeout=30) as c:
        html = c.get(page)
        assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
        assert "http://" not in html.text and "https://" not in html.text
        urls = _ASSET.findall(html.text) + _SCRIPT_URL.findall(html.text)
        assert "/openapi.json" in urls and len(urls) >= 3, urls
        kinds = set()
        for url in urls:
            assert url.startswith("/") and not url.startswith("//"), url  # this gateway only
            asset = c.get(url)
            assert asset.status_code == 200, url
            kinds.add(asset.headers["content-type"].split(";")[0])
            if url.endswith(".js"):
                assert len(asset.content) > 500_000  # the real bundle, not a stub
        assert "text/javascript" in kinds or "application/javascript" in kinds
        assert "application/json" in kinds
