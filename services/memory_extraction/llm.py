"""The LLM consolidator: one provider call per batch, its answer validated before anything applies.

Any failure — the provider raising, an error event, the deadline passing, text that is not JSON,
JSON that does not match :class:`MemoryUpdateBatch`, a scope that is not allowed, an entry id that
does not exist — raises :class:`ProposalError`, and the caller applies the rule fallback instead.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping, Sequence

from pydantic import ValidationError

from agent_core.config.providers import key_env
from agent_core.config.schema import ModelSettings
from agent_core.errors import AgentCoreError
from agent_core.memory import (
    Interaction,
    MemoryDocument,
    MemoryUpdateBatch,
    Signal,
    UpdateOp,
)
from agent_core.provider import ProviderAdapter, ProviderSettings
from agent_core.types.enums import Role
from agent_core.types.protocol import (
    ErrorEvent,
    ModelMessage,
    ModelRequest,
    SystemBlock,
    TextBlock,
    TextDeltaEvent,
)

from .prompt import SYSTEM_PROMPT, allowed_scopes, build_input

__all__ = ["LLMProposer", "ProposalError", "parse_batch", "provider_settings"]


class ProposalError(AgentCoreError):
    """The LLM gave no usable batch (failure, timeout or invalid output): use the fallback."""

    error_type = "memory_proposal_error"


def provider_settings(
    model: ModelSettings, env: Mapping[str, str] | None = None
) -> ProviderSettings | None:
    """Provider settings for ``model``, or ``None`` when it cannot be reached without a key.

    The key is read from the variable ``model.api_key_env`` names (else the provider kind's own),
    once, at service start.
    """
    env = os.environ if env is None else env
    variable = key_env(model.provider, model.api_key_env)
    key = env.get(variable) if variable else None
    if not key and model.base_url is None and model.provider != "ollama":
        return None  # a hosted provider without a key: every call would fail, use the rules
    return ProviderSettings(
        provider=model.provider,
        base_url=model.base_url,
        api_key=key or None,
        timeout_s=model.timeout_s,
        max_retries=1,
    )


def _json_text(text: str) -> str:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ProposalError("memory_llm_not_json", "the model's answer holds no JSON object")
    return text[start : end + 1]


def parse_batch(
    text: str, documents: Mapping[str, MemoryDocument], scopes: Sequence[str]
) -> MemoryUpdateBatch:
    """Validate the model's answer against the schema, the allowed scopes and the known ids."""
    try:
        batch = MemoryUpdateBatch.model_validate(json.loads(_json_text(text)))
    except (ValueError, ValidationError) as exc:
        raise ProposalError("memory_llm_invalid", f"invalid update batch: {exc}") from exc
    known = {(scope, e.id) for scope, doc in documents.items() for e in doc.entries}
    for u in batch.updates:
        if u.scope not in scopes:
            raise ProposalError("memory_llm_invalid", f"scope {u.scope!r} is not allowed")
        if u.op is UpdateOp.ADD and u.entry_id:
            known.add((u.scope, u.entry_id))
        elif u.op in (UpdateOp.UPDATE, UpdateOp.DELETE) and (u.scope, u.entry_id) not in known:
            raise ProposalError("memory_llm_invalid", f"unknown entry {u.scope}/{u.entry_id}")
    return batch


class LLMProposer:
    """Asks the memory model for a :class:`MemoryUpdateBatch`."""

    def __init__(
        self, adapter: ProviderAdapter, model: str, *, timeout_s: float, max_tokens: int = 2048
    ) -> None:
        self.adapter = adapter
        self.model = model
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens

    def request(
        self,
        documents: Mapping[str, MemoryDocument],
        batch: Sequence[tuple[Interaction, Sequence[Signal]]],
    ) -> ModelRequest:
        """The provider-neutral request of one consolidation."""
        return ModelRequest(
            model=self.model,
            system=[SystemBlock(text=SYSTEM_PROMPT)],
            messages=[
                ModelMessage(
                    role=Role.USER, content=[TextBlock(text=build_input(documents, batch))]
                )
            ],
            max_tokens=self.max_tokens,
            temperature=0,
            metadata={"purpose": "memory_consolidation"},
        )

    async def _collect(self, request: ModelRequest) -> str:
        parts: list[str] = []
        events = self.adapter.stream(request)
        try:
            async for event in events:
                if isinstance(event, TextDeltaEvent):
                    parts.append(event.text)
                elif isinstance(event, ErrorEvent):
                    raise ProposalError("memory_llm_failed", event.error.message)
        finally:
            close = getattr(events, "aclose", None)  # closes the HTTP stream on early exit
            if close is not None:
                await close()
        return "".join(parts)

    async def propose(
        self,
        documents: Mapping[str, MemoryDocument],
        batch: Sequence[tuple[Interaction, Sequence[Signal]]],
    ) -> MemoryUpdateBatch:
        """The validated batch, or :class:`ProposalError`."""
        try:
            async with asyncio.timeout(self.timeout_s):
                text = await self._collect(self.request(documents, batch))
        except TimeoutError as exc:
            raise ProposalError("memory_llm_timeout", "the memory model timed out") from exc
        except ProposalError:
            raise
        except AgentCoreError as exc:
            raise ProposalError("memory_llm_failed", exc.message, cause=exc) from exc
        except Exception as exc:  # an adapter breaking its contract still only costs the LLM path
            raise ProposalError("memory_llm_failed", type(exc).__name__, cause=exc) from exc
        return parse_batch(text, documents, allowed_scopes(documents, [ix for ix, _ in batch]))
