"""The A2A routes: an agent card and a JSON-RPC endpoint per assistant, under ``/a2a``.

Light to import: the routes resolve the caller's assistant here and hand the request to
:mod:`services.gateway.a2a_server` (the ``a2a-sdk`` behind it), which is imported and built on
the first A2A request (:class:`services.gateway.lazy.Lazy`). Not in the OpenAPI document: the
protocol's contract is A2A's.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from services.gateway.agent_calls import find_assistant
from services.gateway.lazy import Lazy
from services.gateway.state import CallerDep, GatewayDep

if TYPE_CHECKING:
    from services.gateway.a2a_server import A2AEndpoint

__all__ = ["AGENT_CARD_PATH", "a2a_endpoint", "router"]

# The A2A well-known path (``a2a.utils.constants.AGENT_CARD_WELL_KNOWN_PATH``, a test holds them
# equal), spelled here so that routing needs no SDK import.
AGENT_CARD_PATH: Final = "/.well-known/agent-card.json"

router = APIRouter(prefix="/a2a", include_in_schema=False)

# The SDK wraps its own internal calls in OpenTelemetry spans, a dozen per streamed event when a
# tracer provider is set (ours is, for the run's trace): a large share of the gateway's CPU per
# A2A event, and noise in a tracing backend beside the run's own spans. Off unless the operator
# sets the SDK's variable; set here, before any import of the SDK (it reads it then).
os.environ.setdefault("OTEL_INSTRUMENTATION_A2A_SDK_ENABLED", "false")


def _build() -> A2AEndpoint:
    from services.gateway.a2a_server import A2AEndpoint

    return A2AEndpoint()


def a2a_endpoint() -> Lazy[A2AEndpoint]:
    """The process's A2A endpoint, built on the first request (kept in ``app.state.a2a``)."""
    return Lazy(_build)


@router.get("/{assistant}" + AGENT_CARD_PATH)
async def agent_card(
    assistant: str, request: Request, gw: GatewayDep, caller: CallerDep
) -> JSONResponse:
    """The assistant's A2A agent card."""
    found = await find_assistant(gw, caller, assistant)
    from services.gateway.a2a_server import card_body

    return JSONResponse(card_body(found, str(request.base_url)))


@router.post("/{assistant}")
async def jsonrpc(assistant: str, request: Request, gw: GatewayDep, caller: CallerDep) -> Response:
    """The assistant's A2A JSON-RPC endpoint (the SDK's dispatcher)."""
    found = await find_assistant(gw, caller, assistant)
    lazy: Lazy[A2AEndpoint] = request.app.state.a2a
    endpoint = await lazy.get()
    from services.gateway.a2a_server import dispatch

    return await dispatch(endpoint, request, gw, caller, found)
