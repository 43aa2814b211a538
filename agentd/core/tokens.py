"""Token accounting: running totals, the local size estimator and cost (CONTRACTS.md §6; case C12).

Owns: `TokenTotals`, `estimate_tokens`, `Estimator`, `cost_usd`, `PRICES` and `price_of` (the one price lookup).
Imports only `agentd.providers.base` (Usage). Never imports an SDK.

Prompt size of a response = `input_tokens + cache_creation_input_tokens + cache_read_input_tokens`.
`input_tokens` alone is only the uncached tail (the seed's counter added input + output only, so it
collapsed once caching worked and compression never triggered).

The estimator: `ceil(utf8_bytes(canonical JSON of the block) / 4)` per content block, summed, times a
calibration factor. Canonical JSON is `json.dumps(v, sort_keys=True, separators=(",", ":"),
ensure_ascii=False)` without `cache_control`. The factor starts at 1.0 and is recalibrated after every
response as `observed prompt tokens / estimated prompt tokens` of the request just sent (clamped to
[0.25, 4.0]), so it tracks the real tokenizer of the provider in use. Against the emulator's EMU-TOK-1
counter the uncalibrated estimate is exact up to per-message rounding.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from agentd.providers.base import Usage


def _canon(value: Any) -> str:
    if isinstance(value, dict) and "cache_control" in value:
        value = {k: v for k, v in value.items() if k != "cache_control"}
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def estimate_tokens(block: Any) -> int:
    """Estimated tokens of one content block, tool definition or system block (>= 1)."""
    return max(1, math.ceil(len(_canon(block).encode("utf-8")) / 4))


def _content_blocks(message: dict[str, Any]) -> list[Any]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def estimate_messages(messages: list[dict[str, Any]]) -> int:
    """Estimated tokens of messages: the sum over their content blocks."""
    return sum(estimate_tokens(b) for m in messages for b in _content_blocks(m))


def estimate_request(body: dict[str, Any]) -> int:
    """Estimated prompt tokens of a request body: tools + system blocks + message blocks."""
    system = body.get("system") or []
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    return (
        sum(estimate_tokens(t) for t in body.get("tools") or [])
        + sum(estimate_tokens(b) for b in system)
        + estimate_messages(body.get("messages") or [])
    )


class Estimator:
    """The calibrated estimator (see module docstring)."""

    def __init__(self) -> None:
        self.factor = 1.0

    def calibrate(self, estimated_prompt: int, observed_prompt: int) -> None:
        """Update the factor from one response: observed / estimated prompt tokens, clamped."""
        if estimated_prompt > 0 and observed_prompt > 0:
            self.factor = min(4.0, max(0.25, observed_prompt / estimated_prompt))

    def messages(self, messages: list[dict[str, Any]]) -> int:
        return math.ceil(estimate_messages(messages) * self.factor)

    def request(self, body: dict[str, Any]) -> int:
        return math.ceil(estimate_request(body) * self.factor)


@dataclass
class TokenTotals:
    """Sums over a session's responses (tokens). Unknown counts are left out of the sums, and
    `cache_read_known` turns False once any read count was unknown (CONTRACTS.md §6)."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_read_known: bool = True
    cost_usd: float = 0.0

    def add(self, usage: Usage, model: str = "") -> None:
        """Add one response's usage, each field counted once (overwrite-not-add is the stream's job)."""
        self.requests += 1
        self.input_tokens += usage.input_tokens or 0
        self.output_tokens += usage.output_tokens or 0
        self.cache_creation_input_tokens += usage.cache_creation_input_tokens or 0
        if usage.cache_read_input_tokens is None:
            self.cache_read_known = False
        self.cache_read_input_tokens += usage.cache_read_input_tokens or 0
        self.cost_usd += cost_usd(usage, model)

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "cacheCreationInputTokens": self.cache_creation_input_tokens,
            "cacheReadInputTokens": self.cache_read_input_tokens,
            "cacheReadKnown": self.cache_read_known,
            "costUsd": round(self.cost_usd, 6),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TokenTotals:
        return cls(
            requests=int(data.get("requests", 0)),
            input_tokens=int(data.get("inputTokens", 0)),
            output_tokens=int(data.get("outputTokens", 0)),
            cache_creation_input_tokens=int(data.get("cacheCreationInputTokens", 0)),
            cache_read_input_tokens=int(data.get("cacheReadInputTokens", 0)),
            cache_read_known=bool(data.get("cacheReadKnown", True)),
            cost_usd=float(data.get("costUsd", 0.0)),
        )


# USD per million tokens: (input, output). Cache writes cost 1.25x input (5 min) or 2x (1 h), reads 0.1x
# (Anthropic pricing page). Unknown models are priced like Sonnet; scripted/emulated models cost 0.
PRICES: dict[str, tuple[float, float]] = {
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4-1": (15.0, 75.0),
    "claude-sonnet-4-6": (3.0, 15.0),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "scripted": (0.0, 0.0),
}
DEFAULT_PRICE = (3.0, 15.0)


def bill_tokens(usage: Usage) -> float:
    """Billed input-token equivalents: input x1 + 5 min write x1.25 + 1 h write x2 + read x0.1 (case C12).

    When the TTL split is unknown the whole write is priced at the 5-minute rate; when only one half of the
    split is reported, the other half is the rest of the total write.
    """
    write = usage.cache_creation_input_tokens or 0
    if usage.cache_creation_1h is not None:
        w1h = usage.cache_creation_1h
    elif usage.cache_creation_5m is not None:
        w1h = max(0, write - usage.cache_creation_5m)
    else:
        w1h = 0
    w5m = usage.cache_creation_5m if usage.cache_creation_5m is not None else max(0, write - w1h)
    return (usage.input_tokens or 0) + 1.25 * w5m + 2.0 * w1h + 0.1 * (usage.cache_read_input_tokens or 0)


# A model id is a table name followed by one of these: a dated id (`claude-haiku-4-5-20251001`), Vertex's
# `@` form (`claude-haiku-4-5@20251001`) or a `-latest`/`-v1:0`-style suffix.
_ID_SEPARATORS = ("-", "@")


def price_of(model: str) -> tuple[float, float] | None:
    """The (input, output) price in USD per million tokens of `model`, or None when the table does not know it.

    The one lookup of the price table: the longest table name that is `model` itself or a prefix of it followed
    by `-` or `@` (so `claude-haiku-4-5-20251001` is Haiku 4.5, and `claude-opus-4-1-…` is never taken for a
    shorter name). Scripted and emulated models (`scripted…`, `emu-…`) cost 0. Source: Anthropic's pricing
    page, as of the table's last update (docs/cost.md)."""
    if model.startswith(("emu-", "scripted")):
        return (0.0, 0.0)
    matches = [
        name
        for name in PRICES
        if model == name or any(model.startswith(name + sep) for sep in _ID_SEPARATORS)
    ]
    return PRICES[max(matches, key=len)] if matches else None


def price_known(model: str) -> bool:
    """True when the price table knows `model` (a `usage_update` then carries `cost`, PROTOCOL.md §7.2)."""
    return price_of(model) is not None


def cost_usd(usage: Usage, model: str) -> float:
    """Cost of one response in USD: bill_tokens at the input price + output tokens at the output price; a
    model the table does not know is priced at `DEFAULT_PRICE` (Sonnet's rates)."""
    price_in, price_out = price_of(model) or DEFAULT_PRICE
    return (bill_tokens(usage) * price_in + (usage.output_tokens or 0) * price_out) / 1_000_000
