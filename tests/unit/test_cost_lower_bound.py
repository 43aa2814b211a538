"""The cost benchmark's true lower bound (tests/benchmarks/lower_bound.py; issue 15): small cases worked by hand,
and, on random sessions, never above what the emulator billed any placement of breakpoints."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentd.testing.emulator import CacheSim, count_tokens
from tests.benchmarks.lower_bound import NONE, READABLE, WRITE, Split, group_cost, lower_bound


def cost(*uses: float | tuple[float, int]) -> float:
    """The bound of one token used at these times (READABLE unless given as `(time, NONE | WRITE)`)."""
    seq = [u if isinstance(u, tuple) else (u, READABLE) for u in uses]
    return round(group_cost(seq)[0], 6)


def test_a_token_used_once_is_sent_uncached() -> None:
    assert cost(0) == 1.0


def test_a_reuse_within_5_minutes_is_a_5m_write_then_a_read() -> None:
    assert cost(0, 10) == 1.35  # 1.25 + 0.1
    assert group_cost([(0, READABLE), (10, READABLE)])[1] == Split(write_5m=1, read=1)


def test_one_reuse_after_6_minutes_is_cheaper_uncached_twice() -> None:
    # 1h write then read: 2.0 + 0.1 = 2.1 > 1.0 + 1.0
    assert cost(0, 360) == 2.0


def test_two_reuses_after_6_minutes_each_pay_a_1h_write() -> None:
    # 2.0 + 0.1 + 0.1 = 2.2 < 3 x 1.0 and < 1.25 + 1.0 + 1.0
    assert cost(0, 360, 720) == 2.2


def test_a_read_keeps_the_token_for_an_hour() -> None:
    # written 5m at 0, read at 10 (and kept an hour), read at 1,000 s
    assert cost(0, 10, 1000) == 1.45  # 1.25 + 0.1 + 0.1


def test_the_lifetime_is_strict_and_counts_from_the_last_use() -> None:
    assert cost(0, 300) == 2.0  # dead at exactly 300 s: uncached twice beats 2.0 + 0.1
    assert cost(0, 299, 3898) == 1.45  # 1.25 + 0.1 + 0.1: the read at 299 s refreshed it until 3,899 s
    assert cost(0, 4000) == 2.0  # over an hour: nothing survives


def test_a_request_below_the_minimum_pays_full_and_refreshes_nothing() -> None:
    assert cost(0, (100, NONE), 200) == 2.35  # 1.25 + 1.0 + 0.1
    assert cost(0, (250, NONE), 400) == 1.0 + 1.0 + 1.0  # the use at 250 s did not refresh the 5m write


def test_a_use_that_cannot_read_pays_and_keeps_the_lifetime() -> None:
    # at 100 s the token is cached (elsewhere) but this request cannot read it: it pays 1x, the entry lives on
    assert cost(0, (100, WRITE), 200) == 2.35  # 1.25 + 1.0 + 0.1
    assert cost((0, WRITE), (10, WRITE)) == 2.0  # never readable: a write would be wasted


def body(system: str, *texts: str) -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": 10,
        "system": [{"type": "text", "text": system}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": t}]} for t in texts[:1]]
        + [
            {"role": role, "content": [{"type": "text", "text": t}]}
            for role, t in zip(["assistant", "user"] * len(texts), texts[1:], strict=False)
        ],
    }


def tokens(text: str) -> int:
    return count_tokens({"type": "text", "text": text})


def test_a_growing_chain_worked_by_hand() -> None:
    """Four requests at 0 s, 10 s, 1,210 s (after a 20-minute pause) and 1,220 s:
    - S + u1 (in all four): 5m write at 0 s, then reads (the read at 10 s keeps it for an hour);
    - a1 + u2 (from 10 s; next use 20 minutes later, then 10 s later): 1h write, two reads
      (2.2, against 1.0 + 1.25 + 0.1 = 2.35 for sending it again after the pause);
    - a2 + u3 (1,210 s and 1,220 s): 5m write and a read; a3 + u4 (last request only): uncached."""
    s, u1, a1, u2, a2, u3, a3, u4 = (
        "S" * 8000,
        "u1" * 900,
        "a1" * 300,
        "u2" * 700,
        "a2" * 200,
        "u3" * 100,
        "a3",
        "u4",
    )
    requests = [
        (0.0, body(s, u1)),
        (10.0, body(s, u1, a1, u2)),
        (1210.0, body(s, u1, a1, u2, a2, u3)),
        (1220.0, body(s, u1, a1, u2, a2, u3, a3, u4)),
    ]
    ts, t1, ta1, t2, ta2, t3, ta3, t4 = map(tokens, (s, u1, a1, u2, a2, u3, a3, u4))
    expected = Split(
        uncached=ta3 + t4,
        write_5m=ts + t1 + ta2 + t3,
        write_1h=ta1 + t2,
        read=3 * (ts + t1) + 2 * (ta1 + t2) + (ta2 + t3),
    )
    assert lower_bound(requests, min_cacheable=1024) == expected
    everything_uncached = 4 * (ts + t1) + 3 * (ta1 + t2) + 2 * (ta2 + t3) + ta3 + t4
    assert lower_bound(requests, min_cacheable=10**6) == Split(uncached=everything_uncached)


def test_a_branch_below_the_minimum_reads_nothing() -> None:
    """R1 = S + a and R2 = S + b at 10 s share only S, 2,000 tokens, below the 4,096 minimum: R2 can read
    nothing (a read entry is a prefix of R2 written by R1, at least 4,096 long), so S is sent twice.
    R3 = R1 + c at 20 s shares S + a (over the minimum): S and a are read there, written 5m by R1."""
    s, a, b, c = "S" * 8000, "a" * 12000, "b" * 12000, "c" * 400
    requests = [(0.0, body(s, a)), (10.0, body(s, b)), (20.0, body(s, a, c))]
    ts, ta, tb, tc = map(tokens, (s, a, b, c))
    assert ts < 4096 <= ts + ta
    # S: 5m write at 0 s, 1x at 10 s (it cannot be read there, and stays cached), read at 20 s
    expected = Split(uncached=ts + tb + tc, write_5m=ts + ta, read=ts + ta)
    assert lower_bound(requests, min_cacheable=4096) == expected


# ---- validity: no placement billed by the emulator goes below the bound -------------------------------------
@st.composite
def sessions(draw: st.DrawFn) -> tuple[list[tuple[float, dict[str, Any]]], int]:
    """A growing chain (sometimes cut back to a summary, as compression does) with random gaps, and random
    breakpoints with random TTLs (1h ones first, at most 4)."""
    system = "S" * draw(st.integers(min_value=1000, max_value=9000))
    history = [f"m{k}" * draw(st.integers(min_value=50, max_value=1500)) for k in range(1)]
    requests, now = [], 0.0
    for n in range(draw(st.integers(min_value=1, max_value=10))):
        now += draw(st.sampled_from([1.0, 30.0, 200.0, 299.0, 301.0, 1200.0, 3599.0, 3601.0, 7200.0]))
        if draw(st.integers(min_value=0, max_value=5)) == 0 and len(history) > 3:
            history = [f"summary {n}", *history[-2:]]  # compression: a new branch after the system
        b = body(system, *history)
        blocks = [b["system"][0]] + [m["content"][0] for m in b["messages"]]
        marked = sorted(draw(st.sets(st.integers(0, len(blocks) - 1), min_size=0, max_size=4)))
        n_1h = draw(st.integers(min_value=0, max_value=len(marked)))
        for k, idx in enumerate(marked):
            blocks[idx]["cache_control"] = {"type": "ephemeral", "ttl": "1h" if k < n_1h else "5m"}
        requests.append((now, b))
        history = [*history, f"r{n}" * draw(st.integers(min_value=1, max_value=900))]
        history.append(f"q{n}" * draw(st.integers(min_value=1, max_value=900)))
    return requests, draw(st.sampled_from([1024, 4096]))


@settings(derandomize=True, max_examples=100, deadline=None)
@given(sessions())
def test_no_placement_the_emulator_bills_is_below_the_bound(case: tuple[list[Any], int]) -> None:
    requests, minimum = case
    sim, billed = CacheSim(), Split()
    for at, b in requests:
        u = sim.run(b, now=at, min_cacheable_tokens=minimum).usage
        split = u["cache_creation"]
        billed = billed + Split(
            u["input_tokens"],
            split["ephemeral_5m_input_tokens"],
            split["ephemeral_1h_input_tokens"],
            u["cache_read_input_tokens"],
        )
    assert lower_bound(requests, minimum).equivalents <= billed.equivalents + 1e-6
