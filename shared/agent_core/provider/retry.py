"""Retries before the first event, and the error-event rule after it.

A response is retried only while nothing of it has reached the caller: once an event was
yielded, a new request would deliver the same text twice, so a later failure becomes the
stream's final :class:`~agent_core.types.protocol.ErrorEvent` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from agent_core.errors import ProviderError
from agent_core.provider.base import ProviderSettings
from agent_core.types.protocol import ErrorEvent, ModelEvent

__all__ = ["RetryPolicy", "stream_with_retries"]


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter; a server's Retry-After wins when it is longer.

    A Retry-After shorter than the back-off (``0`` is common on 429s) does not shorten the wait:
    clients that failed together would retry together. One longer than ``max_retry_after_s`` is
    not waited for at all: the error is raised instead.
    """

    max_retries: int = 2
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    max_retry_after_s: float = 60.0
    jitter: float = 0.25

    @classmethod
    def from_settings(cls, settings: ProviderSettings) -> RetryPolicy:
        """The policy a provider's settings describe."""
        return cls(
            max_retries=settings.max_retries,
            base_delay_s=settings.retry_base_delay_s,
            max_delay_s=settings.retry_max_delay_s,
            max_retry_after_s=settings.max_retry_after_s,
        )

    def delay(self, retry: int, retry_after_s: float | None) -> float | None:
        """Seconds to wait before retry number ``retry`` (0-based); ``None`` = do not retry."""
        backoff = min(self.base_delay_s * (2.0**retry), self.max_delay_s)
        # Full jitter on a quarter of the delay spreads clients that failed together.
        backoff *= 1.0 - self.jitter * random.random()
        if retry_after_s is None:
            return backoff
        if retry_after_s > self.max_retry_after_s:
            return None
        return max(retry_after_s, backoff)


async def stream_with_retries(
    attempt: Callable[[], AsyncGenerator[ModelEvent, None]],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> AsyncIterator[ModelEvent]:
    """Run ``attempt`` until it yields an event, retrying retryable errors raised before that.

    ``attempt`` raises :class:`ProviderError` for every failure. Before the first event a
    retryable one is retried (up to ``policy.max_retries`` times); otherwise it propagates.
    After the first event any failure is yielded as a final ``ErrorEvent`` and the stream ends.
    """
    retry = 0
    while True:
        events = attempt()
        emitted = False
        failure: ProviderError | None = None
        try:
            async for event in events:
                emitted = True
                yield event
            return
        except ProviderError as err:
            failure = err
        finally:
            # Close the attempt now (not at garbage collection) so its HTTP stream is released.
            with contextlib.suppress(Exception):
                await events.aclose()
        if emitted:
            yield ErrorEvent(error=failure.to_payload())
            return
        wait = policy.delay(retry, failure.retry_after_s) if failure.retryable else None
        if wait is None or retry >= policy.max_retries:
            raise failure
        retry += 1
        await sleep(wait)
