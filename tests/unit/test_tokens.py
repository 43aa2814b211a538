"""Token accounting: billing, totals, the accounting line and the estimator (CONTRACTS.md §6; case C12)."""

from __future__ import annotations

from typing import Any

import pytest

from agentd.core.tokens import (
    DEFAULT_PRICE,
    PRICES,
    Estimator,
    TokenTotals,
    bill_tokens,
    cost_usd,
    estimate_messages,
    estimate_request,
    estimate_tokens,
    price_known,
    price_of,
)
from agentd.providers.base import Usage
from agentd.testing.emulator.tokens import block_tokens, count_tokens

C12 = Usage(input_tokens=3, output_tokens=550, cache_creation_input_tokens=12304, cache_read_input_tokens=0)


def test_c12_prompt_size_is_the_three_input_fields() -> None:
    assert C12.prompt_tokens == 12307
    assert C12.context_tokens == 12857


def test_bill_tokens_c12_write_at_the_5m_rate() -> None:
    assert bill_tokens(C12) == 3 + 12304 * 1.25


def test_bill_tokens_1h_split_priced_x2() -> None:
    usage = Usage(3, 550, 12304, 0, cache_creation_1h=12000, cache_creation_5m=304)
    assert bill_tokens(usage) == 3 + 12000 * 2.0 + 304 * 1.25


def test_bill_tokens_with_one_half_of_the_split_reported() -> None:
    only_5m = Usage(3, 550, 12304, 0, cache_creation_1h=None, cache_creation_5m=304)
    only_1h = Usage(3, 550, 12304, 0, cache_creation_1h=12000, cache_creation_5m=None)
    assert bill_tokens(only_5m) == 3 + 12000 * 2.0 + 304 * 1.25
    assert bill_tokens(only_1h) == 3 + 12000 * 2.0 + 304 * 1.25


def test_bill_tokens_read_at_a_tenth_and_unknowns_as_nothing() -> None:
    assert bill_tokens(Usage(3, 20, 0, 12000)) == 3 + 1200.0
    assert bill_tokens(Usage(None, None, None, None)) == 0.0


def test_cost_counts_each_part_once_c12() -> None:
    assert cost_usd(C12, "claude-sonnet-4-5") == pytest.approx((15383.0 * 3.0 + 550 * 15.0) / 1_000_000)
    assert cost_usd(C12, "emu-sonnet") == 0.0
    assert cost_usd(C12, "scripted") == 0.0
    assert cost_usd(C12, "some-unknown-model") == cost_usd(C12, "claude-sonnet-4-6")


def test_token_totals_sum_known_values() -> None:
    totals = TokenTotals()
    totals.add(C12, "emu-x")
    totals.add(
        Usage(
            input_tokens=5, output_tokens=40, cache_creation_input_tokens=100, cache_read_input_tokens=12304
        ),
        "emu-x",
    )
    assert totals == TokenTotals(
        requests=2,
        input_tokens=8,
        output_tokens=590,
        cache_creation_input_tokens=12404,
        cache_read_input_tokens=12304,
        cache_read_known=True,
        cost_usd=0.0,
    )
    assert totals.to_json() == {
        "requests": 2,
        "inputTokens": 8,
        "outputTokens": 590,
        "cacheCreationInputTokens": 12404,
        "cacheReadInputTokens": 12304,
        "cacheReadKnown": True,
        "costUsd": 0.0,
    }


def test_token_totals_unknown_read_is_not_zero() -> None:
    totals = TokenTotals()
    totals.add(
        Usage(
            input_tokens=100, output_tokens=7, cache_creation_input_tokens=None, cache_read_input_tokens=None
        )
    )
    totals.add(
        Usage(input_tokens=50, output_tokens=3, cache_creation_input_tokens=None, cache_read_input_tokens=30)
    )
    assert totals.to_json() | {"costUsd": 0} == {
        "requests": 2,
        "inputTokens": 150,
        "outputTokens": 10,
        "cacheCreationInputTokens": 0,
        "cacheReadInputTokens": 30,
        "cacheReadKnown": False,
        "costUsd": 0,
    }
    assert TokenTotals.from_json(totals.to_json()) == TokenTotals(
        requests=2,
        input_tokens=150,
        output_tokens=10,
        cache_creation_input_tokens=0,
        cache_read_input_tokens=30,
        cache_read_known=False,
        cost_usd=round(totals.cost_usd, 6),
    )


def test_accounting_line_exact_text() -> None:
    assert C12.accounting_line() == "[turn · in=3 out=550 cache_read=0 cache_write=12304]"
    unknown = Usage(
        input_tokens=120, output_tokens=8, cache_creation_input_tokens=None, cache_read_input_tokens=None
    )
    assert unknown.accounting_line() == "[turn · in=120 out=8 cache_read=?]"


def test_usage_json_keeps_unknown_as_null() -> None:
    assert Usage(5, 2, None, None).to_json() == {
        "inputTokens": 5,
        "outputTokens": 2,
        "cacheCreationInputTokens": None,
        "cacheReadInputTokens": None,
    }


def test_estimate_tokens_ignores_cache_control() -> None:
    block: dict[str, Any] = {"type": "text", "text": "abcd" * 10}  # canonical JSON: 65 bytes
    assert estimate_tokens(block) == 17
    assert estimate_tokens({**block, "cache_control": {"type": "ephemeral", "ttl": "1h"}}) == 17
    assert estimate_tokens({}) == 1
    assert estimate_messages([{"role": "user", "content": "abcd" * 10}]) == 17


def test_estimator_calibrates_and_clamps() -> None:
    est = Estimator()
    msgs = [{"role": "user", "content": [{"type": "text", "text": "abcd" * 10}]}]
    assert est.messages(msgs) == 17
    est.calibrate(100, 150)
    assert (est.factor, est.messages(msgs)) == (1.5, 26)
    est.calibrate(100, 10_000)
    assert est.factor == 4.0
    est.calibrate(100, 1)
    assert est.factor == 0.25
    est.calibrate(0, 50)  # nothing to learn from
    est.calibrate(50, 0)
    assert est.factor == 0.25


def test_uncalibrated_estimate_matches_the_emulator_counter() -> None:
    tool_result = {"type": "tool_result", "tool_use_id": "a", "content": "x" * 333}
    body: dict[str, Any] = {
        "model": "m",
        "max_tokens": 10,
        "system": [
            {"type": "text", "text": "Système ✓", "cache_control": {"type": "ephemeral", "ttl": "1h"}}
        ],
        "tools": [{"name": "read_file", "description": "Read.", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "plain string"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "a", "name": "read_file", "input": {"p": 1}}],
            },
            {"role": "user", "content": [tool_result]},
        ],
    }
    assert estimate_request(body) == count_tokens(body)
    assert estimate_tokens(tool_result) == block_tokens(tool_result)


@pytest.mark.parametrize(
    ("model", "price"),
    [
        ("claude-haiku-4-5", (1.0, 5.0)),
        ("claude-haiku-4-5-20251001", (1.0, 5.0)),
        ("claude-haiku-4-5@20251001", (1.0, 5.0)),
        ("claude-opus-4-1-20250805", (15.0, 75.0)),
        ("claude-opus-4-5-20251101", (5.0, 25.0)),
        ("claude-sonnet-4-5-20250929", (3.0, 15.0)),
        ("emu-sonnet", (0.0, 0.0)),
        ("scripted", (0.0, 0.0)),
        ("claude-haiku-4-50", None),
        ("qwen2.5-coder", None),
        ("my-claude-haiku-4-5", None),
    ],
)
def test_dated_model_ids_are_priced_by_their_name(model: str, price: tuple[float, float] | None) -> None:
    """Issue 12 follow-up, item 6 (prices): the cost and the "is it priced" answer come from one lookup that
    matches a dated id (`claude-haiku-4-5-20251001`) by its table name, so a dated Haiku id is no longer
    costed at the default (Sonnet) rate."""
    assert price_of(model) == price
    assert price_known(model) == (price is not None)
    expected = price or DEFAULT_PRICE
    assert cost_usd(C12, model) == pytest.approx((bill_tokens(C12) * expected[0] + 550 * expected[1]) / 1e6)


def test_the_longest_table_name_wins() -> None:
    """Issue 12 follow-up, item 6: a table name that is a prefix of another never takes the longer one's ids."""
    for name in PRICES:
        assert price_of(name + "-20990101") == PRICES[name]
