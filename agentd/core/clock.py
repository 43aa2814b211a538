"""The injectable clock (CONTRACTS.md §6: retries run on it; tests advance it instead of sleeping).

Owns: `Clock` (protocol), `SystemClock`, `ManualClock`. Imports nothing from agentd.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Monotonic seconds."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` (may return at once on a manual clock)."""
        ...


class SystemClock:
    """The real clock: `time.monotonic()` and `asyncio.sleep()`."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class ManualClock:
    """A clock tests drive: `sleep(s)` advances time by `s` at once and records the wait in `sleeps`."""

    def __init__(self, start: float = 0.0) -> None:
        self._t = start
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self._t

    def advance(self, seconds: float) -> None:
        self._t += seconds

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self._t += max(0.0, seconds)
        await asyncio.sleep(0)
