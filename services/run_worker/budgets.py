"""How much of its account's token budget a run may spend (``[budgets]``; the rule is
:mod:`agent_core.runtime.budget`'s): the budget from the settings, what the account used in the
period from the storage-writer's kept usage totals (one indexed read, only for an account that
has a budget)."""

from __future__ import annotations

import datetime as dt

from agent_core.bus.contracts.storage import GetUsage
from agent_core.config import Settings
from agent_core.runtime.budget import AccountBudget
from services.run_worker.reads import RunReads

__all__ = ["AccountBudgets", "period_start"]


def period_start(period: str, today: dt.date) -> dt.date | None:
    """The first day (UTC) a budget's ``period`` counts from on ``today``; ``None``: ever."""
    if period == "day":
        return today
    if period == "month":
        return today.replace(day=1)
    return None


class AccountBudgets:
    """The accounts' budgets of one run-worker."""

    def __init__(self, settings: Settings, reads: RunReads) -> None:
        self._settings = settings.budgets
        self._reads = reads

    async def of(self, account_id: str) -> AccountBudget | None:
        """``account_id``'s budget with what its ended runs used in the period; ``None`` when
        it has no budget (then nothing is read)."""
        tokens = self._settings.tokens_for(account_id)
        if tokens is None:
            return None
        period = self._settings.period
        since = period_start(period, dt.datetime.now(dt.UTC).date())
        rows = await self._reads.read(GetUsage(account_id=account_id, since=since))
        return AccountBudget(tokens, sum(r.total_tokens for r in rows), period)
