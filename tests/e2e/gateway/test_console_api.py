"""What the console needs from the gateway: the conversation along a path with full nodes, and
the scratchpad in the file API."""

from __future__ import annotations

from tests.e2e.gateway.conftest import Gw, new_session, run_message


def _error(response: object, status: int) -> None:
    assert getattr(response, "status_code", None) == status, getattr(response, "text", "")


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
