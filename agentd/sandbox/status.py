"""Does the sandbox work here, and what protects commands when it does not (issue 12 §1, `agentd doctor`).

Owns: `SandboxStatus`, `detect()` (found once per process: bubblewrap on Linux, probed by running it;
`sandbox-exec` on macOS), `Fact` and `protections()`, the one list of guarantees that `agentd doctor`,
`agentd/session/status`, the start-up warning and docs/security.md name. A fact with `ok=False` is a
missing protection. Imports only the standard library and `agentd.sandbox`.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from dataclasses import dataclass
from typing import Literal

import agentd.sandbox.bwrap as bwrap
import agentd.sandbox.seatbelt as seatbelt
from agentd.sandbox.process import is_dumpable

Backend = Literal["bubblewrap", "seatbelt"]
SandboxMode = Literal["auto", "required", "off"]

INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt install bubblewrap; Fedora: dnf install bubblewrap; "
    "Arch: pacman -S bubblewrap)"
)


@dataclass(frozen=True)
class SandboxStatus:
    """What this machine offers. `backend`: the sandbox found (None: none); `available`: it ran a probe
    command; `problem`: why it is not available, with what to do; `cleanup`: what kills the processes a
    command leaves when it runs without the sandbox (`subreaper`: agentd's helper; `process-group`: only
    the command's group)."""

    backend: Backend | None
    available: bool
    path: str | None = None
    version: str | None = None
    problem: str | None = None
    cleanup: Literal["subreaper", "process-group"] = "subreaper"

    def label(self) -> str:
        """`bubblewrap 0.8.0 (/usr/bin/bwrap)`, `sandbox-exec`, or `none`."""
        if self.backend is None:
            return "none"
        name = "bubblewrap" if self.backend == "bubblewrap" else "sandbox-exec"
        ver = f" {self.version}" if self.version else ""
        return f"{name}{ver} ({self.path})" if self.path else name + ver

    def to_json(self) -> dict[str, object]:
        return {
            "backend": self.backend,
            "available": self.available,
            "path": self.path,
            "version": self.version,
            "problem": self.problem,
        }


_lock = threading.Lock()
_found: dict[str, SandboxStatus] = {}  # a fact about this machine, found once per process


def detect(platform: str | None = None, bwrap_path: str | None = None) -> SandboxStatus:
    """The sandbox this machine offers (cached per process and arguments). `bwrap_path` overrides the
    search on PATH (tests pass a missing path to get "not installed")."""
    plat = platform or sys.platform
    key = f"{plat}:{bwrap_path}"
    with _lock:
        if key not in _found:
            _found[key] = _detect(plat, bwrap_path)
        return _found[key]


def _detect(platform: str, bwrap_path: str | None) -> SandboxStatus:
    if platform == "darwin":
        ok = os.access(seatbelt.SANDBOX_EXEC, os.X_OK)
        return SandboxStatus(
            "seatbelt",
            ok,
            seatbelt.SANDBOX_EXEC,
            problem=None if ok else f"{seatbelt.SANDBOX_EXEC} is missing",
            cleanup="process-group",
        )
    if not platform.startswith("linux"):
        return SandboxStatus(
            None, False, problem=f"no sandbox backend for {platform}", cleanup="process-group"
        )
    path = bwrap_path if bwrap_path is not None else shutil.which("bwrap")
    if not path or not os.access(path, os.X_OK):
        return SandboxStatus(
            "bubblewrap", False, problem=f"bubblewrap (bwrap) is not installed; {INSTALL_HINT}"
        )
    problem = bwrap.probe(path)
    if problem is not None:
        problem = (
            f"{path} cannot create its namespaces here: {problem}. Unprivileged user namespaces may be "
            "disabled (sysctl kernel.unprivileged_userns_clone=1, or an AppArmor profile for bwrap on "
            "Ubuntu 24.04+), or the container forbids them"
        )
    return SandboxStatus("bubblewrap", problem is None, path, bwrap.version(path), problem)


@dataclass(frozen=True)
class Fact:
    """One guarantee: `name` (`file system`, `network`, ...), whether it holds, and the sentence."""

    name: str
    ok: bool
    text: str

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "ok": self.ok, "text": self.text}


def protections(status: SandboxStatus, mode: SandboxMode, network: bool = False) -> list[Fact]:
    """What protects `run_command` with this status and `sandbox` mode (`network`: `sandbox.network`)."""
    on = mode != "off" and status.available
    facts = [
        Fact("sandbox", on, _sandbox_text(status, mode)),
        Fact(
            "environment",
            True,
            "API keys and variables named like credentials (*TOKEN*, *SECRET*, *API_KEY*) are removed",
        ),
    ]
    if on:
        facts += [
            Fact(
                "file system", True, "commands write the workspace only; the rest is read-only, /tmp private"
            ),
            Fact("secrets", True, "agentd's data dir and config and your credential stores are not visible"),
            Fact(
                "network",
                not network,
                "commands use the network only when allowed (a rule or an approval)"
                if not network
                else "sandbox.network = true: every command may use the network",
            ),
        ]
    else:
        facts += [
            Fact("file system", False, "commands can write anywhere your user can, not only the workspace"),
            Fact(
                "secrets",
                False,
                "commands can read agentd's data dir and config and your credential stores (~/.ssh, ~/.aws, ...)",
            ),
            Fact("network", False, "commands can use the network"),
        ]
    facts.append(_process_fact(status, on))
    facts.append(_cleanup_fact(status, on))
    return facts


def _sandbox_text(status: SandboxStatus, mode: SandboxMode) -> str:
    if mode == "off":
        return f'sandbox = "off": commands run without a sandbox ({status.label()} found)'
    if status.available:
        return f"commands run in {status.label()} (sandbox = {mode!r})"
    refuse = "; run_command is refused" if mode == "required" else "; commands run without it"
    return f"no sandbox: {status.problem}{refuse}"


def _process_fact(status: SandboxStatus, on: bool) -> Fact:
    if on and status.backend == "bubblewrap":
        return Fact("agentd's process", True, "commands cannot see agentd's process (own pid namespace)")
    if on:
        return Fact("agentd's process", True, "commands cannot inspect processes outside their sandbox")
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    if not root and not is_dumpable():
        return Fact(
            "agentd's process",
            True,
            "commands cannot read agentd's environment (agentd is not dumpable), but can see its process",
        )
    return Fact(
        "agentd's process",
        False,
        "commands can read agentd's environment, with the API key, from /proc/<agentd pid>/environ"
        + (" (they run as root)" if root else ""),
    )


def _cleanup_fact(status: SandboxStatus, on: bool) -> Fact:
    if on and status.backend == "bubblewrap":
        return Fact("process cleanup", True, "every process a command starts dies with it (pid namespace)")
    if status.cleanup == "subreaper":
        return Fact("process cleanup", True, "every process a command starts dies with it (subreaper helper)")
    return Fact(
        "process cleanup", False, "processes that leave the command's process group (setsid) can survive it"
    )


def missing(facts: list[Fact]) -> list[Fact]:
    """The facts that do not hold: the missing protections."""
    return [f for f in facts if not f.ok]
