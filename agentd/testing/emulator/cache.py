"""Prompt-cache simulation (TESTING.md §3.7) and OpenAI-style automatic prefix caching (§3.8).

Owns `flatten`, `CacheSim` (Messages API: explicit breakpoints, 20-block lookback, 5m/1h TTLs, the A/B/C
usage formula) and `PrefixCache` (chat completions: automatic prefix caching rounded to a unit). Times are
seconds on the emulator's injectable clock; token counts are EMU-TOK-1. Imports only the standard library
and sibling emulator modules, never agentd code.

Sources: the Anthropic prompt-caching docs (breakpoints, lookback, TTL, invalidation table, usage fields);
anthropic-sdk-python #1194 (a minimum of 2048 observed, hence the configurable minimum) and #1451
(back-to-back misses: write visibility); OpenAI and DeepSeek prompt-caching docs (minimum 1024, units).
"""

from __future__ import annotations

import hashlib
import re
import threading
from dataclasses import dataclass, field
from typing import Any

from .tokens import as_blocks, block_tokens, canon, prompt_sections, strip_cache_control
from .validate import breakpoints_in_order

__all__ = ["TTL_1H", "TTL_5M", "CacheResult", "CacheSim", "Flat", "PrefixCache", "flatten"]

TTL_5M = 300.0  # {"type": "ephemeral"} (prompt-caching docs)
TTL_1H = 3600.0  # {"type": "ephemeral", "ttl": "1h"}
LOOKBACK = 20  # reads check bp, bp-1, ..., bp-19 (prompt-caching docs)


class _Roll:
    """The rolling hash H(p) = sha256(H(p-1) ‖ canon(block_p)); separators are mixed in between blocks."""

    def __init__(self) -> None:
        self.state = hashlib.sha256(b"agentd-emulator-cache/1").digest()

    def mix(self, tag: str) -> None:
        self.state = hashlib.sha256(self.state + b"\x00" + tag.encode("utf-8")).digest()

    def add(self, block: Any) -> bytes:
        self.state = hashlib.sha256(self.state + canon(strip_cache_control(block)).encode("utf-8")).digest()
        return self.state


@dataclass
class Flat:
    """A request flattened tools -> system -> messages. Positions `p` are 1-based block indices."""

    hashes: list[bytes]  # H(p) at index p-1
    cum: list[int]  # T(p) at index p-1: tokens of blocks 1..p
    breakpoints: list[tuple[int, float]]  # (p, ttl in seconds), ascending p
    total: int

    def tokens_at(self, p: int | None) -> int:
        return self.cum[p - 1] if p else 0


_NESTED = re.compile(r"^(messages\.\d+\.content\.\d+)\.content\.\d+$")


def flatten(body: dict[str, Any]) -> Flat:
    """Flatten and hash a Messages request (§3.7 item 1) and place its breakpoints (item 2).

    Section separators are hashed in, and so are `tool_choice` (with `disable_parallel_tool_use`) and the
    thinking config, at the start of `messages` (docs' invalidation table). A `cache_control` inside a
    `tool_result`'s content marks the containing block.
    """
    roll, hashes, cum, paths = _Roll(), [], [], {}
    total = 0

    def add(path: str, block: Any) -> None:
        nonlocal total
        total += block_tokens(block)
        hashes.append(roll.add(block))
        cum.append(total)
        paths[path] = len(hashes)

    roll.mix("tools")
    for k, tool in enumerate(body.get("tools") or []):
        add(f"tools.{k}", tool)
    roll.mix("system")
    for k, block in enumerate(as_blocks(body.get("system"))):
        add(f"system.{k}", block)
    roll.mix("messages" + canon({"thinking": body.get("thinking"), "tool_choice": body.get("tool_choice")}))
    for i, msg in enumerate(body.get("messages") or []):
        roll.mix(f"role:{msg.get('role')}")
        for j, block in enumerate(as_blocks(msg.get("content"))):
            add(f"messages.{i}.content.{j}", block)
    bps: dict[int, float] = {}
    for path, ttl in breakpoints_in_order(body):
        m = _NESTED.match(path)
        p = paths.get(m.group(1) if m else path)
        if p is not None:
            bps[p] = max(bps.get(p, 0.0), TTL_1H if ttl == "1h" else TTL_5M)
    return Flat(hashes, cum, sorted(bps.items()), total)


@dataclass
class _Entry:
    ttl: float
    expires_at: float
    visible_at: float | None = None  # None until the writing response's headers were sent
    order: int = 0  # publish order: readers must have started after it


@dataclass
class CacheResult:
    """What one request did to the cache. `usage` holds the input-side usage fields of the response."""

    usage: dict[str, Any]
    hit_position: int | None
    total: int
    order: int
    pending: list[tuple[str, bytes]] = field(default_factory=list)


class CacheSim:
    """The Messages API prompt cache, scoped by (key hash, model). Thread-safe.

    `begin()` at request start computes usage and stages writes; `publish()` when the response's headers
    are sent makes them readable (after `write_visibility_delay_s`) to requests that start later.
    """

    def __init__(self, write_visibility_delay_s: float = 0.0) -> None:
        self.write_visibility_delay_s = write_visibility_delay_s
        self._entries: dict[tuple[str, bytes], _Entry] = {}
        self._order = 0
        self._lock = threading.Lock()

    def _live(self, e: _Entry | None, now: float, order: int) -> bool:
        return (
            e is not None
            and e.visible_at is not None
            and e.order < order
            and e.visible_at <= now < e.expires_at
        )

    def begin(self, body: dict[str, Any], *, now: float, min_cacheable_tokens: int = 1024) -> CacheResult:
        """Look up and stage writes for one request starting at `now` (seconds); return its usage."""
        flat, model = flatten(body), str(body.get("model"))
        with self._lock:
            self._order += 1
            order = self._order
            hit = self._lookup(flat, model, now, order)
            usage = _usage(flat, hit, min_cacheable_tokens)
            pending = self._stage(flat, model, now, min_cacheable_tokens)
        return CacheResult(usage, hit, flat.total, order, pending)

    def _lookup(self, flat: Flat, model: str, now: float, order: int) -> int | None:
        hit: int | None = None
        for bp, _ in flat.breakpoints:
            for q in range(bp, max(0, bp - LOOKBACK), -1):
                entry = self._entries.get((model, flat.hashes[q - 1]))
                if self._live(entry, now, order):
                    hit = max(hit or 0, q)
                    break
        if hit is not None:  # a hit refreshes its entry, at no cost, from the start of this request
            entry = self._entries[(model, flat.hashes[hit - 1])]
            entry.expires_at = max(entry.expires_at, now + entry.ttl)
        return hit

    def _stage(self, flat: Flat, model: str, now: float, minimum: int) -> list[tuple[str, bytes]]:
        pending = []
        for p, ttl in flat.breakpoints:
            if flat.cum[p - 1] < minimum:
                continue  # below the minimum nothing is cached, silently
            key = (model, flat.hashes[p - 1])
            entry = self._entries.get(key)
            if entry is not None and (entry.visible_at is None or now < entry.expires_at):
                entry.expires_at = max(entry.expires_at, now + ttl)
                entry.ttl = max(entry.ttl, ttl)
            else:
                self._entries[key] = _Entry(ttl=ttl, expires_at=now + ttl)
                pending.append(key)
        return pending

    def publish(self, result: CacheResult, *, now: float) -> None:
        """The writing response began at `now`: its staged entries become readable by later requests."""
        with self._lock:
            self._order += 1
            for key in result.pending:
                entry = self._entries.get(key)
                if entry is not None and entry.visible_at is None:
                    entry.visible_at = now + self.write_visibility_delay_s
                    entry.order = self._order

    def run(self, body: dict[str, Any], *, now: float, min_cacheable_tokens: int = 1024) -> CacheResult:
        """`begin()` then `publish()` at the same instant: one sequential request (for unit tests)."""
        result = self.begin(body, now=now, min_cacheable_tokens=min_cacheable_tokens)
        self.publish(result, now=now)
        return result

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def _usage(flat: Flat, hit: int | None, minimum: int) -> dict[str, Any]:
    """§3.7 item 7: A = read, C = highest qualifying breakpoint, B = highest qualifying 1h one above A."""
    a = flat.tokens_at(hit)
    qualifying = [(flat.cum[p - 1], ttl) for p, ttl in flat.breakpoints if flat.cum[p - 1] >= minimum]
    c = max([a, *(t for t, _ in qualifying)])
    b = max([a, *(t for t, ttl in qualifying if ttl == TTL_1H and t > a)])
    uncached = flat.total - max(a, c)
    usage = {
        "input_tokens": uncached,
        "cache_creation_input_tokens": c - a,
        "cache_read_input_tokens": a,
        "cache_creation": {"ephemeral_1h_input_tokens": b - a, "ephemeral_5m_input_tokens": c - b},
    }
    if uncached + (c - a) + a != flat.total:  # the invariant every response asserts
        raise AssertionError(f"emulator usage invariant broken: {usage} does not sum to {flat.total}")
    return usage


class PrefixCache:
    """Automatic prefix caching of OpenAI-compatible servers (§3.8): no breakpoints, no write fee.

    The prefix (in whole blocks: tools, then whole messages) shared with an earlier live request to the
    same model is cached once it reaches `minimum` tokens, rounded down to `unit`; TTL 300 s, refreshed on
    use. Visibility follows the same rule as `CacheSim`.
    """

    def __init__(self, write_visibility_delay_s: float = 0.0, ttl: float = TTL_5M) -> None:
        self.write_visibility_delay_s = write_visibility_delay_s
        self.ttl = ttl
        self._entries: dict[tuple[str, bytes], _Entry] = {}
        self._order = 0
        self._lock = threading.Lock()

    def begin(
        self, body: dict[str, Any], *, now: float, minimum: int = 1024, unit: int = 128
    ) -> tuple[int, int | None, CacheResult]:
        """Return (cached tokens, hit position, staged writes) for a chat request starting at `now`."""
        roll, hashes, cum, total, section = _Roll(), [], [], 0, ""
        for sec, block in prompt_sections(body, "openai"):
            if sec.split(".")[0] != section:
                section = sec.split(".")[0]
                roll.mix(section)
            total += block_tokens(block)
            hashes.append(roll.add(block))
            cum.append(total)
        model = str(body.get("model"))
        with self._lock:
            self._order += 1
            order, hit = self._order, None
            for p in range(len(hashes), 0, -1):
                e = self._entries.get((model, hashes[p - 1]))
                if e is not None and e.visible_at is not None and e.order < order:
                    if e.visible_at <= now < e.expires_at:
                        hit = p
                        break
            shared = cum[hit - 1] if hit else 0
            cached = (shared // unit) * unit if shared >= minimum else 0
            pending = []
            for p in range(1, len(hashes) + 1):
                if cum[p - 1] < minimum:
                    continue
                key = (model, hashes[p - 1])
                e = self._entries.get(key)
                if e is not None and (e.visible_at is None or now < e.expires_at):
                    e.expires_at = max(e.expires_at, now + self.ttl)
                else:
                    self._entries[key] = _Entry(ttl=self.ttl, expires_at=now + self.ttl)
                    pending.append(key)
        return cached, hit, CacheResult({}, hit, total, order, pending)

    def publish(self, result: CacheResult, *, now: float) -> None:
        """The writing response began at `now`: its prefixes become readable by later requests."""
        with self._lock:
            self._order += 1
            for key in result.pending:
                e = self._entries.get(key)
                if e is not None and e.visible_at is None:
                    e.visible_at = now + self.write_visibility_delay_s
                    e.order = self._order

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
