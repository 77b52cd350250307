"""What the replay scores as leaked from the change log."""

from agent_core.memory.evaluation import leaked
from services.memory_extraction.replay import _logged_texts

TS_AND_ETAG = (
    '{"ts": "2026-12-06T03:26:13.644710Z", "scope": "skill:report", "op": "add", "mode": "llm",'
    ' "entry_id": "o100", "version": "49121ee7e0c92ac585844471a6976d1", "new_text": "PDF"}'
)


def test_the_logs_timestamps_and_etags_are_not_searched() -> None:
    assert leaked(["4471"], _logged_texts(TS_AND_ETAG)) == []


def test_the_logs_texts_and_unreadable_lines_are() -> None:
    said = TS_AND_ETAG.replace('"PDF"', '"PIN 4471"')
    assert leaked(["4471"], _logged_texts(said)) == ["4471"]
    assert leaked(["4471"], _logged_texts('{"not": "a record", "pin": "4471"}\n')) == ["4471"]
    assert leaked(["4471"], _logged_texts(TS_AND_ETAG + "\n\n" + said)) == ["4471"]
