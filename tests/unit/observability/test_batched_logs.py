"""Batched log writes: lines below WARNING wait to share one write; nothing is lost or reordered."""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Iterator

import pytest

from agent_core.observability.logs import BatchedStreamHandler
from tests.waiting import HangGuard


class _Writes(io.StringIO):
    """A stream that records each write (and signals the first)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []
        self.written = threading.Event()

    def write(self, text: str) -> int:
        self.writes.append(text)
        self.written.set()
        return super().write(text)


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    log = logging.getLogger("soong.test.batched")
    log.propagate = False
    log.setLevel(logging.INFO)
    yield log
    log.handlers.clear()
    log.propagate = True


def _attach(log: logging.Logger, **kwargs: float) -> tuple[BatchedStreamHandler, _Writes]:
    stream = _Writes()
    handler = BatchedStreamHandler(stream, **kwargs)  # type: ignore[arg-type]
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    log.addHandler(handler)
    return handler, stream


def test_lines_wait_then_a_warning_writes_them_all_in_order_at_once(logger: logging.Logger) -> None:
    _, stream = _attach(logger, delay_s=3600.0)  # the flusher never gets to them here
    logger.info("one")
    logger.info("two")
    assert stream.writes == []
    logger.warning("three")
    assert stream.writes == ["INFO one\nINFO two\nWARNING three\n"]


def test_flush_writes_what_waits(logger: logging.Logger) -> None:
    handler, stream = _attach(logger, delay_s=3600.0)
    logger.info("one")
    handler.flush()  # what logging.shutdown does at exit
    assert stream.getvalue() == "INFO one\n"
    handler.flush()
    assert stream.writes == ["INFO one\n"]  # nothing waits: no empty write


def test_enough_waiting_text_is_written_without_waiting(logger: logging.Logger) -> None:
    _, stream = _attach(logger, delay_s=3600.0, max_chars=20)
    logger.info("a" * 8)
    assert stream.writes == []
    logger.info("b" * 8)  # 12 + 12 characters with their level and newline
    assert stream.writes == [f"INFO {'a' * 8}\nINFO {'b' * 8}\n"]


def test_the_flusher_writes_lines_nobody_follows(logger: logging.Logger) -> None:
    _, stream = _attach(logger, delay_s=0.01)
    for round_ in range(3):  # the flusher thread goes idle and is woken again each time
        stream.written.clear()
        logger.info("line %d", round_)
        guard = HangGuard(30, f"the flusher to write line {round_}")
        while not stream.written.wait(0.05):
            guard.check()
    assert stream.getvalue() == "INFO line 0\nINFO line 1\nINFO line 2\n"


def test_lines_logged_from_many_threads_are_all_written_whole(logger: logging.Logger) -> None:
    handler, stream = _attach(logger, delay_s=0.001, max_chars=300)

    def log_many(who: int) -> None:
        for i in range(200):
            logger.info("thread %d line %d", who, i)

    threads = [threading.Thread(target=log_many, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    handler.flush()
    lines = stream.getvalue().splitlines()
    assert sorted(lines) == sorted(
        f"INFO thread {t} line {i}" for t in range(4) for i in range(200)
    )
    for t in range(4):  # each thread's lines in the order it logged them
        mine = [line for line in lines if line.startswith(f"INFO thread {t} ")]
        assert mine == [f"INFO thread {t} line {i}" for i in range(200)]
