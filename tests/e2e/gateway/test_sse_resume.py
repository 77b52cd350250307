"""Resuming a run's event stream with Last-Event-ID: exactly the missed events, none twice."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from agent_core.bus import BusNames, make_redis
from tests.e2e.gateway.conftest import Gw, SseEvent, new_session, read_events, run_message

pytestmark = pytest.mark.e2e


def _key(e: SseEvent) -> tuple[str | None, str]:
    return e.id, json.dumps(e.data, sort_keys=True)


def _events_url(sid: str, run_id: str) -> str:
    return f"/v1/sessions/{sid}/runs/{run_id}/events"


def test_reconnect_after_every_disconnect_point(gw: Gw) -> None:
    with gw.client() as c:
        sid = new_session(c)
        run_id, full = run_message(c, sid, "resume me")
        ids = [e.id for e in full]
        assert len(ids) == len(set(ids)) >= 6
        for cut in (1, 2, len(full) // 2, len(full) - 1):
            head = read_events(c, _events_url(sid, run_id), stop_after=cut)
            assert [_key(e) for e in head] == [_key(e) for e in full[:cut]]
            tail = read_events(c, _events_url(sid, run_id), last_event_id=head[-1].id)
            assert [_key(e) for e in head + tail] == [_key(e) for e in full], f"cut at {cut}"
        # After the terminal event there is nothing more.
        assert read_events(c, _events_url(sid, run_id), last_event_id=full[-1].id) == []


def test_reconnect_mid_run_while_it_waits(gw: Gw) -> None:
    """The run is genuinely in flight (waiting on a permission) when the client drops."""
    with gw.client() as c:
        sid = new_session(c, agent_config={"tool_policy": {"ask": ["lookup"]}})
        run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "wait"}).json()["run_id"]
        head: list[SseEvent] = []
        while not head or head[-1].event != "permission_requested":
            head += read_events(
                c,
                _events_url(sid, run_id),
                stop_after=1,
                last_event_id=head[-1].id if head else None,
            )
        assert head[-1].data is not None
        request_id = head[-1].data["request"]["request_id"]
        assert (
            c.post(
                f"/v1/sessions/{sid}/permissions/{request_id}", json={"behavior": "allow"}
            ).status_code
            == 200
        )
        tail = read_events(c, _events_url(sid, run_id), last_event_id=head[-1].id)
        full = read_events(c, _events_url(sid, run_id))
        assert [_key(e) for e in head + tail] == [_key(e) for e in full]
        assert tail[-1].event == "run_finished" and not set(e.id for e in head) & set(
            e.id for e in tail
        )


def _drop_live_stream(gw: Gw, sid: str, run_id: str) -> None:
    async def go() -> None:
        redis = make_redis(gw.redis_url)
        try:
            assert await redis.delete(BusNames("soong").run_events(sid, run_id)) == 1
        finally:
            await redis.aclose()

    asyncio.run(go())


def test_expired_live_stream_is_served_from_the_timeline(gw: Gw) -> None:
    with gw.client() as c:
        sid = new_session(c)
        run_id, live = run_message(c, sid, "durable")
        _drop_live_stream(gw, sid, run_id)  # what the one-hour expiry does
        durable = read_events(c, _events_url(sid, run_id))
        assert durable[-1].event == "run_finished" and durable[-1].id == "db-end"
        assert durable[-1].data is not None and durable[-1].data["status"] == "completed"
        assert all(e.id is not None and e.id.startswith("db-") for e in durable)
        node_ids = [
            e.data["node"]["node_id"] for e in durable if e.event == "node_created" and e.data
        ]
        live_nodes = [
            e.data["node"]["node_id"] for e in live if e.event == "node_created" and e.data
        ]
        assert node_ids == live_nodes
        # Resume inside the durable replay: exactly the rest.
        for cut in (1, len(durable) // 2, len(durable) - 1):
            tail = read_events(c, _events_url(sid, run_id), last_event_id=durable[cut - 1].id)
            assert [_key(e) for e in durable[:cut] + tail] == [_key(e) for e in durable]
        assert read_events(c, _events_url(sid, run_id), last_event_id="db-end") == []
        # A client holding a live id from before the expiry gets only later events.
        later = read_events(c, _events_url(sid, run_id), last_event_id=live[-1].id)
        assert [e.event for e in later] == ["run_finished"]


def test_frames_stay_parseable_with_hostile_text(gw: Gw) -> None:
    """BI-13: newlines, 'data:' prefixes, CR, U+2028, NUL and ANSI escapes in a message."""
    hostile = "a\n\ndata: fake\r\nid: 9-9\u2028\x00\x1b[31mred\x1b[0m"
    with gw.client() as c:
        sid = new_session(c)
        run_id, events = run_message(c, sid, hostile)
        created = [e for e in events if e.event == "node_created" and e.data]
        assert created[0].data is not None
        assert created[0].data["node"]["content"] == [{"type": "text", "text": hostile}]
        assert all(e.id and e.id != "9-9" for e in events)
        node = c.get(f"/v1/sessions/{sid}/nodes/{created[0].data['node']['node_id']}").json()
        assert node["content"][0]["text"] == hostile


def test_late_client_gets_the_whole_run_and_concurrent_readers_agree(gw: Gw) -> None:
    with gw.client() as c:
        sid = new_session(c)
        run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "many"}).json()["run_id"]

        async def read_all() -> list[str | None]:
            async with (
                httpx.AsyncClient(
                    base_url=gw.stack.gateway_url,
                    timeout=30,
                    headers={"Authorization": f"Bearer {gw.stack.api_key}"},
                ) as ac,
                ac.stream("GET", _events_url(sid, run_id)) as r,
            ):
                return [
                    line[4:]
                    for line in [x async for x in r.aiter_lines()]
                    if line.startswith("id: ")
                ]

        async def both() -> list[list[str | None]]:
            return list(await asyncio.gather(read_all(), read_all(), read_all()))

        results = asyncio.run(both())
        assert results[0] == results[1] == results[2] and len(results[0]) >= 6
