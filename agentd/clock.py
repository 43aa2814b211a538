"""The injectable clock (CONTRACTS.md §6: retries run on it; tests advance it instead of sleeping).

Owns: `Clock` (protocol), `SystemClock`, `ManualClock`, `OffsetClock` and `default_clock()`, the clock a
session gets when its caller passes none. A leaf below the core: providers, the permission gate and the core
import it; it imports nothing from agentd (ARCHITECTURE.md "The dependency rule").

Test-only hook: when `AGENTD_TEST_CLOCK_FILE` names a file, `default_clock()` is an `OffsetClock`: the system
clock plus the number of seconds written in that file. A test or benchmark driving a separate agentd process
(the cost benchmark's think time) writes a larger number there to make time pass for that process at once;
the file is read at every `now()`. Never set it outside tests.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Protocol

TEST_CLOCK_ENV = "AGENTD_TEST_CLOCK_FILE"


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


class OffsetClock:
    """The system clock plus an offset in seconds read from `path` at every `now()` (test-only hook, module
    docstring). An unreadable or non-numeric file keeps the last offset read (0 at first)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0.0

    def offset(self) -> float:
        try:
            self._offset = float(self.path.read_text(encoding="utf-8").strip() or 0.0)
        except (OSError, ValueError):
            pass
        return self._offset

    def now(self) -> float:
        return time.monotonic() + self.offset()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


def default_clock() -> Clock:
    """`SystemClock()`, or an `OffsetClock` on the file named by `AGENTD_TEST_CLOCK_FILE` (tests only)."""
    path = os.environ.get(TEST_CLOCK_ENV)
    return OffsetClock(Path(path)) if path else SystemClock()
