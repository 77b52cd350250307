"""The chat client: its stream follower loses and repeats nothing; worker runs show as lines."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import httpx
import pytest
from rich.console import Console

from services.gateway.chat import ChatClient, Event, follow_run


def _frame(entry_id: str, kind: str, **data: object) -> bytes:
    return f"id: {entry_id}\nevent: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


FRAMES = [
    _frame("1-0", "run_status_changed", run_id="run_1", status="running"),
    _frame("2-0", "text_delta", run_id="run_1", text="Hel"),
    _frame("2-1", "text_delta", run_id="run_1", text="lo"),
    _frame("3-0", "tool_started", run_id="run_1", name="lookup"),
    _frame("4-0", "run_finished", run_id="run_1", status="completed"),
]


class _Dropping(httpx.SyncByteStream):
    """Sends some frames (the last one cut in half), then the connection breaks."""

    def __init__(self, frames: list[bytes], cut_last: bool) -> None:
        self.frames = frames
        self.cut_last = cut_last

    def __iter__(self) -> Iterator[bytes]:
        yield b"retry: 1000\n\n"
        for i, frame in enumerate(self.frames):
            if self.cut_last and i == len(self.frames) - 1:
                yield frame[: len(frame) // 2]
                raise httpx.ReadError("connection reset")
            yield frame
        raise httpx.ReadError("connection reset")


@pytest.mark.parametrize("cut", [1, 2, 3, 4])
@pytest.mark.parametrize("partial", [False, True])
def test_reconnects_after_the_last_complete_event(cut: int, partial: bool) -> None:
    seen_headers: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        last = request.headers.get("last-event-id")
        seen_headers.append(last)
        ids = [f.split(b"\n")[0][4:].decode() for f in FRAMES]
        start = 0 if last is None else ids.index(last) + 1
        if len(seen_headers) == 1:
            head = FRAMES[: cut + 1] if partial else FRAMES[:cut]
            return httpx.Response(200, stream=_Dropping(head, cut_last=partial))
        return httpx.Response(200, content=b"".join(FRAMES[start:]))

    delivered: list[Event] = []
    with httpx.Client(transport=httpx.MockTransport(handler), base_url="http://gw") as client:
        status = follow_run(client, "sess_x", "run_1", delivered.append, backoff_s=0)
    assert status == "completed"
    assert [e[0] for e in delivered] == ["1-0", "2-0", "2-1", "3-0", "4-0"]
    assert "".join(e[2]["text"] for e in delivered if e[1] == "text_delta") == "Hello"
    assert seen_headers == [None, ["1-0", "2-0", "2-1", "3-0"][cut - 1]]


def test_a_refused_stream_raises_and_gives_up_after_attempts() -> None:
    def not_found(_: httpx.Request) -> httpx.Response:
        return httpx.Response(
            404, json={"error": {"code": "not_found", "message": "x", "details": {}}}
        )

    with (
        httpx.Client(transport=httpx.MockTransport(not_found), base_url="http://gw") as client,
        pytest.raises(httpx.HTTPStatusError),
    ):
        follow_run(client, "sess_x", "run_1", lambda e: None, backoff_s=0)

    def broken(_: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("down")

    with httpx.Client(transport=httpx.MockTransport(broken), base_url="http://gw") as client:
        assert (
            follow_run(client, "sess_x", "run_1", lambda e: None, attempts=3, backoff_s=0) is None
        )


def test_a_worker_runs_progress_shows_as_dim_lines_not_its_text() -> None:
    out = io.StringIO()
    chat = ChatClient(httpx.Client(), Console(file=out, width=100), "sess_x")
    chat.last_run = "run_parent"
    events: list[Event] = [
        ("1-0", "text_delta", {"run_id": "run_parent", "text": "Asking. "}),
        ("2-0", "run_status_changed", {"run_id": "run_child", "status": "running"}),
        ("3-0", "text_delta", {"run_id": "run_child", "text": "worker chatter"}),
        ("4-0", "run_status_changed", {"run_id": "run_child", "status": "completed"}),
        ("5-0", "text_delta", {"run_id": "run_parent", "text": "Done."}),
    ]
    for event in events:
        chat._show(event)
    text = out.getvalue()
    assert "worker chatter" not in text
    assert "⤷ worker run run_child running" in text and "⤷ worker run run_child completed" in text
    assert text.index("Asking.") < text.index("completed") < text.index("Done.")
