"""An account's token budget as one of its runs sees it (``[budgets]`` in config.toml).

The run-worker reads, when a run starts, how much of its account's budget the runs that ended in
the budget's period used (the storage-writer's kept usage totals); the run ends
``budget_exhausted`` at once when nothing is left, else its loop ends it after the model turn
that uses up the rest. Runs of one account in flight at the same time each see the totals of the
runs that ended, so together they may overshoot by what they spend before their next check.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_core.errors import ErrorPayload

__all__ = ["AccountBudget"]


@dataclass(frozen=True, slots=True)
class AccountBudget:
    """``tokens`` per ``period`` (``day``, ``month`` or ``total``) for the account, ``used`` of
    them by its runs that ended in the period (input plus output tokens)."""

    tokens: int
    used: int
    period: str

    def exhausted_by(self, spent: int = 0) -> bool:
        """Whether the runs that ended plus ``spent`` (this run's tokens) use the budget up."""
        return self.used + spent >= self.tokens

    def error(self, spent: int = 0) -> ErrorPayload:
        """The error a run ended by the budget carries (``budget_exhausted``)."""
        used = self.used + spent
        per = "in total" if self.period == "total" else f"this {self.period} (UTC)"
        return ErrorPayload(
            type="budget_exhausted",
            code="budget_exhausted",
            message=(
                f"the account's token budget is used up: {used} of {self.tokens} tokens {per}; "
                "runs start again when the operator raises it or the period turns"
            ),
            details={"budget_tokens": self.tokens, "used_tokens": used, "period": self.period},
        )
