"""Defects found by using the terminal client as a demanding user would (issue 14, break14): slash commands
with wrong arguments, a `@path` typo, a command whose output is longer than the agent is shown, no API key,
Ctrl-Z;
each on a real pseudo-terminal against the emulator, the screen read as a person sees it."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from agentd.testing.emulator import Emulator
from tests.terminal.screen import Terminal
from tests.terminal.test_chat import run_a, step

pytestmark = pytest.mark.terminal

SEQ = {"tool_use": {"name": "run_command", "input": {"command": "seq 10000"}}}


def test_wrong_arguments_a_missing_mention_and_a_cut_output(
    emulator: Emulator, workspace: Path, term_env: dict[str, str], terminals: Any
) -> None:
    """issue 14 (break14): on a 20x80 terminal, `/compact now`, `/new please`, `/sessions foo` ran as if
    nothing followed them; `/model claude sonnet 4` switched the session to a model name with spaces;
    `/mode nonsense` named three of the four modes; `@src/parsr.py` (a typo) was dropped without a word;
    `seq 10000` was `exit 0 · 6777 lines of output` (lines of the cut text the agent got). Each is now an
    error line that says what the command takes (and nothing changes), a note, or the output's size."""
    emulator.script([{"reply": [SEQ]}, {"reply": [{"text": "Counted."}], "stop_reason": "end_turn"}])
    t = terminals(["--new"], term_env, workspace, cols=80, rows=20)
    step(t, "open", "❯", "new session")
    for line, said in [
        ("/compact now", "/compact takes no argument (not 'now')"),
        ("/new please", "/new takes no argument (not 'please')"),
        ("/sessions foo", "/sessions takes `all` or nothing, not 'foo'"),
        ("/model claude sonnet 4", "a model name is one word"),
        ("/mode nonsense", "use one of default, acceptEdits, readOnly, auto"),
    ]:
        t.line(line)
        step(t, line, said)
    t.line("/model")
    step(t, "model kept", "[model · anthropic claude-sonnet-4-6")
    t.line("Count with @src/parsr.py and @CHANGELOG.md")
    step(t, "typo", "Allow Run `seq 10000`?", "[@src/parsr.py: no such file in the workspace; not attached]",
         "[attached · CHANGELOG.md]")  # fmt: skip
    t.type("y")
    shown = step(t, "cut output", "Counted.", "│ … (earlier output)", "│ 10000")
    said = " ".join(t.transcript().split())  # the tool line wraps at 80 columns
    assert "● Run `seq 10000` · exit 0 · 48.9 kB of output, its middle left out for the agent" in said
    assert "more lines" not in shown
    t.key("ctrl-d")
    assert t.exit_code() == 0


def test_no_api_key_names_the_terminals_remedy(
    workspace: Path, term_env: dict[str, str], terminals: Any
) -> None:
    """issue 14 (break14): without a key the client said to choose another provider with `--provider`, a
    flag `agentd` does not have (it is `agentd run`'s); it names the variable to set in the terminal, or
    config.toml, and exits 2."""
    env = {k: v for k, v in term_env.items() if k != "ANTHROPIC_API_KEY"}
    t = terminals(["--new"], env, workspace)
    assert t.exit_code() == 2
    shown = " ".join(t.transcript().split())
    assert "set ANTHROPIC_API_KEY in this terminal's environment" in shown and "config.toml" in shown
    assert "--provider" not in shown
    assert t.garbage() == []


def test_ctrl_z_suspends_the_client_at_the_prompt_and_during_a_turn(
    emulator: Emulator, workspace: Path, term_env: dict[str, str], tmp_path: Path
) -> None:
    """issue 14 (break14): Ctrl-Z at the prompt put a literal ^Z into the input (sent to the model with the
    next prompt) instead of suspending the client as every terminal program does; run from an interactive
    shell, Ctrl-Z stops it (at the prompt and during a turn) and `fg` brings it back where it was."""
    emulator.script([{"reply": [{"text": "First answer."}], "stop_reason": "end_turn"},
                     {"reply": [{"text": "Second answer."}], "stop_reason": "end_turn"}])  # fmt: skip
    sh = Terminal(["/bin/bash", "--norc", "--noprofile", "-i"], {**term_env, "PS1": "$ "}, str(workspace))
    try:
        sh.line(f"{sys.executable} -m agentd --new")
        step(sh, "open", "❯", "new session")
        sh.type("\x1a")
        step(sh, "stopped at the prompt", "Stopped")
        sh.line("fg")
        sh.wait_for(re.compile(r"fg\n.*\n❯", re.S))
        sh.line("once")
        shown = step(sh, "answered", "First answer.", "❯ once")
        assert "^Z" not in shown
        sh.line("twice")
        sh.type("\x1a")
        sh.wait_for(re.compile(r"Stopped(.|\n)*Stopped"))
        sh.line("fg")
        step(sh, "the turn went on", "Second answer.")
        sh.key("ctrl-d")
        sh.wait_for("agentd --resume", where="transcript")
    finally:
        sh.close()


def test_a_resume_that_fails_keeps_the_session_open_now(
    emulator: Emulator, workspace: Path, term_env: dict[str, str], terminals: Any, tmp_path: Path
) -> None:
    """issue 14 (break14), the T7 class: `/resume ID` of a session whose folder was deleted closed the
    session open now and then failed (`no session` under the input); only a held or unknown id was checked
    before. The next session is opened first and the one open now closed after, so any failure keeps it."""
    gone = tmp_path / "gone"
    gone.mkdir()
    emulator.script([{"reply": [{"text": "Session A says hello."}], "stop_reason": "end_turn"},
                     {"reply": [{"text": "Still here."}], "stop_reason": "end_turn"}])  # fmt: skip
    a = run_a(term_env, gone)
    shutil.rmtree(gone)
    t = terminals(["--new"], term_env, workspace)
    shown = step(t, "open", "❯", "new session")
    here = re.search(r"sess_\w+", shown).group(0)  # type: ignore[union-attr]
    t.line(f"/resume {a}")
    step(t, "refused", "which no longer exists", "claude-sonnet-4-6 · default")
    t.line("/sessions")
    step(t, "still open", f"{here}", "(this one)")
    t.line("Are you there?")
    step(t, "answered", "Still here.")
    t.key("ctrl-d")
    step(t, "left", "continue it with: agentd --resume", f"[session {here} kept", where="transcript")
    assert t.exit_code() == 0


def test_a_typed_escape_sequence_is_dropped_not_a_traceback(
    emulator: Emulator, workspace: Path, term_env: dict[str, str], terminals: Any
) -> None:
    """issue 14 (break14): `ESC [ 31 m` typed (or pasted without bracketed paste) at the prompt or at an
    approval was taken by prompt_toolkit for a mouse report, whose handler failed: a traceback over the
    screen and the client stuck at "Press ENTER to continue". Mouse reporting is never on; such a
    sequence is dropped and the rest of the line kept."""
    emulator.script([{"reply": [{"tool_use": {"name": "run_command", "input": {"command": "ls -a"}}}]},
                     {"reply": [{"text": "Listed."}], "stop_reason": "end_turn"}])  # fmt: skip
    t = terminals(["--new"], term_env, workspace)
    step(t, "open", "❯", "new session")
    t.type("a\x1b[31mb\x1b[0;1mc")
    t.pump(0.5)
    t.key("enter")
    step(t, "asked", "Allow Run `ls -a`?", "❯ abc")
    t.type("\x1b[31m")
    t.pump(0.5)
    t.type("y")
    step(t, "answered", "Listed.", "[approval · Allow once]")
    t.key("ctrl-d")
    assert t.exit_code() == 0
