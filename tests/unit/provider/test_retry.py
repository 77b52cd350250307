"""Retries only before the first event; an ErrorEvent after it."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import pytest

from agent_core.errors import ProviderError
from agent_core.provider.retry import RetryPolicy, stream_with_retries
from agent_core.types.protocol import ErrorEvent, ModelEvent, TextDeltaEvent


def failing(code: str, *, retryable: bool, retry_after: float | None = None) -> ProviderError:
    return ProviderError(code, code, retryable=retryable, provider="p", retry_after_s=retry_after)


class Script:
    """Attempts that fail or yield text, in order; records how many attempts were opened/closed."""

    def __init__(self, *plans: list[str | ProviderError]) -> None:
        self.plans = list(plans)
        self.opened = 0
        self.closed = 0
        self.sleeps: list[float] = []

    async def attempt(self) -> AsyncGenerator[ModelEvent, None]:
        plan = self.plans[self.opened]
        self.opened += 1
        try:
            for item in plan:
                if isinstance(item, ProviderError):
                    raise item
                yield TextDeltaEvent(text=item)
        finally:
            self.closed += 1

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)


async def run(script: Script, policy: RetryPolicy) -> list[ModelEvent]:
    return [e async for e in stream_with_retries(script.attempt, policy, sleep=script.sleep)]


async def test_retryable_error_before_first_event_is_retried_with_retry_after() -> None:
    script = Script([failing("rate_limited", retryable=True, retry_after=1.5)], ["ok"])
    events = await run(script, RetryPolicy(max_retries=2))
    assert [e.text for e in events if isinstance(e, TextDeltaEvent)] == ["ok"]
    assert script.sleeps == [1.5] and script.opened == 2 and script.closed == 2


async def test_backoff_grows_exponentially_with_jitter() -> None:
    err = failing("server_error", retryable=True)
    script = Script([err], [err], [err], ["ok"])
    await run(script, RetryPolicy(max_retries=3, base_delay_s=1.0, max_delay_s=3.0, jitter=0.25))
    assert len(script.sleeps) == 3
    for got, nominal in zip(script.sleeps, [1.0, 2.0, 3.0], strict=True):
        assert nominal * 0.75 <= got <= nominal


async def test_non_retryable_error_is_raised_at_once() -> None:
    script = Script([failing("authentication_failed", retryable=False)], ["never"])
    with pytest.raises(ProviderError) as info:
        await run(script, RetryPolicy(max_retries=5))
    assert info.value.code == "authentication_failed" and script.opened == 1


async def test_retries_run_out() -> None:
    err = failing("rate_limited", retryable=True, retry_after=0)
    script = Script([err], [err], [err])
    with pytest.raises(ProviderError):
        await run(script, RetryPolicy(max_retries=2, base_delay_s=0.0))
    assert script.opened == 3 and script.sleeps == [0, 0]


@pytest.mark.parametrize(
    ("retry_after", "expected"),
    [(None, [1.0, 2.0]), (0.0, [1.0, 2.0]), (1.5, [1.5, 2.0]), (5.0, [5.0, 5.0])],
)
def test_retry_after_wins_only_when_longer_than_the_backoff(
    retry_after: float | None, expected: list[float]
) -> None:
    # A "Retry-After: 0" on a 429 must not turn the back-off into a hot loop (the docstring's
    # promise: the server's value wins when it is longer).
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=30.0, jitter=0.0)
    assert [policy.delay(retry, retry_after) for retry in (0, 1)] == expected


async def test_retry_after_beyond_the_limit_is_not_waited_for() -> None:
    script = Script([failing("rate_limited", retryable=True, retry_after=3600)], ["ok"])
    with pytest.raises(ProviderError):
        await run(script, RetryPolicy(max_retries=2, max_retry_after_s=60))
    assert script.sleeps == [] and script.opened == 1


async def test_failure_after_first_event_is_an_error_event_not_a_retry() -> None:
    script = Script(["partial", failing("connection_error", retryable=True)], ["dup"])
    events = await run(script, RetryPolicy(max_retries=5))
    assert isinstance(events[0], TextDeltaEvent) and events[0].text == "partial"
    assert isinstance(events[-1], ErrorEvent) and len(events) == 2
    assert events[-1].error.code == "connection_error" and events[-1].error.retryable
    assert script.opened == 1 and script.sleeps == []


async def test_closing_the_stream_closes_the_attempt() -> None:
    script = Script(["a", "b", "c"])
    stream = stream_with_retries(script.attempt, RetryPolicy(), sleep=script.sleep)
    assert isinstance(await anext(stream), TextDeltaEvent)
    await stream.aclose()  # type: ignore[attr-defined]
    assert script.closed == 1
