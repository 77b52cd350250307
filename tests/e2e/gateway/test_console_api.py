"""What the console needs from the gateway: its static files (with their security headers), the
conversation along a path with full nodes, and the scratchpad in the file API."""

from __future__ import annotations

import base64
import hashlib
import re

from tests.e2e.gateway.conftest import Gw, new_session, run_message


def _error(response: object, status: int) -> None:
    assert getattr(response, "status_code", None) == status, getattr(response, "text", "")


def test_the_console_is_served_without_a_key_with_a_strict_policy(gw: Gw) -> None:
    with gw.client() as c:
        root = c.get("/console")
        assert root.status_code == 308 and root.headers["location"] == "/console/"
        page = c.get("/console/", headers={"Authorization": ""})
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert 'id="app"' in page.text
        policy = page.headers["content-security-policy"]
        import_map = re.search(r'<script type="importmap">(.*?)</script>', page.text, re.DOTALL)
        assert import_map is not None
        digest = base64.b64encode(hashlib.sha256(import_map.group(1).encode()).digest()).decode()
        assert f"script-src 'self' 'sha256-{digest}'" in policy
        assert "default-src 'none'" in policy and "connect-src 'self'" in policy
        assert page.headers["cache-control"] == "no-cache" and page.headers["etag"]
        assert page.headers["x-content-type-options"] == "nosniff"
        again = c.get("/console/", headers={"If-None-Match": page.headers["etag"]})
        assert again.status_code == 304
        module = c.get("/console/js/main.js")
        assert module.status_code == 200
        assert module.headers["content-type"].split(";")[0] in {
            "text/javascript",
            "application/javascript",
        }
        vendor = c.get("/console/vendor/preact.mjs")
        assert vendor.status_code == 200 and "createElement" in vendor.text
        _error(c.get("/console/js/nothing.js"), 404)
        _error(c.get("/console/../pyproject.toml"), 404)
        _error(c.get("/console/%2e%2e/routes_console.py"), 404)
        # The console is not an API route: it is not in the OpenAPI document.
        paths = c.get("/openapi.json").json()["paths"]
        assert not [p for p in paths if p.startswith("/console")]


def test_the_path_endpoint_serves_full_nodes_root_first_and_increments(gw: Gw) -> None:
    with gw.client() as c:
        sid = new_session(c)
        empty = c.get(f"/v1/sessions/{sid}/path").json()
        assert empty == {"session_id": sid, "active_node_id": None, "items": []}
        run_message(c, sid, "first")
        whole = c.get(f"/v1/sessions/{sid}/path").json()
        nodes = whole["items"]
        assert nodes[0]["parent_id"] is None and nodes[0]["content"][0]["text"] == "first"
        assert whole["active_node_id"] == nodes[-1]["node_id"]
        assert [n["parent_id"] for n in nodes[1:]] == [n["node_id"] for n in nodes[:-1]]
        tip = nodes[-1]["node_id"]
        assert (
            c.get(f"/v1/sessions/{sid}/path", params={"after_node_id": tip}).json()["items"] == []
        )
        run_message(c, sid, "second")
        newer = c.get(f"/v1/sessions/{sid}/path", params={"after_node_id": tip}).json()["items"]
        assert newer[0]["parent_id"] == tip and newer[0]["content"][0]["text"] == "second"
        # To another node: the path up to it; after a node off that path: the whole path again.
        upto = c.get(f"/v1/sessions/{sid}/path", params={"node_id": nodes[0]["node_id"]}).json()
        assert [n["node_id"] for n in upto["items"]] == [nodes[0]["node_id"]]
        off = c.get(
            f"/v1/sessions/{sid}/path",
            params={"node_id": nodes[0]["node_id"], "after_node_id": newer[-1]["node_id"]},
        ).json()["items"]
        assert [n["node_id"] for n in off] == [nodes[0]["node_id"]]
        _error(c.get(f"/v1/sessions/{sid}/path", params={"node_id": "node_0000000000000000"}), 404)
        _error(c.get(f"/v1/sessions/{sid}/path", params={"node_id": "bogus"}), 404)
        _error(c.get(f"/v1/sessions/{sid}/path", params={"after_node_id": "x;"}), 404)
    with gw.client(gw.key_b) as other:  # another account sees nothing of it
        _error(other.get(f"/v1/sessions/{sid}/path"), 404)


def test_the_scratchpad_is_listed_and_downloadable(gw: Gw) -> None:
    with gw.client() as c:
        sid = new_session(c)
        ws = gw.stack.home / "accounts" / "dev" / "sessions" / sid
        (ws / "scratchpad" / "work").mkdir(parents=True)
        (ws / "scratchpad" / "work" / "notes.txt").write_text("draft\n")
        listed = c.get(f"/v1/sessions/{sid}/files", params={"area": "scratchpad"}).json()["items"]
        assert [f["path"] for f in listed] == ["scratchpad/work/notes.txt"]
        got = c.get(f"/v1/sessions/{sid}/files/scratchpad/work/notes.txt")
        assert got.status_code == 200 and got.content == b"draft\n"
        _error(c.put(f"/v1/sessions/{sid}/files/scratchpad/x.txt", content=b"x"), 405)
