"""``Client``: the blocking face of :class:`AsyncClient`, for scripts and the chat CLI.

Thin by construction: it owns an event loop in one daemon thread (the portal) and runs the async
client's own methods there, so both faces share one implementation — the same retries, the same
resumable streams, the same types. Each method below is the async method of the same name,
blocking; a run's stream is a plain iterator.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from types import TracebackType
from typing import Any, Concatenate, Generic, Literal, ParamSpec, Self, TypeVar

from agent_core.types.enums import MultitaskStrategy
from agent_core.types.runtime import AgentConfigOverrides, RunFinished, SessionState
from soong_agent._assistants import AsyncAssistants
from soong_agent._client import AsyncClient, AsyncMemory
from soong_agent._session import AsyncRun, AsyncSession
from soong_agent._sse import StreamEvent
from soong_agent._stream import RunStream, ToolUse

__all__ = ["Assistants", "Client", "Memory", "Run", "RunIterator", "Session"]

P = ParamSpec("P")
T = TypeVar("T")
A = TypeVar("A")


class _Portal:
    """An event loop running in its own daemon thread; coroutines are sent to it and awaited."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="soong-agent-sdk", daemon=True
        )
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the portal's loop and wait for it; an interrupt cancels it."""
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # KeyboardInterrupt while waiting: the coroutine must not go on
            raise

    def close(self) -> None:
        """Stop the loop and its thread."""
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()


class _Face(Generic[A]):
    """A blocking face of an async object: its calls run on ``portal``'s loop."""

    _async: A
    _portal: _Portal

    def __init__(self, inner: A, portal: _Portal) -> None:
        self._async = inner
        self._portal = portal


def _blocking(
    fn: Callable[Concatenate[A, P], Awaitable[T]],
) -> Callable[Concatenate[_Face[A], P], T]:
    """The blocking method of an async method: same parameters, same answer."""

    def call(self: _Face[A], /, *args: P.args, **kwargs: P.kwargs) -> T:
        async def run() -> T:
            return await fn(self._async, *args, **kwargs)

        return self._portal.call(run())

    call.__name__ = getattr(fn, "__name__", "call")
    call.__doc__ = fn.__doc__
    return call


class RunIterator(_Face[RunStream]):
    """A run's events as a blocking iterator (see :class:`~soong_agent.RunStream`)."""

    @property
    def stream(self) -> RunStream:
        """The async stream underneath (``run_id``, ``finished``, ``last_event_id``, …)."""
        return self._async

    @property
    def run_id(self) -> str | None:
        """The run's id (set once the message was accepted)."""
        return self._async.run_id

    @property
    def finished(self) -> RunFinished | None:
        """The run's ``run_finished``, once seen."""
        return self._async.finished

    @property
    def text(self) -> str:
        """The answer so far."""
        return self._async.text

    @property
    def tool_uses(self) -> list[ToolUse]:
        """The tool calls seen so far."""
        return self._async.tool_uses

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> StreamEvent:
        async def step() -> StreamEvent | None:
            try:
                return await anext(self._async)
            except StopAsyncIteration:
                return None

        event = self._portal.call(step())
        if event is None:
            raise StopIteration
        return event

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    start = _blocking(RunStream.start)
    close = _blocking(RunStream.aclose)
    wait = _blocking(RunStream.wait)
    final_text = _blocking(RunStream.final_text)
    tool_calls = _blocking(RunStream.tool_calls)
    cancel = _blocking(RunStream.cancel)


class Run(_Face[AsyncRun]):
    """One run of a session (see :class:`~soong_agent.AsyncRun`)."""

    def __init__(self, run: AsyncRun, portal: _Portal) -> None:
        super().__init__(run, portal)
        self.id = run.id
        self.session_id = run.session_id

    def events(
        self, *, last_event_id: str | None = None, cancel_on_exit: bool = False
    ) -> RunIterator:
        """The run's events until it finished."""
        stream = self._async.events(last_event_id=last_event_id, cancel_on_exit=cancel_on_exit)
        return RunIterator(stream, self._portal)

    get = _blocking(AsyncRun.get)
    files = _blocking(AsyncRun.files)
    cancel = _blocking(AsyncRun.cancel)
    wait = _blocking(AsyncRun.wait)


class Session(_Face[AsyncSession]):
    """One session (see :class:`~soong_agent.AsyncSession`)."""

    def __init__(self, session: AsyncSession, portal: _Portal) -> None:
        super().__init__(session, portal)
        self.id = session.id

    def __repr__(self) -> str:
        return f"<Session {self.id}>"

    def send(
        self,
        text: str | None = None,
        *,
        content: list[dict[str, Any]] | None = None,
        parent_node_id: str | None = None,
        multitask_strategy: MultitaskStrategy | str | None = None,
        agent_config: AgentConfigOverrides | dict[str, Any] | None = None,
        cancel_on_exit: bool = False,
        idempotency_key: str | None = None,
    ) -> RunIterator:
        """Send a message and iterate its run's events: ``for event in session.send("hi")``
        (``idempotency_key``: as :meth:`AsyncSession.send`)."""
        stream = self._async.send(
            text,
            content=content,
            parent_node_id=parent_node_id,
            multitask_strategy=multitask_strategy,
            agent_config=agent_config,
            cancel_on_exit=cancel_on_exit,
            idempotency_key=idempotency_key,
        )
        return RunIterator(stream, self._portal)

    def run(self, run_id: str) -> Run:
        """A handle on one run."""
        return Run(self._async.run(run_id), self._portal)

    get = _blocking(AsyncSession.get)
    update = _blocking(AsyncSession.update)
    archive = _blocking(AsyncSession.archive)
    unarchive = _blocking(AsyncSession.unarchive)
    delete = _blocking(AsyncSession.delete)
    export = _blocking(AsyncSession.export)
    post = _blocking(AsyncSession.post)
    runs = _blocking(AsyncSession.runs)
    tree = _blocking(AsyncSession.tree)
    path = _blocking(AsyncSession.path)
    node = _blocking(AsyncSession.node)
    context = _blocking(AsyncSession.context)
    model_context = _blocking(AsyncSession.model_context)
    switch_node = _blocking(AsyncSession.switch_node)
    regenerate = _blocking(AsyncSession.regenerate)
    compact = _blocking(AsyncSession.compact)
    timeline = _blocking(AsyncSession.timeline)
    all_timeline = _blocking(AsyncSession.all_timeline)
    agents = _blocking(AsyncSession.agents)
    skills = _blocking(AsyncSession.skills)
    hooks = _blocking(AsyncSession.hooks)
    decide = _blocking(AsyncSession.decide)
    allow = _blocking(AsyncSession.allow)
    deny = _blocking(AsyncSession.deny)
    files = _blocking(AsyncSession.files)
    upload = _blocking(AsyncSession.upload)
    upload_files = _blocking(AsyncSession.upload_files)
    download = _blocking(AsyncSession.download)
    artifacts = _blocking(AsyncSession.artifacts)
    artifact = _blocking(AsyncSession.artifact)
    artifact_content = _blocking(AsyncSession.artifact_content)
    task_lists = _blocking(AsyncSession.task_lists)
    task_list = _blocking(AsyncSession.task_list)


class Memory(_Face[AsyncMemory]):
    """The account's memory files (see :class:`~soong_agent.AsyncMemory`)."""

    read = _blocking(AsyncMemory.read)
    write = _blocking(AsyncMemory.write)
    list = _blocking(AsyncMemory.list)
    history = _blocking(AsyncMemory.history)
    restore = _blocking(AsyncMemory.restore)


class Assistants(_Face[AsyncAssistants]):
    """The account's named agents (see :class:`~soong_agent.AsyncAssistants`)."""

    create = _blocking(AsyncAssistants.create)
    list = _blocking(AsyncAssistants.list)
    get = _blocking(AsyncAssistants.get)
    versions = _blocking(AsyncAssistants.versions)
    update = _blocking(AsyncAssistants.update)
    replace = _blocking(AsyncAssistants.replace)
    archive = _blocking(AsyncAssistants.archive)


class Client(_Face[AsyncClient]):
    """A blocking client; use it as ``with Client() as c`` (arguments as :class:`AsyncClient`)."""

    def __init__(self, base_url: str | None = None, api_key: str | None = None, **options: Any):
        self._portal = _Portal()
        try:
            self._async = AsyncClient(base_url, api_key, **options)
        except BaseException:
            self._portal.close()
            raise
        self.memory = Memory(self._async.memory, self._portal)
        self.assistants = Assistants(self._async.assistants, self._portal)

    @property
    def base_url(self) -> str:
        """The gateway's URL."""
        return self._async.base_url

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections and stop the portal's thread."""
        try:
            self._portal.call(self._async.aclose())
        finally:
            self._portal.close()

    def session(self, session_id: str) -> Session:
        """A handle on an existing session (no request)."""
        return Session(self._async.session(session_id), self._portal)

    def create_session(
        self,
        *,
        cwd: str | None = None,
        metadata: dict[str, Any] | None = None,
        agent_config: AgentConfigOverrides | dict[str, Any] | None = None,
        mode: Literal["agent", "orchestrator"] = "agent",
        assistant: str | None = None,
        assistant_version: int | None = None,
    ) -> Session:
        """Create a session and return its handle (``assistant``: from that named agent)."""
        created = self._portal.call(
            self._async.create_session(
                cwd=cwd,
                metadata=metadata,
                agent_config=agent_config,
                mode=mode,
                assistant=assistant,
                assistant_version=assistant_version,
            )
        )
        return Session(created, self._portal)

    def iter_sessions(self, **kw: Any) -> Iterator[SessionState]:
        """Every session of the key, newest first."""
        pages = self._async.iter_sessions(**kw)

        async def step() -> SessionState | None:
            try:
                return await anext(pages)
            except StopAsyncIteration:
                return None

        while (item := self._portal.call(step())) is not None:
            yield item

    list_sessions = _blocking(AsyncClient.list_sessions)
    search_sessions = _blocking(AsyncClient.search_sessions)
    audit = _blocking(AsyncClient.audit)
    usage = _blocking(AsyncClient.usage)
    health = _blocking(AsyncClient.health)
    readiness = _blocking(AsyncClient.readiness)
