"""Cache breakpoints: where they go, and which TTL each gets (CONTRACTS.md §6; seed 004).

Owns `Planner`: the placement of the (at most 4) `cache_control` breakpoints of every request that
`Context.to_request()` builds, and the TTL policy of the `cache.ttl` setting ("auto" | "5m" | "1h"), explained
here and nowhere else. Imports only the standard library; must not import pygls, lsprotocol, acp or adapters.

Placement. Order on the wire is tools -> system -> messages (positions below are flat block indexes of the
stored history; the stable prefix has its own key):
  1. the stable prefix: the last system block (the last tool when there is no system). It covers the tools
     too; neither changes within a session.
  2. the anchor: the longest entry this session believes is still cached (see "Entries" below), else the
     previous request's moving breakpoint. It is usually this request's cache read, and it is marked so the
     read is found whatever the 20-block lookback.
  3. an intermediate breakpoint when more than 18 blocks were added since the anchor, 18 blocks after it, so
     the next lookback (20 blocks) still finds a written entry.
  4. the moving breakpoint on the last non-empty block of the stored history (never on a request-only block
     such as the stale-plan reminder, which hooks append after planning).
Planning the same history again gives the same positions (the TTLs may differ: time has passed).

What a request pays (Anthropic prompt-caching docs, "Pricing" and the billing points of mixed TTLs): with A
the tokens read (the longest cached entry found), B the highest 1h breakpoint above A and C the highest
breakpoint, it pays 0.1x for A, 2x for B-A, 1.25x for C-B and 1x for the rest. A breakpoint at or below A
writes nothing and costs nothing. An entry lives 5 minutes (5m) or an hour (1h) from the start of the last
request that wrote, read or marked it.

Entries. The planner remembers, per position it marked, when it last marked it, with which TTL, the tokens
up to it and whether it was paid as a 1h write. An entry is believed cached until `SAFETY_S` before its
expiry. Compression (`reset_history`) forgets the history's entries; the stable prefix's stays.

The TTL policy.
- "5m" and "1h": every breakpoint gets that TTL.
- "auto" (the default) decides per breakpoint, from the prices above and this session's own gaps:
  * A breakpoint on an entry believed cached (the stable prefix and the anchor, while the session keeps
    sending) is marked 1h: it is at or below A, so it is billed nothing, and the entry then lives an hour
    (assumption U: a mark refreshes an entry with the mark's TTL, which is what the bundled emulator does;
    the docs' billing points charge nothing for it). Whatever was read survives a pause of up to an hour.
  * A breakpoint that writes (the new tail; everything after a lapse) gets 1h only when that pays. A 1h
    write costs 0.75x more per written token; it saves 1.15x (a rewrite at 1.25x instead of a read at 0.1x)
    on every token at risk if the gap before the next request kills a 5m entry but not a 1h one (between 5
    minutes and an hour). So: 1h iff P(next gap in [5m, 1h)) * 1.15 * at_risk > 0.75 * written. Under U only
    the new tail is at risk (at_risk = written), so the new tail gets 1h iff that probability > 0.65: in
    practice only in chat-like sessions whose replies end turns and whose users pause for minutes.
  * P(next gap in [5m, 1h)) = q * P_pause + (1 - q) * P_step, where q is the share of replies that ended a
    turn (the next request then waits for the user), P_pause the share of user pauses (reply that ended a
    turn -> next request) of 5 minutes to an hour, and P_step the same share of the gaps inside turns (tool
    runs). All three are counted in this session on its clock (gaps between request starts), from priors
    worth a few observations: q = 1/2 (1 of 2), P_pause = 1/2 (1 of 2), P_step = 1/10 (0.5 of 5). A pause
    over an hour counts as not in [5m, 1h): no TTL survives it, so it argues for neither.
  * U is checked, not trusted: when, after a gap of 5 minutes to an hour, the service reads less than the
    anchor it read before the gap (kept alive only by a 1h mark), the session stops relying on marks. Then
    at_risk is everything written since the longest entry still believed cached that was paid as a 1h write,
    and the new tail gets 1h as soon as pauses of minutes are at all likely.
- TTLs never increase along tools -> system -> messages (a 1h never follows a 5m): cached entries come
  before new writes, and a breakpoint never gets a longer TTL than the one before it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

TTL = Literal["5m", "1h"]
TtlMode = Literal["auto", "5m", "1h"]
TTL_S: dict[str, float] = {"5m": 300.0, "1h": 3600.0}


def cache_control(ttl: TTL) -> dict[str, str]:
    """The `cache_control` object of a breakpoint with `ttl`."""
    return {"type": "ephemeral", "ttl": ttl}


SAFETY_S = 15.0  # an entry is believed cached until this long before its expiry (latency, retries)
LOOKBACK_BLOCKS = 20
INTERMEDIATE_AFTER = 18
STABLE = -1  # the key of the stable prefix (tools + system) in the planner's entries
# Prices relative to base input tokens (Anthropic pricing: 5m write 1.25x, 1h write 2x, read 0.1x).
WRITE_5M, WRITE_1H, READ = 1.25, 2.0, 0.1


@dataclass
class Entry:
    """What the planner believes of one cache entry it marked (see the module docstring)."""

    at: float  # clock seconds of the last request that marked it
    ttl: TTL  # the longest TTL it was marked with while cached
    paid: TTL  # the longest TTL it was written (paid) with
    tokens: int  # prompt tokens up to it: the service's count once it was read, else agentd's estimate
    served: bool = False  # `tokens` is the service's own count (a cache read of exactly this entry)


@dataclass
class Share:
    """A proportion counted from a prior: `hits` of `total` observations (fractional priors allowed)."""

    hits: float
    total: float

    def add(self, hit: bool) -> None:
        self.hits += 1.0 if hit else 0.0
        self.total += 1.0

    @property
    def value(self) -> float:
        return self.hits / self.total


@dataclass
class Gaps:
    """This session's gaps between requests, as the three shares of the policy (module docstring)."""

    ends: Share  # replies that ended a turn
    pause_mid: Share  # user pauses of 5 minutes to an hour
    step_mid: Share  # gaps inside a turn of 5 minutes to an hour

    @classmethod
    def prior(cls) -> Gaps:
        return cls(Share(1.0, 2.0), Share(1.0, 2.0), Share(0.5, 5.0))

    def add(self, gap_s: float, after_turn_end: bool) -> None:
        mid = TTL_S["5m"] - SAFETY_S <= gap_s < TTL_S["1h"] - SAFETY_S
        self.ends.add(after_turn_end)
        (self.pause_mid if after_turn_end else self.step_mid).add(mid)

    def p_next_mid(self) -> float:
        """P(the gap before the next request kills a 5m entry but not a 1h one)."""
        q = self.ends.value
        return q * self.pause_mid.value + (1.0 - q) * self.step_mid.value


@dataclass
class Plan:
    """One request's breakpoints: the stable prefix's TTL and (position, TTL) pairs for the history,
    ascending."""

    stable: TTL
    points: list[tuple[int, TTL]]


class Planner:
    """Breakpoint placement and TTL policy for one session's Context (module docstring).

    `ttl`: the `cache.ttl` setting; `now`: the session's clock in seconds (monotonic; tests and the cost
    benchmark inject theirs).
    """

    def __init__(self, ttl: TtlMode = "auto", now: Callable[[], float] = time.monotonic) -> None:
        if ttl not in ("auto", "5m", "1h"):
            raise ValueError(f"cache.ttl must be 'auto', '5m' or '1h', got {ttl!r}")
        self.mode: TtlMode = ttl
        self.now = now
        self.gaps = Gaps.prior()
        self.marks_hold = True  # assumption U of the module docstring, until the service disproves it
        self.entries: dict[int, Entry] = {}
        self._prev_end: int | None = None  # the previous request's moving breakpoint
        self._prev_base: int | None = None  # the anchor that request itself was planned against
        self._last_at: float | None = None  # start of the previous request (None after a resume)
        self._turn_ended = False  # a user prompt arrived since the previous request
        self._gap: float | None = None  # seconds since the previous request (None for the first)
        self._read_key: int | None = None  # the longest entry this request should read
        self._expect_read: int | None = None  # the read U promises after a gap of minutes

    # ---- what the Context tells the planner -------------------------------------------------------
    def user_prompt(self) -> None:
        """A user prompt was appended: the gap before the next request includes the user's pause."""
        self._turn_ended = True

    def reset_history(self) -> None:
        """The history was replaced (compression): its positions and entries are gone."""
        self.entries = {k: e for k, e in self.entries.items() if k == STABLE}
        self._prev_end = self._prev_base = self._read_key = None

    def served(self, read_tokens: int) -> None:
        """The service's usage for the last request: it read `read_tokens` prompt tokens from the cache."""
        if self._expect_read is not None and read_tokens < self._expect_read:
            self.marks_hold = False  # U is false here: marks do not keep entries alive
        self._expect_read = None
        entry = self.entries.get(self._read_key) if self._read_key is not None else None
        if entry is None:
            return
        if read_tokens >= 0.8 * entry.tokens:  # the longest cached entry is what the service reads
            entry.tokens, entry.served = read_tokens, True
        else:  # it was not cached after all (evicted, or a wrong belief): the mark wrote it
            entry.paid = entry.ttl

    # ---- planning ---------------------------------------------------------------------------------
    def plan(
        self, n_blocks: int, last_eligible: Callable[[int], int | None], tokens: int, stable_tokens: int
    ) -> Plan:
        """Plan one request now. `n_blocks`: flat blocks in the history; `last_eligible(k)`: the last block
        at or before k that may carry a breakpoint (None if none); `tokens`: estimated prompt tokens up to
        the end of the history; `stable_tokens`: the same for tools + system. Commits the planner's state."""
        now = self.now()
        self._observe(now)
        self.entries = {k: e for k, e in self.entries.items() if now - e.at < TTL_S["1h"]}  # the live ones
        positions = self._positions(n_blocks, last_eligible, now)
        keys = [STABLE, *positions]
        cached = [self._cached(k, now) for k in keys]
        self._read_key = max((k for k, c in zip(keys, cached, strict=True) if c), default=None)
        written_ttl = self._write_ttl(keys, cached, tokens, stable_tokens, now)
        ttls: list[TTL] = []
        for k, is_cached in zip(keys, cached, strict=True):
            ttl: TTL = "1h" if (is_cached and self.mode == "auto") else written_ttl
            if self.mode != "auto":
                ttl = self.mode
            if ttls and ttls[-1] == "5m":
                ttl = "5m"  # never a 1h after a 5m
            ttls.append(ttl)
            size = stable_tokens if k == STABLE else tokens
            self._mark(k, ttl, is_cached, size, now)
        self._arm_check()
        if positions and positions[-1] != self._prev_end:
            self._prev_base, self._prev_end = self._prev_end, positions[-1]
        return Plan(ttls[0], list(zip(positions, ttls[1:], strict=True)))

    def stable_ttl(self) -> TTL:
        """The TTL for a request that marks only the stable prefix (the compression summary request), now;
        noted as a mark of that entry."""
        now = self.now()
        cached = self._cached(STABLE, now)
        ttl: TTL = self.mode if self.mode != "auto" else ("1h" if cached else "5m")
        entry = self.entries.get(STABLE)
        self._mark(STABLE, ttl, cached, entry.tokens if entry else 0, now)
        return ttl

    def _observe(self, now: float) -> None:
        if self._last_at is not None:
            self.gaps.add(now - self._last_at, self._turn_ended)
        self._gap = None if self._last_at is None else now - self._last_at
        self._last_at, self._turn_ended = now, False

    def _positions(self, n: int, last_eligible: Callable[[int], int | None], now: float) -> list[int]:
        moving = last_eligible(n - 1) if n else None
        if moving is None:
            return []
        points = {moving}
        anchor = self._anchor(moving, now)
        if anchor is not None:
            mark = last_eligible(anchor)
            if mark is not None:
                points.add(mark)
            if moving - anchor > INTERMEDIATE_AFTER:
                mid = last_eligible(anchor + INTERMEDIATE_AFTER)
                if mid is not None and mid > anchor:
                    points.add(mid)
        return sorted(points)

    def _anchor(self, moving: int, now: float) -> int | None:
        """The longest entry believed cached before `moving`, else the previous request's end."""
        cached = [k for k in self.entries if k != STABLE and k < moving and self._cached(k, now)]
        if cached:
            return max(cached)
        prev = self._prev_base if self._prev_end == moving else self._prev_end
        return prev if prev is not None and prev < moving else None

    def _cached(self, key: int, now: float) -> bool:
        entry = self.entries.get(key)
        if entry is None:
            return False
        ttl = entry.ttl if self.marks_hold else entry.paid
        return now - entry.at < TTL_S[ttl] - SAFETY_S

    def _write_ttl(self, keys: list[int], cached: list[bool], tokens: int, stable: int, now: float) -> TTL:
        """The TTL of this request's writes under "auto" (module docstring)."""
        read = max((self._size(k, stable) for k, c in zip(keys, cached, strict=True) if c), default=0)
        written = max(1, tokens - read)
        at_risk = written
        if not self.marks_hold:
            safe = [
                self._size(k, stable)
                for k, e in self.entries.items()
                if e.paid == "1h" and self._cached(k, now)
            ]
            at_risk = max(written, tokens - max(safe, default=0))
        gain = self.gaps.p_next_mid() * (WRITE_5M - READ) * at_risk
        return "1h" if gain > (WRITE_1H - WRITE_5M) * written else "5m"

    def _size(self, key: int, stable: int) -> int:
        entry = self.entries.get(key)
        return entry.tokens if entry is not None else (stable if key == STABLE else 0)

    def _mark(self, key: int, ttl: TTL, cached: bool, tokens: int, now: float) -> None:
        old = self.entries.get(key)
        if cached and old is not None:
            longer: TTL = "1h" if "1h" in (old.ttl, ttl) else "5m"
            old.at, old.ttl = now, longer
            return
        if old is None:
            self.entries[key] = Entry(at=now, ttl=ttl, paid=ttl, tokens=tokens)
        else:  # written again: its size is still known
            old.at, old.ttl, old.paid = now, ttl, ttl

    def _arm_check(self) -> None:
        """After a gap of minutes, an anchor alive only thanks to a 1h mark must be read in full (U)."""
        self._expect_read = None
        gap = self._gap
        if not self.marks_hold or gap is None or self._read_key is None:
            return
        entry = self.entries.get(self._read_key)
        if entry is None or not entry.served or entry.paid == "1h":
            return
        if TTL_S["5m"] <= gap < TTL_S["1h"] - SAFETY_S:
            self._expect_read = entry.tokens
