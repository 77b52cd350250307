"""memory_extraction: batches interactions per account, consolidates them, answers memory queries.

Not an agent: it has no agent_id and no run_id of its own; the ids interactions carry are
provenance for the change log only. Memory file writes happen here and nowhere else.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence

from agent_core.bus import GROUP_MEMORY, Delivery
from agent_core.bus.contracts.memory import MEMORY_INTERACTION, MEMORY_QUERY
from agent_core.bus.contracts.memory import Interaction as BusInteraction
from agent_core.config import Settings
from agent_core.config.providers import missing_keys
from agent_core.files import open_file_store
from agent_core.memory import Interaction
from agent_core.observability.instrument import InstrumentedAdapter
from agent_core.provider import ProviderRegistry, aclose_adapter
from agent_core.service import ServiceContext, ServiceParts

from .consolidate import BatchItem, Consolidator
from .llm import LLMProposer, provider_settings
from .queries import MemoryQueries
from .queue import PendingQueue
from .store import MemoryStore, Source

__all__ = ["build", "make_proposer", "to_batch_item"]


def to_batch_item(message: BusInteraction) -> BatchItem:
    """The pipeline's view of a bus interaction, with its provenance."""
    turns = [t.model_dump(exclude_none=True) for t in message.turns]
    skills = [s if isinstance(s, str) else s.model_dump() for s in message.skills]
    return BatchItem(
        interaction=Interaction.model_validate({"turns": turns, "skills": skills}),
        source=Source(
            session_id=message.session_id,
            run_id=message.run_id,
            interaction_id=message.interaction_id,
        ),
    )


def make_proposer(
    settings: Settings, registry: ProviderRegistry | None = None
) -> LLMProposer | None:
    """The LLM consolidator of ``memory.model`` (else ``model``), or ``None`` when unreachable."""
    model = settings.memory.model or settings.model
    config = provider_settings(model)
    if config is None:
        return None
    adapter = InstrumentedAdapter((registry or ProviderRegistry()).create(config), config.provider)
    return LLMProposer(
        adapter, model.name, timeout_s=model.timeout_s, max_tokens=model.max_output_tokens
    )


async def build(ctx: ServiceContext) -> ServiceParts:
    """Consumers of interactions and queries, and the flush loop."""
    # The memory files live in the file store ([files]): any host's extractor reaches them.
    files = await open_file_store(ctx.settings)
    store = MemoryStore(files)
    queries = MemoryQueries(store)
    parts = ServiceParts(
        consumers=[ctx.consumer(ctx.names.memory_queries, GROUP_MEMORY, MEMORY_QUERY,
                                handler=queries.handle,
                                options=ctx.default_options())]
    )  # fmt: skip
    parts.on_stop.append(files.close)
    if not ctx.settings.memory.enabled:
        ctx.log.info("memory extraction disabled: answering queries only")
        return parts
    proposer = make_proposer(ctx.settings)
    if proposer is None:
        missing = missing_keys(ctx.settings, os.environ, memory=True)
        variable = missing[0].variable if missing else "its key variable"
        # Once, at start: memory still works (by rules); what it lacks is said plainly.
        ctx.log.warning(
            "the memory model has no key (%s is not set): consolidating with rules only",
            variable,
        )
    consolidator = Consolidator(store, proposer)
    queue = PendingQueue(
        ctx.bus,
        ctx.names,
        debounce_s=ctx.settings.memory.debounce_s,
        lock_ttl_s=(proposer.timeout_s if proposer else 0) + 60,
    )

    async def on_interactions(batch: list[tuple[BusInteraction, Delivery]]) -> list[None]:
        # Acknowledged once queued in Redis (one round trip per batch); consolidation is later.
        await queue.push_many([message for message, _ in batch])
        return [None] * len(batch)

    async def flush(account_id: str, items: Sequence[BusInteraction]) -> None:
        report = await consolidator.consolidate(account_id, [to_batch_item(m) for m in items])
        if report.mode != "skipped":
            ctx.log.info(
                "memory %s: %d interactions, %s, %d changes%s", account_id, report.items,
                report.mode, len(report.changes), " (merged again)" if report.merged_again else "",
            )  # fmt: skip

    async def flush_loop(stop: asyncio.Event) -> None:
        await queue.run(stop, flush)

    async def close() -> None:
        if proposer is not None:
            await aclose_adapter(proposer.adapter)

    parts.consumers.append(
        ctx.consumer(
            ctx.names.memory_interactions,
            GROUP_MEMORY,
            MEMORY_INTERACTION,
            batch_handler=on_interactions,
            options=ctx.default_options(batch=True),
        )
    )
    parts.tasks.append(flush_loop)
    parts.on_stop.append(close)
    return parts
