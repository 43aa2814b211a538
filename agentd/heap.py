"""The process's garbage-collector policy (issue 16 §2: agentd's own work per model request does not grow with
the history; §1: nothing blocks the event loop for long).

Owns: when CPython's cyclic collector may walk what a process holds for long. A full collection visits every
tracked container in the process: the imported modules (~260,000 objects in a daemon, 160-190 ms of CPU on
the loop per pass on a 2-core CI machine) and every message of every open history. Each model request makes
the SDK copy its whole body; those copies outlive a young collection, and once enough of them are promoted
a full collection runs, so at 5,000 messages the collector, not agentd, made a request 3.6 times as
expensive as at 100 (measured by `python -m tests.benchmarks.daemon`, `loop_cpu_ratio`).

The policy (`gc.freeze`, the standard library's way to exempt long-lived objects from collections):
- `settle()`, called as each turn starts (agentd.core.session.Session.prompt), freezes what the process holds
  (the imports, the histories, the sessions; O(1)): the turn's collections visit only what was made since.
- `release()`, called when a session closes, unfreezes all, so the closed session's reference cycles (the
  session, its context, its history) can be reclaimed; the next settle then runs one full collection before
  it freezes again. That pass is the one cost left: O(all objects), ~170 ms on a 2-core CI machine, once per
  closed session, at the start of a turn (before its model request); stock CPython runs such passes
  whenever enough objects were promoted, at 5,000 messages every few requests.
- every `RELEASE_EVERY` settles, a release too: an object frozen while alive that becomes cyclic garbage
  later (a finished task, an exception and its frames) is kept until a release; this bounds what can pile up.
Objects freed by reference counting (messages dropped by compression, the SDK's copies) are freed at once,
frozen or not.

Only a process that calls `enable()` (the `agentd` entry point, agentd.cli) follows it: in a library use or a
test process, `settle` and `release` do nothing, so thousands of sessions in one pytest process do not each
pay a full pass.
"""

from __future__ import annotations

import gc
import logging

RELEASE_EVERY = 256

log = logging.getLogger("agentd.heap")
_state = {"enabled": False, "settles": 0, "full_due": False}


def enable() -> None:
    """Follow the policy in this process (the `agentd` entry point calls it once, before any session)."""
    _state["enabled"] = True


def settle() -> None:
    """Freeze what the process holds; after a release (or every `RELEASE_EVERY` settles) collect first."""
    if not _state["enabled"]:
        return
    _state["settles"] += 1
    if _state["full_due"] or _state["settles"] % RELEASE_EVERY == 0:
        gc.unfreeze()
        gc.collect()
        _state["full_due"] = False
    gc.freeze()


def release() -> None:
    """Unfreeze all, and have the next settle collect before it freezes: what a closed session held in
    reference cycles is reclaimed then (or by a collection CPython runs first)."""
    if _state["enabled"]:
        gc.unfreeze()
        _state["full_due"] = True
