"""How agentd starts a process for the model: in the sandbox, or under the process-lifetime helper.

Owns: `Launcher` (one per session: the `sandbox` mode, what this machine offers and the session's
`SandboxPolicy`), `Launch` and `SandboxRefused`. `Launcher.launch(argv, cwd, ...)`
returns the command line to start (in a new session, stdin from /dev/null) and what guards it:
- sandbox on: bubblewrap (Linux) or sandbox-exec (macOS) around `argv`;
- sandbox off or missing (`"auto"`), or the call asked to run outside it: on Linux the reaper helper
  (`agentd/sandbox/reaper.py`) around `argv`, so what the command leaves still dies with it;
- `"required"` with no sandbox, or a request to leave it: `SandboxRefused` (nothing runs).
A bubblewrap launch carries its `agentd.sandbox.guard.Guard` (the protected paths inside the workspace);
the caller calls `Launch.finish()` once the process has exited (a command: stand-ins removed, created
protected paths moved away; an MCP server from the user's configuration gets the read-only binds only).
In the sandbox the program's own installation stays visible even under `/tmp` or `/run`
(`agentd.sandbox.visible`). Used by `run_command` and for the stdio MCP servers agentd starts. Imports
only the standard library and `agentd.sandbox`; never pygls, lsprotocol, acp or agentd.adapters.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agentd.sandbox.bwrap import bwrap_argv, via_args_file
from agentd.sandbox.guard import Guard, TooManyProtected, readonly_hint
from agentd.sandbox.policy import SandboxPolicy
from agentd.sandbox.seatbelt import seatbelt_argv
from agentd.sandbox.status import SandboxMode, SandboxStatus
from agentd.sandbox.visible import program_paths

REAPER = Path(__file__).with_name("reaper.py")


class SandboxRefused(Exception):
    """The command may not run: `sandbox = "required"` and no sandbox, or a request to leave it.
    `str()` is the model-facing text."""


@dataclass(frozen=True)
class Launch:
    """What to start: `argv`; `sandboxed`: inside the sandbox; `tmpdir`: a private temporary folder the
    caller removes afterwards (macOS only); `guard`: the protected-path guard (bubblewrap only)."""

    argv: list[str]
    sandboxed: bool
    tmpdir: Path | None = None
    guard: Guard | None = None

    def finish(self, *, ran: bool = True) -> list[str]:
        """After the process exited (`ran` False: it never started): the guard's lines for the result
        (`Guard.finish`); call once."""
        return self.guard.finish(ran=ran) if self.guard is not None else []


class Launcher:
    """Starts model-requested processes for one session (see the module docstring)."""

    def __init__(self, mode: SandboxMode, status: SandboxStatus, policy: SandboxPolicy) -> None:
        self.mode: SandboxMode = mode
        self.status = status
        self.policy = policy

    @property
    def active(self) -> bool:
        """Commands run in the sandbox unless they ask to leave it."""
        return self.mode != "off" and self.status.available

    def launch(
        self,
        argv: list[str],
        cwd: Path,
        *,
        network: bool = False,
        unsandboxed: bool = False,
        config_env: Mapping[str, str] | None = None,
    ) -> Launch:
        """The command line for `argv` run in `cwd`. `network`: this process may use the network (an
        approved request or a rule); `unsandboxed`: it runs outside the sandbox (approved by the user);
        `config_env`: given when `argv` comes from the user's configuration (an MCP server): the
        environment configured for it; the paths its arguments name then stay visible too.
        Raises `SandboxRefused` under `sandbox = "required"` when it cannot run sandboxed, and when the
        workspace holds more protected paths than the sandbox can keep read-only."""
        if self.mode == "required" and not self.status.available:
            raise SandboxRefused(
                f'run_command is refused: sandbox = "required" but no sandbox works here ({self.status.problem}).'
            )
        if self.mode == "required" and unsandboxed:
            raise SandboxRefused(
                'run_command is refused: sandbox = "required" does not allow running outside the sandbox; '
                "run it without unsandboxed, or ask the user to run it."
            )
        if self.active and not unsandboxed:
            policy = self.policy.with_network(network or self.policy.network)
            policy = policy.with_visible(program_paths(argv, config_env))
            return self._sandboxed(argv, cwd, policy, after=config_env is None)
        return self._guarded(argv)

    def readonly_hint(self) -> str:
        """The line for a sandboxed command that failed on a read-only path: what is protected and how to
        ask for more (`agentd.sandbox.guard.readonly_hint`)."""
        return readonly_hint(self.mode == "required")

    def _sandboxed(self, argv: list[str], cwd: Path, policy: SandboxPolicy, *, after: bool) -> Launch:
        if self.status.backend == "seatbelt":
            tmp = Path(tempfile.mkdtemp(prefix="agentd-cmd-"))
            return Launch(seatbelt_argv(policy, tmp, argv), True, tmp)
        assert self.status.path is not None
        try:
            guard = Guard(policy, after=after)
        except TooManyProtected as exc:  # more protected paths than can stay read-only (break12 S1)
            raise SandboxRefused(str(exc)) from None
        line, guard.args_file = via_args_file(bwrap_argv(self.status.path, guard.policy(), cwd, argv))
        return Launch(line, True, guard=guard)

    def _guarded(self, argv: list[str]) -> Launch:
        if self.status.cleanup == "subreaper" and sys.platform.startswith("linux"):
            helper = [sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), "--"]
            return Launch([*helper, *argv], False)
        return Launch(list(argv), False)
