"""The permission check before a tool runs: policy allow / deny / ask (ask awaits a broker).

The broker is an async callable injected by the runtime: the run-worker's broker publishes the
:class:`PermissionRequest`, marks the run pending and resolves when the decision arrives over the
API, so ``ask`` pauses the run without blocking the worker.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_core.types.enums import PermissionBehavior, PermissionPolicy
from agent_core.types.protocol import PermissionDecision, PermissionRequest, ToolCall

__all__ = ["PermissionBroker", "PermissionGate", "PermissionRules", "request_id_of"]

PermissionBroker = Callable[[PermissionRequest], Awaitable[PermissionDecision]]


def request_id_of(run_id: str, call_id: str) -> str:
    """The id of the permission request for tool call ``call_id`` of run ``run_id``.

    Derived from both: a resumed run asks the same request again (not a new one), and two runs
    whose models reuse a call id (Ollama's ``call_0``, scripted models) never share a request —
    a decision given in one session can never answer another's. Hashed, so that any call id
    makes a short id of the characters the API accepts."""
    digest = hashlib.blake2b(f"{run_id}\x00{call_id}".encode(), digest_size=16).hexdigest()
    return f"perm_{digest}"


@dataclass(frozen=True, slots=True)
class PermissionRules:
    """An agent's permission policy: a default, overrides per tool name, and read-only tools.

    ``read_only`` applies to tools that change nothing (``writes=False``) when no per-tool rule
    names them, so an ``ask`` agent is not asked before every ``read_file``; a tool that
    ``asks_first`` is asked for, unless a per-tool rule names it (or the default denies).
    """

    default: PermissionPolicy = PermissionPolicy.ALLOW
    per_tool: Mapping[str, PermissionPolicy] = field(default_factory=dict)
    read_only: PermissionPolicy | None = PermissionPolicy.ALLOW

    def policy_for(
        self, tool_name: str, *, writes: bool, asks_first: bool = False
    ) -> PermissionPolicy:
        """The policy that governs one call of ``tool_name``."""
        if tool_name in self.per_tool:
            return self.per_tool[tool_name]
        if asks_first:  # never the read-only allowance: its effect leaves the session
            deny = self.default is PermissionPolicy.DENY
            return PermissionPolicy.DENY if deny else PermissionPolicy.ASK
        if not writes and self.read_only is not None:
            return self.read_only
        return self.default


class PermissionGate:
    """Decides one tool call: by policy, or by asking the broker."""

    def __init__(self, rules: PermissionRules, broker: PermissionBroker | None = None) -> None:
        self.rules = rules
        self._broker = broker

    async def decide(
        self,
        call: ToolCall,
        *,
        writes: bool,
        asks_first: bool = False,
        session_id: str,
        run_id: str,
        agent_id: str,
        ask: str | None = None,
        input_schema: Callable[[], dict[str, Any]] | None = None,
    ) -> PermissionDecision:
        """The decision for ``call``; with ``ask`` this waits as long as the broker does.

        ``ask``: a PreToolUse hook asks for a person's decision, and why: a call the policy
        allows is asked for (one it denies stays denied — a hook never loosens the policy).
        ``input_schema``: makes the tool's, sent with the request so that a person may edit
        the arguments before approving (the decision's ``arguments``); called only when a
        person is asked (a JSON Schema costs ~0.1 ms to build, every allowed call would pay)."""
        request_id = request_id_of(run_id, call.id)
        policy = self.rules.policy_for(call.name, writes=writes, asks_first=asks_first)
        if ask is not None and policy is PermissionPolicy.ALLOW:
            policy = PermissionPolicy.ASK
        if policy is PermissionPolicy.ALLOW:
            return PermissionDecision(
                request_id=request_id, behavior=PermissionBehavior.ALLOW, decided_by="policy"
            )
        if policy is PermissionPolicy.DENY:
            return PermissionDecision(
                request_id=request_id,
                behavior=PermissionBehavior.DENY,
                reason=f"the agent's policy denies {call.name}",
                decided_by="policy",
            )
        if self._broker is None:
            return PermissionDecision(
                request_id=request_id,
                behavior=PermissionBehavior.DENY,
                reason="permission required but no one can be asked in this run",
                decided_by="policy",
            )
        request = PermissionRequest(
            request_id=request_id,
            session_id=session_id,
            run_id=run_id,
            agent_id=agent_id,
            tool_call=call,
            reason=ask or f"{call.name} needs approval",
            input_schema=input_schema() if input_schema is not None else None,
        )
        decision = await self._broker(request)
        if decision.request_id != request_id:
            # A decision for another request must never unlock this one.
            return PermissionDecision(
                request_id=request_id,
                behavior=PermissionBehavior.DENY,
                reason="the permission decision answered a different request",
                decided_by="policy",
            )
        return decision
