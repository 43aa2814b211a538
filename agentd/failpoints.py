"""Named crash points for tests (TESTING.md §4). A no-op unless `AGENTD_FAILPOINTS` is set.

`AGENTD_FAILPOINTS="name=action[,name=action@N]"`. Actions: `kill` (SIGKILL self), `kill-mid-write`
(the caller writes half its pending bytes, flushes, fsyncs, then this kills), `raise`
(raises `FailpointError`), `stamp` (appends `name detail monotonic-seconds` as one line to the file named by
`AGENTD_FAILPOINT_STAMPS`: when the daemon passed the point, for latency measurements; `time.monotonic()` is
one clock for every process of the machine), `gate` (the calling thread opens the FIFO named by
`AGENTD_FAILPOINT_GATE` for reading and reads it to its end: it waits, without polling, until a test has opened
the FIFO for writing, which tells the test the point is reached, and closed it). A suffix `@N` fires on the
Nth hit only.
Every point a test may name is in `POINTS`; `hit()` of an unregistered name is a bug (ValueError).
"""

from __future__ import annotations

import os
import signal
import time

POINTS = frozenset(
    {
        "store.append.before",
        "store.append.mid",
        "store.append.after",
        "store.index.mid",
        "loop.after_tool_use_persisted",
        "loop.after_tool_started",
        "loop.after_tool_exec",
        "meta.before_rename",
        "paths.after_check",
        "checkpoint.pack_written",
        "checkpoint.before_record",
        "rewind.intent_written",
        "rewind.apply",
        "rewind.applied",
        "rewind.recorded",
        "session.build",
        "history.page",
    }
)


class FailpointError(RuntimeError):
    """Raised by the `raise` action."""


def _parse(spec: str) -> dict[str, tuple[str, int | None]]:
    out: dict[str, tuple[str, int | None]] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, _, action = item.partition("=")
        nth: int | None = None
        if "@" in action:
            action, _, n = action.partition("@")
            nth = int(n)
        out[name.strip()] = (action.strip(), nth)
    return out


_counts: dict[str, int] = {}


def action(name: str) -> str | None:
    """Count a hit of `name` and return the action to take now (`kill`, `kill-mid-write`, `raise`) or None."""
    if name not in POINTS:
        raise ValueError(f"unregistered failpoint {name!r}")
    spec = os.environ.get("AGENTD_FAILPOINTS")
    if not spec:
        return None
    rule = _parse(spec).get(name)
    if rule is None:
        return None
    _counts[name] = _counts.get(name, 0) + 1
    act, nth = rule
    if nth is not None and _counts[name] != nth:
        return None
    return act


def kill_now() -> None:
    """SIGKILL this process (used after a deliberate partial write)."""
    os.kill(os.getpid(), signal.SIGKILL)


def hit(name: str, detail: str = "") -> None:
    """Fire the failpoint `name` if configured: `kill` kills, `raise` raises, `stamp` records the moment
    (with `detail`, e.g. a tool call's id); other actions are the caller's."""
    act = action(name)
    if act == "kill":
        kill_now()
    elif act == "raise":
        raise FailpointError(f"failpoint {name}")
    elif act == "stamp":
        _stamp(name, detail)
    elif act == "gate":
        with open(os.environ["AGENTD_FAILPOINT_GATE"], "rb") as gate:
            gate.read()


def _stamp(name: str, detail: str) -> None:
    path = os.environ.get("AGENTD_FAILPOINT_STAMPS")
    if path:
        line = f"{name} {detail or '-'} {time.monotonic():.6f}\n"
        with open(path, "a", encoding="utf-8") as f:
            f.write(line)
