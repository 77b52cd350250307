"""soong_agent: the Python client of soong-agent's HTTP API.

::

    import soong_agent
    from soong_agent.types import RunTextDelta

    async with soong_agent.AsyncClient() as client:        # $SOONG_GATEWAY_URL, $SOONG_API_KEY
        session = await client.create_session()
        async for event in session.send("Summarise input/report.pdf"):
            if isinstance(event, RunTextDelta):             # typed runtime events …
                print(event.text, end="")
        # … until run_finished; a dropped connection resumes by itself (Last-Event-ID)

The models are the server's own (``agent_core.types``), re-exported by :mod:`soong_agent.types`;
errors form one tree under :class:`SoongError`; :func:`local` runs a whole stack for a block;
:class:`Client` is the same client, blocking. The layout and its reasons are in
``docs/architecture.md`` ("Client SDK and console").
"""

import importlib
from typing import TYPE_CHECKING, Any

# The names below load on first use (PEP 562): ``import soong_agent`` costs next to nothing, so
# the command line's parsers (``soong_agent.cli``) and a script that uses one part of the client
# do not pay for all of it.
if TYPE_CHECKING:
    from soong_agent._assistants import AsyncAssistants
    from soong_agent._client import AsyncClient, AsyncMemory
    from soong_agent._errors import (
        APIError,
        AuthenticationError,
        BadRequestError,
        ConflictError,
        FieldError,
        NotFoundError,
        PayloadTooLargeError,
        PermissionDeniedError,
        PreconditionFailedError,
        PreconditionRequiredError,
        ProtocolError,
        RateLimitedError,
        ServerError,
        ServiceUnavailableError,
        SoongError,
        StreamLostError,
        TransportError,
        ValidationError,
    )
    from soong_agent._local import LocalClient, LocalStackError, local
    from soong_agent._session import AsyncRun, AsyncSession
    from soong_agent._sse import StreamEvent
    from soong_agent._stream import RunStream, ToolUse
    from soong_agent._sync import Assistants, Client, Memory, Run, RunIterator, Session

_WHERE: dict[str, str] = {
    "AsyncAssistants": "soong_agent._assistants",
    "AsyncClient": "soong_agent._client",
    "AsyncMemory": "soong_agent._client",
    "APIError": "soong_agent._errors",
    "AuthenticationError": "soong_agent._errors",
    "BadRequestError": "soong_agent._errors",
    "ConflictError": "soong_agent._errors",
    "FieldError": "soong_agent._errors",
    "NotFoundError": "soong_agent._errors",
    "PayloadTooLargeError": "soong_agent._errors",
    "PermissionDeniedError": "soong_agent._errors",
    "PreconditionFailedError": "soong_agent._errors",
    "PreconditionRequiredError": "soong_agent._errors",
    "ProtocolError": "soong_agent._errors",
    "RateLimitedError": "soong_agent._errors",
    "ServerError": "soong_agent._errors",
    "ServiceUnavailableError": "soong_agent._errors",
    "SoongError": "soong_agent._errors",
    "StreamLostError": "soong_agent._errors",
    "TransportError": "soong_agent._errors",
    "ValidationError": "soong_agent._errors",
    "LocalClient": "soong_agent._local",
    "LocalStackError": "soong_agent._local",
    "local": "soong_agent._local",
    "AsyncRun": "soong_agent._session",
    "AsyncSession": "soong_agent._session",
    "StreamEvent": "soong_agent._sse",
    "RunStream": "soong_agent._stream",
    "ToolUse": "soong_agent._stream",
    "Assistants": "soong_agent._sync",
    "Client": "soong_agent._sync",
    "Memory": "soong_agent._sync",
    "Run": "soong_agent._sync",
    "RunIterator": "soong_agent._sync",
    "Session": "soong_agent._sync",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'soong_agent' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "APIError",
    "AsyncClient",
    "Assistants",
    "AsyncAssistants",
    "AsyncMemory",
    "AsyncRun",
    "AsyncSession",
    "AuthenticationError",
    "BadRequestError",
    "Client",
    "ConflictError",
    "FieldError",
    "LocalClient",
    "LocalStackError",
    "Memory",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "PreconditionFailedError",
    "PreconditionRequiredError",
    "ProtocolError",
    "RateLimitedError",
    "Run",
    "RunIterator",
    "RunStream",
    "ServerError",
    "ServiceUnavailableError",
    "Session",
    "SoongError",
    "StreamEvent",
    "StreamLostError",
    "ToolUse",
    "TransportError",
    "ValidationError",
    "local",
]
