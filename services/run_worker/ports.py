"""What the stages of an attempt share: the worker's clients and its per-process helpers.

:class:`RunExecutor <services.run_worker.executor.RunExecutor>` makes one :class:`AttemptPorts`
per worker process and hands it to each stage (:class:`~services.run_worker.loop_setup.LoopSetup`,
:class:`~services.run_worker.prepare.Preparer`,
:class:`~services.run_worker.attempt_end.AttemptEnd`), which take it through :class:`AttemptStage`
and add only what is theirs.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_core.runqueue import SessionQueue
from agent_core.service import ServiceContext
from agent_core.storage_client import StorageClient
from services.run_worker.agent_setup import AgentSetup
from services.run_worker.reads import RunReads
from services.run_worker.skills_link import SkillLink
from services.run_worker.workspaces import WorkspaceMirrors

__all__ = ["AttemptPorts", "AttemptStage"]


@dataclass(frozen=True, slots=True)
class AttemptPorts:
    """The collaborators every stage of an attempt uses (one set per worker process)."""

    ctx: ServiceContext
    storage: StorageClient
    queue: SessionQueue
    reads: RunReads
    setup: AgentSetup
    skills: SkillLink
    mirrors: WorkspaceMirrors


class AttemptStage:
    """A stage of an attempt: the ports as its attributes, read by the stage's methods."""

    def __init__(self, ports: AttemptPorts) -> None:
        self.ports = ports
        self.ctx = ports.ctx
        self.storage = ports.storage
        self.queue = ports.queue
        self.reads = ports.reads
        self.setup = ports.setup
        self.skills = ports.skills
        self.mirrors = ports.mirrors
