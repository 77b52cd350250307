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
