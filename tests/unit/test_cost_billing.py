"""The cost benchmark's bills (tests/benchmarks/billing.py; issue 15): the baselines' placements re-billed by the
emulator's CacheSim, prices, and what compression took out of the context."""

from __future__ import annotations

from typing import Any

from agentd.core.compaction import ACK_TEXT
from agentd.testing.emulator import count_tokens
from tests.benchmarks import billing
from tests.benchmarks.lower_bound import Split

SYSTEM = "S" * 6000  # 1,500+ tokens: cacheable on its own


def text(t: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": t, **extra}


def entry(at: float, messages: list[dict[str, Any]], *, compaction: bool = False) -> dict[str, Any]:
    body = {"model": "m", "max_tokens": 10, "system": [text(SYSTEM)], "messages": messages}
    return {"clock": at, "body": body, "compaction": compaction, "usage": {}}


def user(t: str) -> dict[str, Any]:
    return {"role": "user", "content": [text(t)]}


def assistant(t: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [text(t)]}


def tok(t: str) -> int:
    return count_tokens(text(t))


def test_the_seed_caching_and_the_system_plus_last_block_placements() -> None:
    q1, a1, q2 = "q1" * 2000, "a1" * 100, "q2" * 50
    journal = [entry(0, [user(q1)]), entry(30, [user(q1), assistant(a1), user(q2)])]
    s, t1, ta, t2 = tok(SYSTEM), tok(q1), tok(a1), tok(q2)
    assert billing.rebill(journal, "system", 1024) == Split(
        uncached=t1 + t1 + ta + t2, write_5m=s, write_1h=0, read=s
    )
    assert billing.rebill(journal, "system_last", 1024) == Split(
        uncached=0, write_5m=s + t1 + ta + t2, write_1h=0, read=s + t1
    )
    assert billing.rebill(journal, "none", 1024) == Split(uncached=2 * (s + t1) + ta + t2)


def test_usd_at_the_model_prices() -> None:
    split = Split(uncached=1_000_000, write_5m=1_000_000, write_1h=1_000_000, read=1_000_000)
    assert round(billing.usd(split, 1_000_000, "claude-sonnet-4-5"), 6) == round(
        3 * (1 + 1.25 + 2 + 0.1) + 15, 6
    )


def test_context_story_counts_what_compression_forgot() -> None:
    old = [user("u0" * 900), assistant("a0" * 700), user("u1" * 30)]
    summary = user("[Summary of earlier conversation]\nS")
    journal = [
        entry(0, old),
        entry(0, [user("Summarize")], compaction=True),
        entry(0, [summary, assistant(ACK_TEXT), old[2], assistant("a1"), user("u2")]),
    ]
    journal[-1]["usage"] = {
        "input_tokens": 10,
        "cache_creation_input_tokens": 20,
        "cache_read_input_tokens": 30,
        "output_tokens": 5,
    }
    forgotten = sum(billing.message_tokens(m) for m in old[:2]) - billing.message_tokens(summary)
    forgotten -= billing.message_tokens(assistant(ACK_TEXT))
    journal[0]["usage"] = {
        "input_tokens": 100,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    story = billing.context_story(journal)
    assert story == {
        "requests": 3,
        "compressions": 1,
        "mean_context_tokens": 80,  # (100 + 60) / 2: the compression request is not context the model saw
        "context_tokens_end": 65,
        "forgotten_tokens": forgotten,
    }
