"""What the API says of a run's life: configs no run could start with, statuses, permissions."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from tests.e2e.gateway.conftest import Gw, new_session, read_events


def _error(response: httpx.Response, status: int, code: str) -> dict[str, object]:
    assert response.status_code == status, response.text
    error: dict[str, object] = response.json()["error"]
    assert error["code"] == code, error
    return error


def test_a_config_no_run_could_start_with_is_refused_with_422(gw: Gw) -> None:
    with gw.client() as c:
        # The stack serves the demo model: a session may name it, not another provider.
        assert new_session(c, agent_config={"provider": "fake"})
        error = _error(
            c.post("/v1/sessions", json={"agent_config": {"provider": "openia"}}),
            422,
            "unknown_provider",
        )
        assert error["details"] == {"key": "agent_config.provider", "known": ["fake"]}
        sid = new_session(c)
        _error(
            c.post(
                f"/v1/sessions/{sid}/messages",
                json={"text": "hi", "agent_config": {"max_turns": 0}},
            ),
            422,
            "validation_error",
        )
        _error(
            c.post(
                f"/v1/sessions/{sid}/messages",
                json={"text": "hi", "agent_config": {"provider": "anthropic"}},
            ),
            422,
            "unknown_provider",
        )
        assert c.get(f"/v1/sessions/{sid}/runs").json()["items"] == []  # nothing was queued


def _until(check: Callable[[], bool], what: str, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_waiting_run_is_pending_its_agent_running_and_its_request_listed(gw: Gw) -> None:
    with gw.client() as c:
        sid = new_session(c, agent_config={"tool_policy": {"ask": ["lookup"]}})
        run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "ask me"}).json()["run_id"]
        run_url = f"/v1/sessions/{sid}/runs/{run_id}"

        def root_status() -> str:
            agents = c.get(f"/v1/sessions/{sid}/agents").json()["items"]
            return str(next(a["status"] for a in agents if a["parent_agent_id"] is None))

        _until(lambda: c.get(run_url).json()["status"] == "pending", "the run never waited")
        listed = c.get(f"/v1/sessions/{sid}/permissions").json()["items"]
        assert len(listed) == 1 and listed[0]["run_id"] == run_id and listed[0]["expires_at"]
        assert listed[0]["tool_call"]["name"] == "lookup"
        assert root_status() == "running"
        request_id = listed[0]["request_id"]
        decided = c.post(f"/v1/sessions/{sid}/permissions/{request_id}", json={"behavior": "allow"})
        assert decided.status_code == 200, decided.text
        events = read_events(c, f"{run_url}/events")
        statuses = [e.data["status"] for e in events if e.event == "run_status_changed" and e.data]
        assert statuses == ["running", "pending", "running"]
        assert events[-1].data is not None and events[-1].data["status"] == "completed"
        assert c.get(f"/v1/sessions/{sid}/permissions").json()["items"] == []
        _until(lambda: root_status() == "idle", "the agent stayed running")


def test_a_repeated_post_with_its_idempotency_key_makes_one_run(gw: Gw) -> None:
    with gw.client() as c:
        sid = new_session(c)
        url = f"/v1/sessions/{sid}/messages"
        first = c.post(url, json={"text": "once"}, headers={"Idempotency-Key": "turn-1"})
        assert first.status_code == 202, first.text
        again = c.post(url, json={"text": "once"}, headers={"Idempotency-Key": "turn-1"})
        assert again.status_code == 202, again.text
        assert (again.json()["run_id"], again.json()["node_id"]) == (
            first.json()["run_id"],
            first.json()["node_id"],
        )
        # Another key is another request; the same key in another session names nothing there.
        other = c.post(url, json={"text": "twice"}, headers={"Idempotency-Key": "turn-2"})
        elsewhere = c.post(
            f"/v1/sessions/{new_session(c)}/messages",
            json={"text": "once"},
            headers={"Idempotency-Key": "turn-1"},
        )
        assert (
            len({first.json()["run_id"], other.json()["run_id"], elsewhere.json()["run_id"]}) == 3
        )
        _error(
            c.post(url, json={"text": "x"}, headers={"Idempotency-Key": "a key"}),
            422,
            "validation_error",
        )
        runs = c.get(f"/v1/sessions/{sid}/runs").json()["items"]
        assert sorted(r["run_id"] for r in runs) == sorted(
            [first.json()["run_id"], other.json()["run_id"]]
        )
        for run in runs:
            read_events(c, f"/v1/sessions/{sid}/runs/{run['run_id']}/events")
        tree = c.get(f"/v1/sessions/{sid}/tree").json()["nodes"]
        user_texts = [n["preview"] for n in tree if n["role"] == "user"]
        assert sorted(user_texts) == ["once", "twice"], user_texts
