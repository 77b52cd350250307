"""Task-list reads and memory files over HTTP: account-scoped, ETag / If-Match on writes."""

from __future__ import annotations

from tests.e2e.gateway.conftest import Gw, new_session


def test_task_lists_of_a_session(gw: Gw) -> None:
    with gw.client() as a, gw.client(gw.key_b) as b:
        sid = new_session(a)
        lists = a.get(f"/v1/sessions/{sid}/tasks")
        assert lists.status_code == 200, lists.text
        assert lists.json()["lists"] == []
        missing = a.get(f"/v1/sessions/{sid}/tasks/nothing-here")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
        assert b.get(f"/v1/sessions/{sid}/tasks").status_code == 404  # another account's session


def test_memory_files_with_etags(gw: Gw) -> None:
    with gw.client() as a, gw.client(gw.key_b) as b:
        first = a.get("/v1/memory/user")
        assert first.status_code == 200, first.text
        assert first.json()["scope"] == "user"
        content = "---\nscope: user\n---\n- Dates as YYYY-MM-DD.\n"
        no_precondition = a.put("/v1/memory/user", json={"content": content})
        assert no_precondition.status_code == 428
        written = a.put(
            "/v1/memory/user",
            json={"content": content},
            headers={"If-Match": first.headers.get("ETag", "*")},
        )
        assert written.status_code == 200, written.text
        etag = written.headers["ETag"]
        assert "YYYY-MM-DD" in a.get("/v1/memory/user").json()["content"]
        stale = a.put(
            "/v1/memory/user",
            json={"content": content + "- More.\n"},
            headers={"If-Match": first.headers.get("ETag") or '"0"'},
        )
        assert stale.status_code == 412 and stale.json()["error"]["code"] == "precondition_failed"
        assert (
            a.put(
                "/v1/memory/user",
                json={"content": content + "- More.\n"},
                headers={"If-Match": etag},
            ).status_code
            == 200
        )
        secret = a.put(
            "/v1/memory/user",
            json={"content": content + "- api_key=sk-abcdefghijklmnopqrstuv\n"},
            headers={"If-Match": "*"},
        )
        assert secret.status_code == 400
        # Account B sees its own (empty) memory, never A's.
        assert "YYYY-MM-DD" not in b.get("/v1/memory/user").json()["content"]
        assert a.get("/v1/memory/skills/report").status_code == 200
        assert a.get("/v1/memory/skills/..%2Fetc").status_code in (400, 404, 422)
