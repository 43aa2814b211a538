"""The process's garbage-collector policy (issue 16 §2: agentd's own work per model request does not grow with
the history; §1: nothing blocks the event loop for long).

Owns: when CPython's cyclic collector may walk what a process holds for long. A full collection visits every
tracked container in the process: the imported modules (~260,000 objects in a daemon, 160-190 ms of CPU on
the loop per pass on a 2-core CI machine) and every message of every open history. Each model request makes
the SDK copy its whole body; those copies outlive a young collection, and once enough of them are promoted
a full collection runs, so at 5,000 messages the collector, not agentd, made a request 3.6 times as
expensive as at 100 (measured by `python -m tests.benchmarks.daemon`, `loop_cpu_ratio`).

The policy (`gc.freeze`, the standard library's way to exempt long-lived objects from collections):
- `settle()`, called as each turn or manual compaction starts (agentd.core.session.Session.prompt and
  .compact; `turn_ended()` as it ends), collects what was made since
  the last settle (a full collection, but frozen objects are not visited: its cost is that of the new
  objects, the previous turn's) and freezes what survived: the imports, the histories, the sessions. The
  turn's own collections then visit only what the turn makes. When modules were imported since the last
  settle (the first turns import the SDKs and build pydantic schemas: ~100,000 objects, ~95 ms a pass) it
  freezes without collecting: what was imported lives as long as the process.
- A closed session (`release()`) is in reference cycles (the session and its journal's callbacks, its
  tasks), frozen, so only a pass over everything reclaims it, with its history: unfreeze, collect, freeze,
  O(all objects), ~200 ms of the loop on a 2-core CI machine. That pass runs when the process is idle:
  `IDLE_S` seconds after the last turn ended or session closed with no turn running (`turn_ended()` is
  called as each turn ends), so no stream waits behind it. A process never idle runs it at a turn start
  once `FORCE_AFTER` reasons piled up. Reasons are closed sessions and every `RELEASE_EVERY`-th settle (a
  concurrent turn's objects frozen while alive that became cyclic garbage later, and what a settle after
  imports froze uncollected, are kept until a pass; this bounds what can pile up).
Objects freed by reference counting (messages dropped by compression, the SDK's copies) are freed at once,
frozen or not. Before this policy, at 5,000 messages CPython ran a full pass every few requests.

Only a process that calls `enable()` (the `agentd` entry point, agentd.cli) follows it: in a library use or a
test process, `settle`, `turn_ended` and `release` do nothing, so thousands of sessions in one pytest
process do not each pay a full pass.
"""

from __future__ import annotations

import asyncio
import gc
import sys
from typing import Any

RELEASE_EVERY = 256  # settles: every this many, one more reason for a pass
FORCE_AFTER = 32  # reasons: a pass at the next turn start even if the process is never idle
IDLE_S = 2.0  # seconds without a running turn before a due pass runs

_state: dict[str, Any] = {"enabled": False, "settles": 0, "modules": 0, "due": 0, "running": 0, "timer": None}


def enable() -> None:
    """Follow the policy in this process (the `agentd` entry point calls it once, before any session)."""
    _state["enabled"] = True


def settle() -> None:
    """A turn starts: collect what was made since the last settle and freeze what survived (after new
    imports, freeze without collecting); a full pass instead when `FORCE_AFTER` reasons are due."""
    if not _state["enabled"]:
        return
    _state["running"] += 1
    _disarm()
    _state["settles"] += 1
    if _state["settles"] % RELEASE_EVERY == 0:
        _state["due"] += 1
    if _state["due"] >= FORCE_AFTER:
        full_pass()
        return
    modules = len(sys.modules)
    if modules == _state["modules"]:
        gc.collect()
    _state["modules"] = modules
    gc.freeze()


def turn_ended() -> None:
    """A turn ended (each `settle` is paired with one): with no turn left running, a due pass is armed."""
    if not _state["enabled"]:
        return
    _state["running"] = max(0, _state["running"] - 1)
    _arm()


def release() -> None:
    """A session closed: what it holds in reference cycles is reclaimed by the next pass, armed now when no
    turn runs."""
    if not _state["enabled"]:
        return
    _state["due"] += 1
    _arm()


def full_pass() -> None:
    """Unfreeze, collect everything, freeze what survived (O(all objects))."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    _state["due"] = 0
    _state["modules"] = len(sys.modules)


def _arm() -> None:
    if _state["running"] or not _state["due"]:
        return
    _disarm()
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # no loop (the process is ending a one-shot run): the pass is moot
        return
    _state["timer"] = loop.call_later(IDLE_S, _idle)


def _disarm() -> None:
    timer = _state["timer"]
    if timer is not None:
        timer.cancel()
        _state["timer"] = None


def _idle() -> None:
    _state["timer"] = None
    if not _state["running"] and _state["due"]:
        full_pass()
