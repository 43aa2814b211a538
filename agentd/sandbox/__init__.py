"""The sandbox for `run_command` and the processes agentd starts for the model (issue 12; docs/security.md).

Modules: `policy` (what a sandboxed process may touch), `bwrap` (Linux backend), `seatbelt` (macOS
backend), `status` (does it work here; the list of guarantees `agentd doctor` prints), `launcher` (how a
process is started: sandboxed or under the helper), `visible` (what a started program must still see
under a private folder: its own installation), `guard` and `standins` (protected paths inside the workspace), `reaper` (the process-lifetime helper, run as a file),
`process` (agentd's own process hardening), `env` (the child environment). Imports only the standard
library and `agentd.permissions.protected`; never pygls, lsprotocol, acp or agentd.adapters.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from agentd.permissions.protected import ProtectedPaths
from agentd.sandbox.launcher import Launch, Launcher, SandboxRefused
from agentd.sandbox.policy import SandboxPolicy, build_policy
from agentd.sandbox.status import Fact, SandboxMode, SandboxStatus, detect, missing, protections

__all__ = [
    "Fact",
    "Launch",
    "Launcher",
    "SandboxMode",
    "SandboxPolicy",
    "SandboxRefused",
    "SandboxStatus",
    "build_policy",
    "detect",
    "launcher_for",
    "missing",
    "protections",
    "say_missing_once",
    "wire_state",
]

_said: set[str] = set()  # lines already written by this process ("say so once")
_said_lock = threading.Lock()


def launcher_for(
    mode: SandboxMode,
    roots: Iterable[Path | str],
    protected: ProtectedPaths,
    *,
    network: bool = False,
    writable: Iterable[Path | str] = (),
    readable: Iterable[Path | str] = (),
    status: SandboxStatus | None = None,
) -> Launcher:
    """The launcher of one session: `mode` (`sandbox.mode`), the workspace `roots`, the user's protected
    paths, `sandbox.network`, `sandbox.writable` and `sandbox.readable`; `status` defaults to `detect()`."""
    found = status if status is not None else detect()
    policy = build_policy(roots, protected, extra_writable=writable, readable=readable, network=network)
    return Launcher(mode, found, policy)


def missing_line(launcher: Launcher) -> str | None:
    """`[Sandbox] ...`: why commands run without the sandbox and which protections are missing; None when
    the sandbox is on and nothing is missing."""
    facts = protections(launcher.status, launcher.mode, launcher.policy.network)
    gaps = [f.name for f in missing(facts) if f.name != "sandbox"]
    if launcher.active and not gaps:
        return None
    if launcher.mode == "off":
        why = 'sandbox = "off"'
    elif launcher.active:
        why = f"in {launcher.status.label()}"
    else:
        why = f"no sandbox: {launcher.status.problem}"
    tail = f"; missing protections: {', '.join(gaps)} (agentd doctor explains)" if gaps else ""
    return f"[Sandbox] {why}{tail}"


def say_missing_once(launcher: Launcher, write: Callable[[str], None]) -> None:
    """Write `missing_line()` through `write` the first time this process meets it (issue 12: "say so
    once when not")."""
    line = missing_line(launcher)
    if line is None:
        return
    with _said_lock:
        if line in _said:
            return
        _said.add(line)
    write(line)


def wire_state(launcher: Launcher | None) -> dict[str, object]:
    """The `sandbox` object of `agentd/session/status` (PROTOCOL.md §6.8): `{mode, active, backend,
    label, missing}` where `missing` names the protections that do not hold (as `agentd doctor`)."""
    if launcher is None:
        return {"mode": "off", "active": False, "backend": None, "label": "none", "missing": []}
    facts = protections(launcher.status, launcher.mode, launcher.policy.network)
    return {
        "mode": launcher.mode,
        "active": launcher.active,
        "backend": launcher.status.backend if launcher.active else None,
        "label": launcher.status.label(),
        "missing": [f.name for f in missing(facts)],
    }
