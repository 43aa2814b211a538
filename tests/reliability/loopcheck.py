"""Judge a daemon's slow-callback log (agentd/loopwatch.py; issue 16 §1: nothing blocks the loop for more
than 10 ms).

A daemon started with `AGENTD_SLOW_CALLBACK_MS=10` logs every step of its event loop that took 10 ms or more
of wall time, with the loop thread's CPU time of that step. The verdict:

- a step that used `CPU_LIMIT_MS` (10 ms) or more of the loop thread's CPU fails: that cost is the code's own
  (parsing, encoding, hashing, an import), the same on any machine;
- a step that took `WALL_LIMIT_MS` (250 ms) or more of wall time fails too, whatever its CPU: the loop waited
  on something (a disk, a lock, a child) far longer than a busy machine's preemption explains;
- steps of 10 ms or more wall and under 10 ms CPU pass: on a loaded 2-core machine a 2 ms step is preempted
  for tens of milliseconds, which says nothing about agentd. They are counted in the report.

`KNOWN` names the steps still over the CPU limit whose fix belongs to another part of issue 16, each with its
reason; they are listed (`known()`), not failed, and the entry goes when its part lands. It is empty: opening
and creating a session (`agentd/session/load`, `agentd/session/new`, ACP's `session/new`, `session/load`)
were its last entries, until they moved to a worker thread (agentd.core.factory.built_off_loop).

Not a test module: used by tests/reliability/test_loop_responsive.py and the report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

CPU_LIMIT_MS = 10.0
WALL_LIMIT_MS = 250.0
THRESHOLD_MS = "10"  # the daemon's AGENTD_SLOW_CALLBACK_MS
LINE = re.compile(r"slow callback: ([0-9.]+) ms wall, ([0-9.]+) ms CPU: (.*)$")


KNOWN: dict[str, str] = {}


@dataclass
class Slow:
    wall_ms: float
    cpu_ms: float
    what: str

    @property
    def over(self) -> bool:
        return self.cpu_ms >= CPU_LIMIT_MS or self.wall_ms >= WALL_LIMIT_MS

    @property
    def known(self) -> str | None:
        return next((why for where, why in KNOWN.items() if where in self.what), None)

    @property
    def bad(self) -> bool:
        return self.over and self.known is None

    def __str__(self) -> str:
        return f"{self.wall_ms:.1f} ms wall, {self.cpu_ms:.1f} ms CPU: {self.what[:600]}"


def slow_steps(stderr: Path, start: int = 0, end: int | None = None) -> list[Slow]:
    """The slow steps logged in `stderr` from byte `start` on (to byte `end`, when given: the tests stop
    before the daemon's shutdown, which serves no client; a socket close there once waited 350 ms on CI)."""
    with stderr.open("rb") as f:
        f.seek(start)
        text = f.read(-1 if end is None else max(0, end - start)).decode("utf-8", "replace")
    out = []
    for line in text.splitlines():
        m = LINE.search(line)
        if m:
            out.append(Slow(float(m.group(1)), float(m.group(2)), m.group(3)))
    return out


def known(steps: list[Slow]) -> list[str]:
    """The steps over the limits that `KNOWN` lets pass, with their reason."""
    return [f"{s.known}: {s}" for s in steps if s.over and s.known is not None]


def verdict(steps: list[Slow]) -> list[str]:
    """The failing steps, worst CPU first, as lines for an assertion message."""
    return [str(s) for s in sorted((s for s in steps if s.bad), key=lambda s: -s.cpu_ms)]
