"""The emulator's injectable clock (TESTING.md §3.7): cache TTLs and write visibility run on it.

Owns `ManualClock`. It is deliberately not agentd's clock: this package imports no agentd module. Journal
timestamps (`received_at`, `first_byte_at`, `last_byte_at`) use `time.monotonic()` instead, because the
benchmarks (§5.3) measure real elapsed time with them.
"""

from __future__ import annotations

import threading
from typing import Protocol

__all__ = ["Clock", "ManualClock"]


class Clock(Protocol):
    """Anything with `now() -> float` (seconds)."""

    def now(self) -> float: ...


class ManualClock:
    """A thread-safe clock that moves only when told. `now()` and `advance()` are in seconds."""

    def __init__(self, start: float = 0) -> None:
        self._now = float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        """The current time in seconds."""
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> float:
        """Move forward by `seconds` (>= 0) and return the new time; a negative step raises ValueError."""
        if seconds < 0:
            raise ValueError(f"ManualClock.advance: seconds must be >= 0, got {seconds}")
        with self._lock:
            self._now += float(seconds)
            return self._now

    def __repr__(self) -> str:
        return f"ManualClock(now={self.now()})"
