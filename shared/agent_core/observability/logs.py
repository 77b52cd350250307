"""Log records with the ids of the work they belong to, as readable text or one JSON object a line.

``log_ids(session_id=…, run_id=…, agent_id=…)`` binds ids to the current task (a context variable,
so concurrent runs in one worker never mix them); every record logged inside carries them. A
record's own figures go in ``extra={"fields": {...}}``. Both formats redact every string, so a
secret never reaches a log line. An exception logged with its traceback (``log.exception``, a
library's own logging) is reduced to its type and redacted message unless ``debug`` is on; then
the traceback is kept, redacted too (``docs/architecture.md``, "Run lifecycle and endings").

Text (the default, for a terminal): ``<time> <LEVEL> <service>[<instance>] <logger>: <message>``
followed by ``key=value`` for the ids and fields. JSON (``observability.log_format = "json"``):
``{"ts", "level", "service", "instance", "logger", "message", <ids>, <fields>, "exc"?}``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Final, Literal, TextIO

from agent_core.redaction import redact, redact_obj

__all__ = [
    "THIRD_PARTY_LOGGERS",
    "BatchedStreamHandler",
    "configure_logging",
    "current_ids",
    "log_ids",
]

_NONE: Final[Mapping[str, str]] = MappingProxyType({})
_IDS: ContextVar[Mapping[str, str]] = ContextVar("soong_log_ids", default=_NONE)

# Libraries that log every request at INFO: their lines say nothing about our services unless
# one is debugging, so they are shown at DEBUG only.
THIRD_PARTY_LOGGERS: Final = (
    "httpx",
    "httpx2",
    "httpcore",
    "openai",
    "anthropic",
    "urllib3",
    "uvicorn.access",
    "opentelemetry",
)


@contextlib.contextmanager
def log_ids(**ids: str | None) -> Iterator[None]:
    """Bind ids (``None`` values are skipped) to every record logged inside the block."""
    token = _IDS.set({**_IDS.get(), **{k: v for k, v in ids.items() if v}})
    try:
        yield
    finally:
        _IDS.reset(token)


def current_ids() -> Mapping[str, str]:
    """The ids bound to the current task."""
    return _IDS.get()


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = getattr(record, "fields", None)
    return {**current_ids(), **(fields if isinstance(fields, Mapping) else {})}


def _exception_line(record: logging.LogRecord) -> str:
    """The one line an exception is reduced to outside debug mode: its type and message."""
    exc = record.exc_info[1] if record.exc_info else None
    if exc is None:
        return ""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]}"


class _Text(logging.Formatter):
    def __init__(self, who: str, *, debug: bool) -> None:
        super().__init__(f"%(asctime)s %(levelname)s {who} %(name)s: %(message)s")
        self._debug = debug

    def format(self, record: logging.LogRecord) -> str:
        if self._debug or not record.exc_info:
            line = super().format(record)
        else:  # the record stays as it came: other handlers may format it differently
            what = _exception_line(record)
            saved = record.exc_info, record.exc_text, record.stack_info
            record.exc_info, record.exc_text, record.stack_info = None, None, None
            try:
                line = f"{super().format(record)} ({what})"
            finally:
                record.exc_info, record.exc_text, record.stack_info = saved
        extra = _fields(record)
        if extra:
            line += " " + " ".join(f"{k}={_scalar(v)}" for k, v in extra.items())
        return redact(line)


class _Json(logging.Formatter):
    def __init__(self, service: str, instance: str, *, debug: bool) -> None:
        super().__init__()
        self._service = service
        self._instance = instance
        self._debug = debug

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "service": self._service,
            "instance": self._instance,
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        doc.update(redact_obj(_fields(record)))
        if record.exc_info:
            exc = self.formatException(record.exc_info) if self._debug else _exception_line(record)
            doc["exc"] = redact(exc)
        return json.dumps(doc, ensure_ascii=False, default=str)


def _scalar(value: Any) -> str:
    if isinstance(value, Mapping | list):
        return json.dumps(value, separators=(",", ":"), default=str)
    return str(value)


class BatchedStreamHandler(logging.StreamHandler[TextIO]):
    """A stream handler that writes records in batches rather than one write each.

    A record at ``WARNING`` or above writes at once, with everything before it; others wait
    until ``delay_s`` after the first of them (a flusher thread, started on first use and idle
    while nothing waits) or until ``max_chars`` wait, whichever comes first; :meth:`flush` (at
    exit, ``logging.shutdown``) writes what waits. A busy run-worker logs two lines a run, each
    a write of its own to the pipe its supervisor reads; batched, one write and one wake-up of
    the reader carry many. What a process killed outright (SIGKILL) had not written yet — at
    most ``delay_s`` of records below ``WARNING`` — is lost.
    """

    def __init__(self, stream: TextIO, *, delay_s: float, max_chars: int = 64 * 1024) -> None:
        super().__init__(stream)
        self._delay_s = delay_s
        self._max_chars = max_chars
        self._waiting: list[str] = []
        self._chars = 0
        self._due = threading.Event()
        self._flusher: threading.Thread | None = None

    def emit(self, record: logging.LogRecord) -> None:
        """Queue ``record``'s line (called with the handler's lock held)."""
        try:
            line = self.format(record) + self.terminator
        except Exception:
            self.handleError(record)
            return
        self._waiting.append(line)
        self._chars += len(line)
        if record.levelno >= logging.WARNING or self._chars >= self._max_chars:
            self._write()
            return
        if self._flusher is None:
            self._flusher = threading.Thread(
                target=self._flush_later, name="log-flush", daemon=True
            )
            self._flusher.start()
        self._due.set()

    def flush(self) -> None:
        """Write every waiting line now."""
        with self.lock or contextlib.nullcontext():
            self._write()

    def _write(self) -> None:
        if self._waiting:
            text = "".join(self._waiting)
            self._waiting.clear()
            self._chars = 0
            try:
                self.stream.write(text)
                self.stream.flush()
            except Exception:  # a closed or broken stream: as StreamHandler, never raise here
                with contextlib.suppress(Exception):
                    sys.stderr.write(text)

    def _flush_later(self) -> None:
        while True:
            self._due.wait()
            time.sleep(self._delay_s)
            self._due.clear()  # lines queued from here on set it again; this flush takes the rest
            self.flush()


def configure_logging(
    level: str,
    service: str,
    instance: str,
    fmt: Literal["text", "json"] = "text",
    *,
    debug: bool = False,
    stream: TextIO | None = None,
    batch_s: float = 0.0,
) -> None:
    """One handler on ``stream`` (standard error) for the whole process, in ``fmt``; third
    parties at DEBUG only; tracebacks only with ``debug``. With ``batch_s`` lines below
    ``WARNING`` are written in batches up to that long after they were logged
    (:class:`BatchedStreamHandler`)."""
    out = stream or sys.stderr
    handler = (
        BatchedStreamHandler(out, delay_s=batch_s) if batch_s > 0 else logging.StreamHandler(out)
    )
    formatter: logging.Formatter = (
        _Json(service, instance, debug=debug)
        if fmt == "json"
        else _Text(f"{service}[{instance}]", debug=debug)
    )
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    quiet = logging.DEBUG if level == "DEBUG" else logging.WARNING
    for name in THIRD_PARTY_LOGGERS:
        logging.getLogger(name).setLevel(quiet)
