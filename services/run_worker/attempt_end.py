"""The end stage of a claimed attempt: the one place its run's end is settled, written and told.

:meth:`AttemptEnd.write` turns the :class:`Ending` that :func:`agent_core.runtime.drive` returned
into the run's end and writes it (fenced by the attempt, :func:`endings.end_run`) once the run's
files are in the store; :meth:`AttemptEnd.tell` then announces it on the run's stream, closes the
stream and hands the interaction to memory. An attempt that a newer one superseded ends nothing
(:meth:`AttemptEnd.superseded`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging

from agent_core.runqueue import QueuedRun
from agent_core.runtime import Ending, Fenced, RunProgress
from agent_core.skills import SkillCatalog
from agent_core.tools import Workspace
from agent_core.types.enums import RunStatus
from services.run_worker.child_endings import end_lost_children
from services.run_worker.claim import Claimed
from services.run_worker.endings import announce, end_run
from services.run_worker.memory_link import hand_off
from services.run_worker.ports import AttemptStage

__all__ = ["AttemptEnd"]

log = logging.getLogger("soong.run_worker")


class AttemptEnd(AttemptStage):
    """Ends the claimed attempts of one worker process."""

    async def write(self, c: Claimed, p: RunProgress, ending: Ending) -> Ending:
        """Write ``ending`` as the run's one end; return the end as recorded (the stored one when
        the run had ended already). Raises :class:`Fenced` when a newer attempt owns the run,
        and whatever the end's write raises (the run then stays in flight for a takeover)."""
        run = c.run
        cancelled = ending.end.status is RunStatus.CANCELLED
        if c.handle.attempt > 1 and cancelled:
            # A cancel waiting for the recovered run stops its task before the task has ended
            # the lost attempt's child runs: they end now, before the run does.
            await self._end_lost_children_after_cancel(c)
        if cancelled and await self.queue.interrupted(run.run_id):
            # Stopped for a newer message, not by a cancel of its own.
            aborted = ending.end.model_copy(update={"status": RunStatus.ABORTED})
            ending = dataclasses.replace(ending, end=aborted)
        # What the run wrote is in the store before its end is (the next turn may run on
        # another host).
        await self.mirrors.sync(run.account_id, run.session_id, c.events, c.files_phase())
        hooks = p.loop.hooks if p.loop is not None else None
        if hooks is not None:  # RunEnd: before the end is written (the timeline closes)
            await hooks.run_end(ending.end)
        return await end_run(
            self.storage,
            self.reads,
            c.handle,
            ending,
            fence=c.store.fence,
            set_active=c.store.set_active,
            debug=self._debug_workspace(run),
            model=p.loop.config.model if p.loop is not None else None,
        )

    async def tell(self, c: Claimed, p: RunProgress, ending: Ending) -> None:
        """The written end on the run's stream (its last events, then the stream closed), and
        the interaction to memory (a main run's, whatever its end)."""
        announce(c.events, c.handle, ending)
        await c.events.close()
        run = c.run
        if self.ctx.settings.memory.enabled and run.kind == "main":  # every end, failed too
            nodes = p.nodes if ending.node is None else [*p.nodes, ending.node]
            catalog = functools.partial(self._skill_catalog, run, c.cwd)
            await hand_off(self.ctx, self.reads, c.item, ending.end, nodes, catalog)

    @staticmethod
    async def superseded(c: Claimed) -> bool:
        """A newer attempt owns the run: this one stops writing and ends nothing (its stream's
        buffered events are dropped). ``False``: the run is not this worker's to finish."""
        log.warning("run %s attempt %d was superseded; stopping", c.run.run_id, c.handle.attempt)
        await c.events.abort()
        return False

    async def _end_lost_children_after_cancel(self, c: Claimed) -> None:
        """End a cancelled recovered run's lost child runs (none are left when its task had
        ended them). Raises :class:`Fenced` only: the run's end goes on whatever else fails."""
        try:
            await end_lost_children(self.storage, self.queue, self.reads, c)
        except Fenced:
            raise
        except Exception as exc:
            why = type(exc).__name__
            log.warning(
                "run %s: its lost attempt's child runs were not ended (%s)", c.handle.run_id, why
            )

    def _skill_catalog(self, run: QueuedRun, cwd: str) -> SkillCatalog | None:
        """The run's skills for memory's hand-off (which skill owns which tool); ``None`` when
        they cannot be read: memory then gets names only, and the run's end is unaffected."""
        try:
            return self.skills.catalog(run, cwd, self.setup.config(run.config_overrides))
        except Exception as exc:
            log.warning("skills of %s unreadable for memory: %s", run.run_id, type(exc).__name__)
            return None

    def _debug_workspace(self, run: QueuedRun) -> Workspace | None:
        """Where debug mode keeps the tracebacks of the run's unexpected failures."""
        if not self.ctx.settings.debug:
            return None
        return Workspace(self.ctx.settings.home, run.account_id, run.session_id)
