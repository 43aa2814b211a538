"""The true lower bound of a prompt-cache bill (issue 15): the cheapest any client could pay, knowing the future.

Input: the requests a session sent (bodies, `cache_control` ignored), their start times on the emulator's clock
and the model's minimum cacheable length. Output: the least input-side bill of any placement of breakpoints,
in base-input-token equivalents (0.1x read, 1.25x 5m write, 2x 1h write, 1x uncached), with its split.

The model is the emulator's cache (TESTING.md §3.7), relaxed per token:
- A request is a path of blocks tools -> system -> messages; block p of a request is identified by the
  rolling hash H(p) of the prefix up to it (the emulator's `flatten`), so the same prefix block in several
  requests is one "token group" with one sequence of uses (the times of the requests that contain it).
- At each use a token is either read at 0.1x, when it is cached (a live entry contains it: written or read
  before, less than its TTL ago), or it is not cached and the client chooses: send it at 1x (and it stays
  uncached), or write it at 1.25x (cached for 5 minutes) or 2x (cached for an hour).
- A read refreshes its lifetime, and a client may then keep it for an hour at no cost: in the emulator a
  breakpoint on a cached entry re-marks it with the breakpoint's TTL for free, and any new 1h entry beyond it
  carries the whole prefix for an hour. So a token once cached stays cached while its uses are less than an
  hour apart; only a write's TTL is a real choice: 5m if its next use is within 5 minutes, 1h if within an
  hour, else sent at 1x (never reused before it would expire).
- The minimum cacheable length: a request shorter than it can neither read nor write (its tokens cost 1x and
  refresh nothing). A longer request can write any of its tokens (with a breakpoint at its end) but read only
  tokens of its longest prefix shared with an earlier request, and only when that prefix reaches the minimum:
  a read entry is a prefix of the reading request, written by an earlier one, at least the minimum long. (So
  a compression's summary request, which shares only tools + system with the session, reads nothing when
  they are shorter than the minimum, whatever the client does.) A token that is not read keeps whatever
  lifetime it had. Times are request starts; an entry written at t serves requests starting before t + TTL.
Per token group the optimum is exact dynamic programming over its uses (`group_cost`; the state after each
use is the time until which the token is cached, or none). Groups are independent in the relaxed model, so
the bound is the sum over groups of tokens x cost. It is a lower bound of every client of the emulator,
because each real per-token sequence of charges is feasible here at no lower cost: the relaxation drops the
4-breakpoint limit, the 20-block lookback, the rule that 1h entries come before 5m ones, and lets a read keep
a token an hour (all constraints on the client only). It is tight when the session is one growing chain of
requests, which the benchmark's workloads mostly are.
Imports the emulator's `flatten` only (the same hashing the bill was made with).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agentd.testing.emulator.cache import flatten

READ, WRITE_5M, WRITE_1H, UNCACHED = 0.1, 1.25, 2.0, 1.0
TTL_5M, TTL_1H = 300.0, 3600.0


@dataclass
class Split:
    """Token counts of a bill by price: uncached (1x), 5m writes (1.25x), 1h writes (2x), reads (0.1x)."""

    uncached: float = 0.0
    write_5m: float = 0.0
    write_1h: float = 0.0
    read: float = 0.0

    @property
    def equivalents(self) -> float:
        """The bill in base-input-token equivalents."""
        return (
            UNCACHED * self.uncached + WRITE_5M * self.write_5m + WRITE_1H * self.write_1h + READ * self.read
        )

    def scaled(self, k: float) -> Split:
        return Split(self.uncached * k, self.write_5m * k, self.write_1h * k, self.read * k)

    def __add__(self, other: Split) -> Split:
        return Split(
            self.uncached + other.uncached,
            self.write_5m + other.write_5m,
            self.write_1h + other.write_1h,
            self.read + other.read,
        )


@dataclass
class _State:
    cost: float
    split: Split = field(default_factory=Split)


def _offer(states: dict[float | None, _State], expiry: float | None, cost: float, split: Split) -> None:
    """Keep the cheaper way to reach the state `expiry`."""
    if expiry not in states or cost < states[expiry].cost:
        states[expiry] = _State(cost, split)


NONE, WRITE, READABLE = 0, 1, 2  # what a use allows: nothing (below the minimum), writes, reads and writes


def group_cost(uses: Iterable[tuple[float, int]]) -> tuple[float, Split]:
    """The least cost of one token over its uses `(start time s, NONE | WRITE | READABLE)` in time order, and
    the split of that cost (counts of one token). Exact: DP whose states are the time the token is cached
    until (None: not cached)."""
    states: dict[float | None, _State] = {None: _State(0.0)}
    for t, allows in uses:
        if allows == NONE:  # nothing can be read or written by this request; the cache is untouched
            states = {e: _State(s.cost + UNCACHED, s.split + Split(uncached=1)) for e, s in states.items()}
            continue
        nxt: dict[float | None, _State] = {}
        for expiry, s in states.items():
            if allows == READABLE and expiry is not None and t < expiry:  # read, and keep it for an hour
                _offer(nxt, t + TTL_1H, s.cost + READ, s.split + Split(read=1))
                continue
            live = expiry if expiry is not None and t < expiry else None
            _offer(nxt, live, s.cost + UNCACHED, s.split + Split(uncached=1))
            _offer(nxt, max(live or 0.0, t + TTL_5M), s.cost + WRITE_5M, s.split + Split(write_5m=1))
            _offer(nxt, max(live or 0.0, t + TTL_1H), s.cost + WRITE_1H, s.split + Split(write_1h=1))
        states = nxt
    best = min(states.values(), key=lambda s: s.cost)
    return best.cost, best.split


def lower_bound(requests: Iterable[tuple[float, dict[str, Any]]], min_cacheable: int) -> Split:
    """The least input-side bill of `requests` = (start time in seconds, Messages request body), in order.
    Returns its split in tokens (fractional counts never occur: each group's split is whole)."""
    uses: dict[bytes, list[tuple[float, int]]] = defaultdict(list)
    size: dict[bytes, int] = {}
    for at, body in requests:
        flat = flatten(body)
        shared = 0  # blocks of the longest prefix shared with an earlier request (prefixes nest)
        while shared < len(flat.hashes) and flat.hashes[shared] in uses:
            shared += 1
        readable = shared if shared and flat.cum[shared - 1] >= min_cacheable else 0
        writable = flat.total >= min_cacheable
        previous = 0
        for p, (h, cum) in enumerate(zip(flat.hashes, flat.cum, strict=True)):
            uses[h].append((at, READABLE if p < readable else WRITE if writable else NONE))
            size[h] = cum - previous
            previous = cum
    total = Split()
    memo: dict[tuple[tuple[float, int], ...], Split] = {}
    for h, seq in uses.items():
        key = tuple(seq)
        if key not in memo:
            memo[key] = group_cost(key)[1]
        total = total + memo[key].scaled(size[h])
    return total
