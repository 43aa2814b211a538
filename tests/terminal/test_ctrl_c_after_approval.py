"""Ctrl-C during a turn cancels it whatever the client ran before (new-user H: Ctrl-C after an approval), on a
real pseudo-terminal: the running command is killed, the turn answered `[cancelled]`, the session usable after.
Each command is a `sleep` of an odd length, found in /proc by its arguments."""

from __future__ import annotations

import re
import secrets
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from agentd.testing.emulator import Emulator
from tests.terminal.screen import Terminal
from tests.terminal.test_chat import step

pytestmark = pytest.mark.terminal

DEADLINE_S = 60.0  # far below every sleep's length: a cancel that waits for the command fails


def _sleep(seconds: str) -> dict[str, Any]:
    return {"reply": [{"tool_use": {"name": "run_command", "input": {"command": f"sleep {seconds}"}}}]}


def _done(text: str) -> dict[str, Any]:
    return {"reply": [{"text": text}], "stop_reason": "end_turn"}


def _lengths(n: int) -> list[str]:
    """`n` sleep lengths of about 15 minutes no other process on the machine runs."""
    return [f"9{i}{secrets.randbelow(10**6):06d}.5" for i in range(n)]


def _running(seconds: str) -> bool:
    """True while a `sleep SECONDS` process exists (any pid namespace: /proc shows the sandbox's too)."""
    wanted = f"sleep\0{seconds}\0".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "cmdline").read_bytes().endswith(wanted) and "Z" not in _state(proc):
                return True
        except OSError:
            continue
    return False


def _state(proc: Path) -> str:
    return (proc / "stat").read_text().rpartition(")")[2].split()[0]


def _until(t: Terminal, pred: Any, what: str) -> None:
    """Pump the terminal until `pred()` (a readiness poll with a deadline, not synchronisation by sleeping)."""
    deadline = time.monotonic() + DEADLINE_S
    while not pred():
        assert time.monotonic() < deadline and t.child.isalive(), f"no {what}:\n{t.screen()}"
        t.pump(0.05)


def _cancel_while_running(t: Terminal, seconds: str, name: str) -> None:
    """The command runs, Ctrl-C: the turn is cancelled and the command killed, long before it would end."""
    _until(t, lambda: _running(seconds), f"sleep {seconds} running")
    step(t, f"{name} running", "in progress")
    t.key("ctrl-c")
    step(t, f"{name} cancelled", "[cancelled]")
    _until(t, lambda: not _running(seconds), f"sleep {seconds} killed")
    step(t, f"{name} prompt", "❯")


def test_ctrl_c_cancels_a_command_allowed_once(
    emulator: Emulator, workspace: Path, term_env: dict[str, str], terminals: Any
) -> None:
    """new-user H: Ctrl-C after an approval: `sleep 20` allowed with `y`, then Ctrl-C at "in progress 3 s":
    the command ran to its end and the turn went on; the Ctrl-C showed up at the next empty prompt as
    `[Ctrl-C again to exit]` (the question's prompt_toolkit application removed the turn's SIGINT handler
    when it closed). Now the turn is cancelled, the command killed, and the session answers the next prompt."""
    (long,) = _lengths(1)
    emulator.script([_sleep(long), _done("Still here.")])
    t = terminals(["--new"], term_env, workspace)
    step(t, "open", "❯", "new session")
    t.line("Wait a while.")
    step(t, "ask", f"$ sleep {long}", "Allow Run")
    t.type("y")
    _cancel_while_running(t, long, "allowed once")
    assert "[Ctrl-C again to exit]" not in t.transcript()
    t.line("Are you there?")
    step(t, "after", "Still here.")
    assert "[Ctrl-C again to exit]" not in t.transcript()
    assert len(emulator.journal) == 2  # the cancelled turn asked the model nothing after the command
    t.key("ctrl-d")
    assert t.exit_code() == 0
    assert t.garbage() == []


def test_ctrl_c_cancels_commands_allowed_always_in_this_turn_and_later_ones(
    emulator: Emulator, workspace: Path, term_env: dict[str, str], terminals: Any
) -> None:
    """new-user H: Ctrl-C after an approval: after an `a` (always allow `sleep`) answer, a later `sleep` the
    grant allowed without asking could not be cancelled. Now it can, in the same turn, in the next turn
    (the `a` in an earlier one) and in the one after that, and the session goes on."""
    first, second, third = _lengths(3)
    emulator.script([_sleep("0"), _sleep(first), _sleep(second), _sleep(third), _done("Still here.")])
    t = terminals(["--new"], term_env, workspace)
    step(t, "open", "❯", "new session")
    t.line("Sleep a moment, then longer.")
    step(t, "ask", "$ sleep 0", "Always allow `sleep` commands in this session (a)")
    t.type("a")
    _cancel_while_running(t, first, "same turn")
    t.line("Now wait longer.")
    _cancel_while_running(t, second, "next turn")
    t.line("And once more.")
    _cancel_while_running(t, third, "the turn after")
    assert t.transcript().count("Allow Run") == 0  # the grant allowed the three long ones, unasked
    t.line("Are you there?")
    step(t, "after", "Still here.")
    assert "[Ctrl-C again to exit]" not in t.transcript()
    t.key("ctrl-d")
    assert t.exit_code() == 0
    assert t.garbage() == []


def test_ctrl_c_cancels_after_a_rejection_and_the_pickers(
    emulator: Emulator, workspace: Path, term_env: dict[str, str], terminals: Any
) -> None:
    """new-user H: Ctrl-C after an approval, for every prompt_toolkit application the client runs: after an
    `n` answer in the same turn, after the /rewind and /resume pickers (left with Esc) and a `kill -INT`
    at the input line (its Ctrl-C there: `[Ctrl-C again to exit]`), a running command is still cancelled."""
    first, second = _lengths(2)
    emulator.script([_sleep("0"), _sleep(first), _sleep(second), _done("Still here.")])
    t = terminals(["--new"], term_env, workspace)
    step(t, "open", "❯", "new session")
    t.line("Try twice.")
    step(t, "ask", "$ sleep 0", "Reject (n)")
    t.type("n")
    step(t, "ask again", f"$ sleep {first}", "[approval · Reject]")
    t.type("y")
    _cancel_while_running(t, first, "after a rejection")
    t.line("/rewind")
    step(t, "rewind picker", "Rewind to before which prompt?")
    t.key("escape")
    step(t, "rewind left", re.compile(r"❯ /rewind\n+❯"))
    t.child.kill(signal.SIGINT)
    step(t, "sigint at the prompt", "[Ctrl-C again to exit]")
    t.line("Again.")
    step(t, "ask last", f"$ sleep {second}", "Allow Run")
    t.type("y")
    _cancel_while_running(t, second, "after the picker")
    t.line("Are you there?")
    step(t, "after", "Still here.")
    t.key("ctrl-d")
    assert t.exit_code() == 0
    assert t.garbage() == []
