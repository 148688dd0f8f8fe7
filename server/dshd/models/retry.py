"""Retries, done here and not by the SDKs (which run with ``max_retries=0``).

What is retried: connection errors, timeouts, 408, 429 and 5xx (``ModelError.retryable``),
at most ``maxRetries`` times (so ``maxRetries + 1`` attempts). Never 400, 401, 403, 404,
and never once the call has yielded any event: output that reached the log or an editor
is not sent twice. The wait is the provider's ``Retry-After`` when it sent one (up to
:attr:`RetryPolicy.max_retry_after_s`; a longer one is not waited for), else capped
exponential backoff with jitter. Before each wait a :class:`Retrying` event goes out
(the loop turns it into a ``retry`` delta).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable

import attrs

from dshd.models.interface import ModelError, ModelEvent, Retrying


@attrs.frozen
class RetryPolicy:
    max_retries: int
    base_s: float = 0.5
    cap_s: float = 8.0
    max_retry_after_s: float = 60.0

    def delay(self, failed_attempt: int, error: ModelError, rand: Callable[[], float] = random.random) -> float | None:
        """Seconds to wait after attempt ``failed_attempt`` (1-based) failed with
        ``error``; None: do not retry."""
        if not error.retryable or failed_attempt > self.max_retries:
            return None
        if error.retry_after is not None:
            return error.retry_after if error.retry_after <= self.max_retry_after_s else None
        backoff = min(self.cap_s, self.base_s * 2 ** (failed_attempt - 1))
        return backoff * (0.5 + rand() / 2)  # "equal jitter": never less than half the backoff


async def retrying(
    attempt: Callable[[], AsyncIterator[ModelEvent]],
    policy: RetryPolicy,
    sleep: Callable[[float], object] = asyncio.sleep,
) -> AsyncIterator[ModelEvent]:
    """The events of ``attempt()``, tried again while the policy allows and nothing of
    that attempt went out yet."""
    number = 1
    while True:
        started = False
        failure: ModelError | None = None
        wait: float | None = None
        stream = attempt()
        try:
            async for event in stream:
                started = True
                yield event
            return
        except ModelError as error:
            wait = None if started else policy.delay(number, error)
            if wait is None:
                raise
            failure = error
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        number += 1
        assert failure is not None and wait is not None
        yield Retrying(number, round(wait * 1000), failure)
        await sleep(wait)  # type: ignore[misc]
