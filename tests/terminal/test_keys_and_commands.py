"""The terminal client's keys, slash commands and command approvals on a real pseudo-terminal (issue 14
Part 1): completion, multi-line input, `@path` attachments, /help /cost /plan /mode /model /sessions, the
newest session continued by a bare `agentd`, Ctrl-C twice to leave; a command's approval with the prefix
option ("always" for `ls`), allow once, deny, a failure's reason; the workspace trust question."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from tests.terminal.test_chat import step


def _text_of(message: dict[str, Any]) -> str:
    content = message["content"]
    return content if isinstance(content, str) else "\n".join(b.get("text", "") for b in content)


def test_commands_completion_mentions_and_leaving(
    emulator: Emulator, workspace: Path, term_env: dict[str, str], terminals: Any
) -> None:
    emulator.script([
        {"reply": [{"text": "First."}], "stop_reason": "end_turn"},  # agentd run
        {"reply": [{"text": "It has one release, 0.3.0."}], "stop_reason": "end_turn"},
        {"reply": [{"text": "Same answer from the other model."}], "stop_reason": "end_turn"},
    ])  # fmt: skip
    out = subprocess.run([sys.executable, "-m", "agentd", "run", "--workspace", str(workspace), "--prompt", "Hi"],
                         env=term_env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
    assert out.returncode == 0, out.stderr
    t = terminals([], term_env, workspace)  # no arguments: the workspace's newest session
    step(t, "newest", "❯", "resumed · 1 turn · Hi", "> Hi", "First.")

    t.line("/help")
    step(t, "help", "/quit", "/compact", "/resume [ID|N]", "Ctrl-C", "cancel the turn")
    t.type("/co")
    t.key("tab")
    step(t, "complete", "/cost", "/compact", "summarise the history now")
    t.key("escape")
    t.key("ctrl-c")  # clears the line
    t.line("/cost")
    step(t, "cost", "cache share", "requests       1", "context        ")

    t.type("What is in @CHANGE")
    t.key("tab")
    step(t, "mention", "@CHANGELOG.md", "@CHANGELOG.md")
    t.key("alt-enter")
    t.line("Answer in one line.")
    step(t, "attached", "It has one release", "[attached · CHANGELOG.md]")
    sent = _text_of(emulator.journal[-1]["body"]["messages"][-1])
    assert "What is in @CHANGELOG.md\nAnswer in one line." in sent
    assert "CHANGELOG.md\n```\n# Changelog\n\n## 0.3.0\n- First release.\n\n```" in sent

    t.line("/plan")
    step(t, "plan", "no plan yet", "todo_write")
    t.line("/mode acceptEdits")
    step(t, "mode", "[mode · acceptEdits]", "[mode · acceptEdits]")
    t.line("/mode bogus")
    step(t, "bad mode", "unknown mode 'bogus'", "use one of default, acceptEdits, readOnly, auto")
    t.line("/model claude-haiku-4-5")
    step(t, "model", "anthropic claude-haiku-4-5 from the next prompt", "anthropic claude-haiku-4-5")
    t.line("And now?")
    step(t, "other model", "Same answer from the other model.", "claude-haiku-4-5 · acceptEdits")
    assert emulator.journal[-1]["body"]["model"] == "claude-haiku-4-5"
    t.line("/sessions")
    step(t, "sessions", "(this one)", "(this one)", "Hi")
    t.line("/nope")
    step(t, "unknown", "unknown command /nope", "/help lists the commands")

    t.key("ctrl-c")
    step(t, "first ctrl-c", "[Ctrl-C again to exit]", "[Ctrl-C again to exit]")
    t.key("ctrl-c")
    assert t.exit_code() == 0
    assert "continue it with: agentd --resume" in t.transcript().replace("\n", " ")
    assert t.garbage() == []


LS = {"tool_use": {"name": "run_command", "input": {"command": "ls -a"}}}
LS_AGAIN = {"tool_use": {"name": "run_command", "input": {"command": "ls ."}}}
CAT = {"tool_use": {"name": "run_command", "input": {"command": "cat missing.txt"}}}
RM = {"tool_use": {"name": "run_command", "input": {"command": "rm -rf build"}}}
TOUCH = {"tool_use": {"name": "run_command", "input": {"command": "touch x"}}}


def test_command_approvals_from_the_keyboard(
    emulator: Emulator, workspace: Path, term_env: dict[str, str], terminals: Any
) -> None:
    """The options are the gate's: "always" for `ls -a` is the `ls` prefix (key a), which then allows
    `ls .` without asking; `y` allows once (a failure shows its reason), `n` rejects, Ctrl-C at the question
    cancels the turn. The workspace's hooks
    are not trusted (the question answered no), and the session says so."""
    (workspace / ".agentd").mkdir()
    (workspace / ".agentd" / "config.toml").write_text('[[hooks.turn_end]]\ncommand = "true"\n')
    emulator.script([{"reply": [LS]}, {"reply": [LS_AGAIN]}, {"reply": [CAT]}, {"reply": [RM]},
                     {"reply": [{"text": "All done."}], "stop_reason": "end_turn"}, {"reply": [TOUCH]}])  # fmt: skip
    t = terminals(["--new"], term_env, workspace)
    step(t, "trust", "Trust this workspace and run them? [y/N]", "turn_end: true")
    t.line("n")
    step(t, "open", "❯", "new session", "this workspace is not trusted")
    t.line("Look around.")
    step(t, "ask ls", "Always allow `ls` commands in this session (a)", "$ ls -a", f"in {workspace}")
    t.type("a")
    step(t, "ask cat", "$ cat missing.txt", "● Run `ls -a`", "● Run `ls .`")
    t.type("y")
    step(t, "ask rm", "$ rm -rf build", "● Run `cat missing.txt` · failed: exit code 1")
    t.type("n")
    shown = step(
        t, "done", "All done.", "[approval · Reject]", "● Run `rm -rf build` · failed: The user rejected"
    )
    assert shown.count("Allow Run") == 0  # every question left the screen once answered
    t.line("One more.")
    step(t, "ask touch", "$ touch x", "Allow Run `touch x`?")
    t.key("ctrl-c")  # at the question: the turn is cancelled, nothing runs
    step(t, "cancelled at the question", "[cancelled]", "[approval · cancelled the turn]")
    assert not (workspace / "x").exists()
    t.key("ctrl-d")
    assert t.exit_code() == 0
    assert t.garbage() == []


def test_a_session_that_cannot_be_opened_is_one_line_and_its_exit_code(
    workspace: Path, term_env: dict[str, str], terminals: Any
) -> None:
    """`agentd --resume ID` on a terminal with an unknown id: the error of `agentd run --resume` (exit 3)."""
    t = terminals(["--resume", "sess_nope"], term_env, workspace)
    assert t.exit_code() == 3
    assert "agentd: " in t.transcript() and "sess_nope" in t.transcript()
    assert t.garbage() == []


def test_the_terminal_flags_with_pipes_are_a_usage_error(workspace: Path, term_env: dict[str, str]) -> None:
    """With pipes `agentd` serves an editor: `--new` and `--workspace` belong to the terminal client."""
    out = subprocess.run([sys.executable, "-m", "agentd", "--new"], env=term_env, capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL, cwd=workspace)  # fmt: skip
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr.startswith("agentd: --workspace and --new are for the terminal client")
