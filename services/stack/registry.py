"""The services of the stack, by name: each one's builder, imported only when it is served.

Explicit imports (not module names built from strings) so that mypy and an import graph see
every edge; lazy, so that ``serve task_wal`` does not import the gateway's web framework.
"""

from __future__ import annotations

from agent_core.bus import SERVICE_NAMES
from agent_core.service.runner import ServiceFactory

__all__ = ["service_factory"]


def service_factory(name: str) -> ServiceFactory:
    """The ``build`` function of service ``name`` (one of ``SERVICE_NAMES``)."""
    if name == "gateway":
        from services.gateway.service import build as gateway

        return gateway
    if name == "run_worker":
        from services.run_worker.service import build as run_worker

        return run_worker
    if name == "storage_writer":
        from services.storage_writer.service import build as storage_writer

        return storage_writer
    if name == "task_wal":
        from services.task_wal.service import build as task_wal

        return task_wal
    if name == "memory_extraction":
        from services.memory_extraction.service import build as memory_extraction

        return memory_extraction
    raise ValueError(f"no service {name!r} (services: {', '.join(SERVICE_NAMES)})")
