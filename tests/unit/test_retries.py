"""agentd's retry loop on the injectable clock (CONTRACTS.md §6: retries; no real waiting)."""

from __future__ import annotations

import pytest

from agentd.clock import ManualClock
from agentd.errors import ProviderError
from agentd.providers.base import ModelResponse, Usage, run_with_retries

OK = ModelResponse(
    id="msg_1", content=[{"type": "text", "text": "hi"}], stop_reason="end_turn", usage=Usage(1, 1, 0, 0)
)


def overloaded(retry_after: float | None = None, status: int = 529) -> ProviderError:
    return ProviderError(
        "overloaded",
        provider="anthropic",
        reason="unavailable",
        http_status=status,
        retryable=True,
        retry_after_s=retry_after,
    )


class Attempts:
    """`attempt(n)` double: raises the queued errors in order, then returns OK; records (n, clock time)."""

    def __init__(self, clock: ManualClock, errors: list[ProviderError]) -> None:
        self.clock = clock
        self.errors = list(errors)
        self.calls: list[tuple[int, float]] = []

    async def __call__(self, n: int) -> ModelResponse:
        self.calls.append((n, self.clock.now()))
        if self.errors:
            raise self.errors.pop(0)
        return OK


async def test_success_needs_no_retry() -> None:
    clock = ManualClock()
    attempts = Attempts(clock, [])
    assert await run_with_retries(attempts, clock=clock, max_total_s=60) is OK
    assert (attempts.calls, clock.sleeps) == ([(1, 0.0)], [])


async def test_retry_after_is_honoured() -> None:
    clock = ManualClock(start=100.0)
    attempts = Attempts(
        clock, [overloaded(retry_after=7.5, status=429), overloaded(retry_after=0.0, status=429)]
    )
    retries: list[tuple[int, float, int | None]] = []
    response = await run_with_retries(
        attempts, clock=clock, max_total_s=60, on_retry=lambda n, d, e: retries.append((n, d, e.http_status))
    )
    assert response is OK
    assert clock.sleeps == [7.5, 0.0]
    assert attempts.calls == [(1, 100.0), (2, 107.5), (3, 107.5)]
    assert retries == [(1, 7.5, 429), (2, 0.0, 429)]


async def test_exponential_backoff_without_retry_after() -> None:
    clock = ManualClock()
    attempts = Attempts(clock, [overloaded(status=s) for s in (529, 500, 503, 529, 502, 529)])
    assert await run_with_retries(attempts, clock=clock, max_total_s=60) is OK
    assert clock.sleeps == [1.0, 2.0, 4.0, 8.0, 16.0, 16.0]
    assert [n for n, _ in attempts.calls] == [1, 2, 3, 4, 5, 6, 7]


async def test_gives_up_after_max_total_s_with_reason_unavailable() -> None:
    clock = ManualClock()
    attempts = Attempts(clock, [overloaded() for _ in range(10)])
    with pytest.raises(ProviderError) as info:
        await run_with_retries(attempts, clock=clock, max_total_s=10)
    err = info.value
    # t=0 fail, wait 1; t=1 fail, wait 2; t=3 fail, wait 4; t=7 fail: 7 + 8 > 10, give up.
    assert clock.sleeps == [1.0, 2.0, 4.0]
    assert attempts.calls == [(1, 0.0), (2, 1.0), (3, 3.0), (4, 7.0)]
    assert (err.message, err.reason, err.retryable, err.http_status, err.provider) == (
        "overloaded (gave up after 4 attempts, 7 s of retries within retries.max_total_s=10 s)",
        "unavailable",
        False,
        529,
        "anthropic",
    )
    assert isinstance(err.__cause__, ProviderError)


async def test_a_retry_after_beyond_the_budget_gives_up_at_once() -> None:
    clock = ManualClock()
    attempts = Attempts(clock, [overloaded(retry_after=61.0, status=429)])
    with pytest.raises(ProviderError) as info:
        await run_with_retries(attempts, clock=clock, max_total_s=60)
    assert (info.value.reason, clock.sleeps, len(attempts.calls)) == ("unavailable", [], 1)


async def test_non_retryable_error_is_raised_at_once() -> None:
    clock = ManualClock()
    bad = ProviderError("bad request", provider="anthropic", reason="bad_request", http_status=400)
    attempts = Attempts(clock, [bad])
    retries: list[int] = []
    with pytest.raises(ProviderError) as info:
        await run_with_retries(
            attempts, clock=clock, max_total_s=60, on_retry=lambda n, d, e: retries.append(n)
        )
    assert info.value is bad
    assert (clock.sleeps, attempts.calls, retries) == ([], [(1, 0.0)], [])


async def test_other_exceptions_are_not_retried() -> None:
    clock = ManualClock()

    async def attempt(n: int) -> ModelResponse:
        raise ValueError(f"boom {n}")

    with pytest.raises(ValueError) as info:
        await run_with_retries(attempt, clock=clock, max_total_s=60)
    assert (str(info.value), clock.sleeps) == ("boom 1", [])


async def test_a_clock_jump_inside_the_first_attempt_is_not_retry_time() -> None:
    """Issue 16 (laptop sleep): the machine sleeps 2 h while the first attempt waits; the attempt fails on
    wake and is retried, since retry time counts from the first failure."""
    clock = ManualClock()

    async def attempt(n: int) -> ModelResponse:
        if n == 1:
            clock.advance(7200.0)
            raise overloaded()
        return OK

    assert await run_with_retries(attempt, clock=clock, max_total_s=60) is OK
    assert clock.sleeps == [1.0]


async def test_the_retry_time_is_bounded_even_when_attempts_take_long() -> None:
    """Issue 16: attempts that each fail after 20 s count towards the budget: 3 attempts fit in 60 s."""
    clock = ManualClock()

    async def attempt(n: int) -> ModelResponse:
        clock.advance(20.0)
        raise overloaded()

    with pytest.raises(ProviderError) as info:
        await run_with_retries(attempt, clock=clock, max_total_s=60)
    # fail at 20 (first failure), wait 1; fail at 41 (21 s), wait 2; fail at 63 (43 s): 43 + 4 <= 60, wait 4;
    # fail at 87 (67 s): past the budget
    assert clock.sleeps == [1.0, 2.0, 4.0]
    assert (
        info.value.message
        == "overloaded (gave up after 4 attempts, 67 s of retries within retries.max_total_s=60 s)"
    )
