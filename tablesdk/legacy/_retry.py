"""The old package's retry policies, as tablesdk retry policies.

``service.retry = ExponentialRetry(max_attempts=5).retry`` (or ``LinearRetry(...).retry``, or
``no_retry``) worked with the old package; it works here by giving the service's tablesdk
client a policy with the same schedule and the same rules: a failure without an answer, 408
and 5xx (but 501 and 505) are retried, other statuses are not, and ``max_attempts`` counts
the retries after the first attempt.
"""

from __future__ import annotations

import random
from typing import Any

from .. import TableServiceError


class _Retry:
    """The rules shared by the old policies; ``retry`` is what a :class:`TableService` is given."""

    def __init__(self, max_attempts: int, retry_to_secondary: bool, random_jitter_range: float) -> None:
        self.max_attempts = max_attempts
        self.retry_to_secondary = retry_to_secondary
        self.random_jitter_range = random_jitter_range
        self._random = random.Random()

    def retry(self, context: Any) -> float | None:
        """The old entry point; assign it to ``TableService.retry`` (the service never calls it)."""
        raise TypeError("assign this method to TableService.retry; it is not called with a request context")

    def _backoff(self, retries: int) -> float:
        raise NotImplementedError

    def _jittered(self, backoff: float) -> float:
        start = backoff - self.random_jitter_range if backoff > self.random_jitter_range else 0
        return self._random.uniform(start, backoff + self.random_jitter_range)

    def retry_after(self, attempt: int, error: BaseException) -> float | None:
        """tablesdk's :class:`~tablesdk.RetryPolicy`: the wait before the next attempt, or None to stop."""
        retries = attempt - 1
        if retries >= self.max_attempts or not isinstance(error, TableServiceError):
            return None
        status = error.status_code
        if status is not None and 300 <= status < 500 and status != 408:
            return None
        if status in (501, 505):
            return None
        return self._jittered(self._backoff(retries))


class ExponentialRetry(_Retry):
    """Waits ``initial_backoff``, then ``initial_backoff + increment_base ** n`` seconds (15, 18, 24 by
    default), each within ``random_jitter_range``; up to ``max_attempts`` retries.

    ``retry_to_secondary`` is kept but not used: reads go where the client's ``location_mode``
    sends them (``TableService(..., location_mode="primary_then_secondary")``).
    """

    def __init__(
        self, initial_backoff: float = 15, increment_base: float = 3, max_attempts: int = 3,
        retry_to_secondary: bool = False, random_jitter_range: float = 3,
    ) -> None:
        super().__init__(max_attempts, retry_to_secondary, random_jitter_range)
        self.initial_backoff = initial_backoff
        self.increment_base = increment_base

    def _backoff(self, retries: int) -> float:
        return float(self.initial_backoff + (0 if retries == 0 else self.increment_base ** retries))


class LinearRetry(_Retry):
    """Waits ``backoff`` seconds (within ``random_jitter_range``) between attempts; up to ``max_attempts`` retries."""

    def __init__(
        self, backoff: float = 15, max_attempts: int = 3, retry_to_secondary: bool = False,
        random_jitter_range: float = 3,
    ) -> None:
        super().__init__(max_attempts, retry_to_secondary, random_jitter_range)
        self.backoff = backoff

    def _backoff(self, retries: int) -> float:
        return float(self.backoff)


def no_retry(context: Any) -> None:
    """Assign to ``TableService.retry`` to send each request once."""
    return None
