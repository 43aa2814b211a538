"""The process's garbage-collector policy (issue 16 §2: agentd's own work per model request does not grow with
the history; §1: nothing blocks the event loop for long).

Owns: when CPython's cyclic collector may walk what a process holds for long. A full collection visits every
tracked container in the process: the imported modules (~260,000 objects in a daemon, 160-190 ms of CPU on
the loop per pass on a 2-core CI machine) and every message of every open history. Each model request makes
the SDK copy its whole body; those copies outlive a young collection, and once enough of them are promoted
a full collection runs, so at 5,000 messages the collector, not agentd, made a request 3.6 times as
expensive as at 100 (measured by `python -m tests.benchmarks.daemon`, `loop_cpu_ratio`).

The policy (`gc.freeze`, the standard library's way to exempt long-lived objects from collections):
- `settle()`, called as each turn starts (agentd.core.session.Session.prompt), collects what was made since
  the last settle (a full collection, but frozen objects are not visited: its cost is that of the new
  objects, the previous turn's) and freezes what survived: the imports, the histories, the sessions. The
  turn's own collections then visit only what the turn makes. When modules were imported since the last
  settle (the first turns import the SDKs and build pydantic schemas: ~100,000 objects, ~95 ms a pass) it
  freezes without collecting: what was imported lives as long as the process.
- `release()`, called when a session closes, unfreezes all, so the closed session's reference cycles (the
  session, its context, its history) can be reclaimed; the next settle collects the whole heap once before it
  freezes again: O(all objects), ~170 ms on a 2-core CI machine, once per closed session, at the start of a
  turn (before its model request). Stock CPython runs such passes whenever enough objects were promoted: at
  5,000 messages, every few requests.
- every `RELEASE_EVERY` settles, a release too: cyclic garbage frozen by a settle that did not collect (after
  imports), or a concurrent turn's objects frozen while alive that became garbage later, are kept until a
  release; this bounds what can pile up.
Objects freed by reference counting (messages dropped by compression, the SDK's copies) are freed at once,
frozen or not.

Only a process that calls `enable()` (the `agentd` entry point, agentd.cli) follows it: in a library use or a
test process, `settle` and `release` do nothing, so thousands of sessions in one pytest process do not each
pay a full pass.
"""

from __future__ import annotations

import gc
import sys

RELEASE_EVERY = 256

_state = {"enabled": False, "settles": 0, "full_due": False, "modules": 0}


def enable() -> None:
    """Follow the policy in this process (the `agentd` entry point calls it once, before any session)."""
    _state["enabled"] = True


def settle() -> None:
    """Collect what was made since the last settle and freeze what survived; after a release (or every
    `RELEASE_EVERY` settles) collect everything first; after new imports, freeze without collecting."""
    if not _state["enabled"]:
        return
    _state["settles"] += 1
    modules = len(sys.modules)
    if _state["full_due"] or _state["settles"] % RELEASE_EVERY == 0:
        gc.unfreeze()
        gc.collect()
        _state["full_due"] = False
    elif modules == _state["modules"]:
        gc.collect()
    _state["modules"] = modules
    gc.freeze()


def release() -> None:
    """Unfreeze all, and have the next settle collect before it freezes: what a closed session held in
    reference cycles is reclaimed then (or by a collection CPython runs first)."""
    if _state["enabled"]:
        gc.unfreeze()
        _state["full_due"] = True
