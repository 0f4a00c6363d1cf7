"""Retry policies: classification, back-off sequences, validation."""

from __future__ import annotations

import math
import random

import pytest

from tablesdk._core._errors import (
    AuthenticationError,
    ConflictError,
    ConnectionFailedError,
    PreconditionFailedError,
    RequestTimeoutError,
    ResourceNotFoundError,
    ServerBusyError,
    TableServiceError,
    error_for_status,
)
from tablesdk._pipeline._retry import (
    ExponentialRetry,
    LinearRetry,
    NoRetry,
    RetryPolicy,
    is_retryable,
)

BUSY = ServerBusyError("busy", status_code=503, error_code="ServerBusy")
CONFLICT = ConflictError("exists", status_code=409, error_code="EntityAlreadyExists")


def expected_exponential(
    seed: int, attempts: int, delta: float, lo: float, hi: float
) -> list[float]:
    """The Storage Client Library's formula, computed independently with the same random stream."""
    rng = random.Random(seed)
    out = []
    for n in range(1, attempts + 1):
        jittered = rng.uniform(delta * 0.8, delta * 1.2)
        out.append(min(lo + (2 ** (n - 1) - 1) * jittered, hi))
    return out


# --------------------------------------------------------------- classification


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        (error_for_status(400, "InvalidInput", "bad"), False),
        (error_for_status(403, "AuthenticationFailed", "no"), False),
        (error_for_status(404, "ResourceNotFound", "gone"), False),
        (error_for_status(408, "RequestTimeout", "slow"), True),
        (error_for_status(409, "EntityAlreadyExists", "dup"), False),
        (error_for_status(412, "UpdateConditionNotSatisfied", "etag"), False),
        (error_for_status(500, "InternalError", "oops"), True),
        (error_for_status(501, "NotImplemented", "no"), False),
        (error_for_status(502, None, "bad gateway"), True),
        (error_for_status(503, "ServerBusy", "busy"), True),
        (error_for_status(504, "GatewayTimeout", "slow"), True),
        (error_for_status(505, None, "http version"), False),
        (RequestTimeoutError("client timeout"), True),
        (ConnectionFailedError("reset"), True),
        (TableServiceError("no status, not a transport failure"), False),
        (ValueError("bad input"), False),
        (KeyboardInterrupt(), False),
        (TimeoutError("builtin, not ours"), False),
    ],
    ids=lambda v: type(v).__name__ + (f"-{v.status_code}" if getattr(v, "status_code", None) else "")
    if isinstance(v, BaseException)
    else str(v),
)
def test_classification(error: BaseException, retryable: bool) -> None:
    assert is_retryable(error) is retryable


def test_error_for_status_gives_expected_subclasses() -> None:
    # Sanity for the table above: the statuses map to the subclasses the policies see.
    assert isinstance(error_for_status(403, None, "x"), AuthenticationError)
    assert isinstance(error_for_status(404, None, "x"), ResourceNotFoundError)
    assert isinstance(error_for_status(412, None, "x"), PreconditionFailedError)
    assert isinstance(error_for_status(504, None, "x"), RequestTimeoutError)


@pytest.mark.parametrize(
    "policy",
    [LinearRetry(5, 1.0), ExponentialRetry(5, random=random.Random(1))],
    ids=repr,
)
@pytest.mark.parametrize("error", [CONFLICT, ValueError("x"), error_for_status(501, None, "x")])
def test_policies_do_not_retry_final_errors(policy: RetryPolicy, error: BaseException) -> None:
    assert policy.retry_after(1, error) is None


# --------------------------------------------------------------------- NoRetry


def test_no_retry() -> None:
    policy = NoRetry()
    assert policy.retry_after(1, BUSY) is None
    assert policy.retry_after(1, RequestTimeoutError("t")) is None
    assert repr(policy) == "NoRetry()"
    assert policy == NoRetry()
    assert isinstance(policy, RetryPolicy)


# ----------------------------------------------------------------- LinearRetry


def test_linear_defaults_match_the_storage_client_library() -> None:
    policy = LinearRetry()
    assert (policy.count, policy.interval_seconds) == (3, 30.0)
    assert [policy.retry_after(n, BUSY) for n in range(1, 5)] == [30.0, 30.0, 30.0, None]


def test_linear_sequence() -> None:
    policy = LinearRetry(count=2, interval_seconds=1.5)
    assert [policy.retry_after(n, BUSY) for n in (1, 2, 3, 4)] == [1.5, 1.5, None, None]
    assert repr(policy) == "LinearRetry(count=2, interval_seconds=1.5)"
    assert policy == LinearRetry(2, 1.5)
    assert policy != LinearRetry(2, 2.0)
    assert hash(policy) == hash(LinearRetry(2, 1.5))
    assert isinstance(policy, RetryPolicy)


def test_linear_zero_count_never_retries() -> None:
    assert LinearRetry(0, 1.0).retry_after(1, BUSY) is None


def test_linear_is_stateless_and_shareable() -> None:
    policy = LinearRetry(2, 1.0)
    # Two operations interleaved: each sees only its own attempt number.
    assert policy.retry_after(1, BUSY) == 1.0
    assert policy.retry_after(1, BUSY) == 1.0
    assert policy.retry_after(2, BUSY) == 1.0
    assert policy.retry_after(3, BUSY) is None
    assert policy.retry_after(1, BUSY) == 1.0


# ------------------------------------------------------------ ExponentialRetry


def test_exponential_defaults_match_the_storage_client_library() -> None:
    policy = ExponentialRetry()
    assert (policy.count, policy.delta_seconds, policy.min_backoff, policy.max_backoff) == (
        3, 30.0, 3.0, 90.0,
    )
    assert repr(policy) == (
        "ExponentialRetry(count=3, delta_seconds=30.0, min_backoff=3.0, max_backoff=90.0)"
    )


@pytest.mark.parametrize("seed", [0, 1, 42, 2024])
def test_exponential_exact_sequence_defaults(seed: int) -> None:
    policy = ExponentialRetry(random=random.Random(seed))
    got = [policy.retry_after(n, BUSY) for n in (1, 2, 3)]
    assert got == pytest.approx(expected_exponential(seed, 3, 30.0, 3.0, 90.0), abs=1e-12)
    assert policy.retry_after(4, BUSY) is None
    # The retry article's description: ~3 s, then ~33 s (27..39), then capped at 90.
    assert got[0] == 3.0
    assert 3.0 + 24.0 <= got[1] <= 3.0 + 36.0
    assert 75.0 <= got[2] <= 90.0


def test_exponential_exact_sequence_custom() -> None:
    policy = ExponentialRetry(count=6, delta_seconds=2.0, min_backoff=0.5, max_backoff=20.0,
                              random=random.Random(7))
    got = [policy.retry_after(n, BUSY) for n in range(1, 8)]
    assert got[:6] == pytest.approx(expected_exponential(7, 6, 2.0, 0.5, 20.0), abs=1e-12)
    assert got[6] is None
    # Hand-checked shape: min first, then (2^(n-1) - 1) * jittered delta on top, capped.
    assert got[0] == 0.5
    assert got[5] == 20.0  # 0.5 + 31 * >=1.6 > 20


def test_exponential_jitter_stays_within_twenty_percent() -> None:
    delta, lo = 10.0, 1.0
    policy = ExponentialRetry(count=4, delta_seconds=delta, min_backoff=lo, max_backoff=1e9,
                              random=random.Random(3))
    seen: list[float] = []
    for _ in range(2000):
        for n in (2, 3, 4):
            delay = policy.retry_after(n, BUSY)
            assert delay is not None
            jitter = (delay - lo) / (2 ** (n - 1) - 1)
            assert delta * 0.8 - 1e-9 <= jitter <= delta * 1.2 + 1e-9
            seen.append(jitter)
    # The jitter really is spread over the whole +/-20% band, not a constant.
    assert min(seen) < delta * 0.82 and max(seen) > delta * 1.18


def test_exponential_bounds() -> None:
    policy = ExponentialRetry(count=50, delta_seconds=30.0, min_backoff=3.0, max_backoff=90.0,
                              random=random.Random(5))
    delays = [policy.retry_after(n, BUSY) for n in range(1, 51)]
    assert all(d is not None and 3.0 <= d <= 90.0 for d in delays)
    assert delays[0] == 3.0
    assert delays[-1] == 90.0
    assert delays == sorted(delays)  # never shrinks (the jitter band never overlaps downwards)


def test_exponential_huge_attempt_does_not_overflow() -> None:
    policy = ExponentialRetry(count=10_000, random=random.Random(0))
    assert policy.retry_after(5000, BUSY) == 90.0
    zero = ExponentialRetry(count=10_000, delta_seconds=0.0, min_backoff=2.0, max_backoff=5.0)
    assert zero.retry_after(5000, BUSY) == 2.0


def test_exponential_one_draw_per_retry() -> None:
    rng = random.Random(11)
    policy = ExponentialRetry(count=2, random=rng)
    policy.retry_after(1, BUSY)
    policy.retry_after(2, BUSY)
    policy.retry_after(3, BUSY)  # stops: no draw
    policy.retry_after(1, CONFLICT)  # final error: no draw
    check = random.Random(11)
    check.random()
    check.random()
    assert rng.random() == check.random()


def test_exponential_equality_ignores_random() -> None:
    a = ExponentialRetry(3, 4.0, random=random.Random(1))
    assert a == ExponentialRetry(3, 4.0)
    assert hash(a) == hash(ExponentialRetry(3, 4.0))
    assert a != ExponentialRetry(3, 5.0)
    assert a != LinearRetry(3, 4.0)


def test_exponential_without_injected_random_is_in_band() -> None:
    policy = ExponentialRetry(count=3, delta_seconds=10.0, min_backoff=1.0, max_backoff=100.0)
    delay = policy.retry_after(2, BUSY)
    assert delay is not None and 9.0 <= delay <= 13.0


# ------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("factory", "name"),
    [
        (lambda: LinearRetry(count=-1), "count"),
        (lambda: LinearRetry(count=1.5), "count"),  # type: ignore[arg-type]
        (lambda: LinearRetry(count=True), "count"),
        (lambda: LinearRetry(interval_seconds=-0.1), "interval_seconds"),
        (lambda: LinearRetry(interval_seconds=math.nan), "interval_seconds"),
        (lambda: LinearRetry(interval_seconds="3"), "interval_seconds"),  # type: ignore[arg-type]
        (lambda: ExponentialRetry(count=-2), "count"),
        (lambda: ExponentialRetry(delta_seconds=-1.0), "delta_seconds"),
        (lambda: ExponentialRetry(min_backoff=-1.0), "min_backoff"),
        (lambda: ExponentialRetry(max_backoff=math.inf), "max_backoff"),
        (lambda: ExponentialRetry(min_backoff=10.0, max_backoff=5.0), "max_backoff"),
        (lambda: ExponentialRetry(random=42), "random"),  # type: ignore[arg-type]
    ],
)
def test_invalid_arguments_name_the_argument(factory: object, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        factory()  # type: ignore[operator]


@pytest.mark.parametrize("policy", [NoRetry(), LinearRetry(), ExponentialRetry()], ids=repr)
@pytest.mark.parametrize("attempt", [0, -1])
def test_attempt_must_be_positive(policy: RetryPolicy, attempt: int) -> None:
    with pytest.raises(ValueError, match="attempt"):
        policy.retry_after(attempt, BUSY)
