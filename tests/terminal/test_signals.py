"""The terminal client ended by SIGTERM or SIGHUP (break12, new-user trial): as a cancel, then it leaves:
the running command's processes die, the sandbox's stand-ins are removed, exit 128 + the signal."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from agentd.testing.emulator import Emulator
from tests.terminal.test_chat import step


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_leave_the_terminal_client_clean(
    emulator: Emulator, workspace: Path, term_env: dict[str, str], terminals: Any, sig: signal.Signals
) -> None:
    """break12: SIGTERM or SIGHUP while a command runs (`sleep 60`) left the stand-ins in the workspace
    and the session's lock held. Now the turn is cancelled as Ctrl-C does and the client exits 128 + sig."""
    call = {"tool_use": {"name": "run_command", "input": {"command": "echo $$ > cmd.pid; sleep 60"}}}
    emulator.script([{"reply": [call], "stop_reason": "tool_use"}])
    t = terminals(["--new"], term_env, workspace)
    step(t, "open", "❯", "new session")
    t.line("/mode auto")
    t.wait_for("[mode · auto]")
    t.line("Run it.")
    deadline = time.monotonic() + 60
    while not (workspace / "cmd.pid").exists() or not (workspace / "cmd.pid").read_text().endswith("\n"):
        assert time.monotonic() < deadline and t.child.isalive(), t.screen()
        t.pump(0.05)  # a readiness poll with a deadline, not synchronisation by sleeping
    t.child.kill(sig)
    while t.child.isalive():
        assert time.monotonic() < deadline + 60, t.screen()
        t.pump(0.05)
    assert (t.child.exitstatus, t.child.signalstatus) == (128 + sig, None), t.screen()
    assert sorted(os.listdir(workspace)) == ["CHANGELOG.md", "cmd.pid"]
