"""The interactive terminal client through a real pseudo-terminal (issue 14 Part 1 acceptance): open, prompt,
stream, a retry, the plan, an approval answered from the keyboard with the diff on screen, a cancel with
Ctrl-C, /compact, /resume of another session, exit; then the same session continued with
`agentd --resume ID` in a new terminal. Each step's screen is compared with what it must show, and no screen
may show escape-code debris or a traceback."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentd.testing.emulator import Emulator
from tests.terminal.screen import Terminal

pytestmark = pytest.mark.terminal

PLAN = [{"content": "Read CHANGELOG.md", "status": "in_progress"},
        {"content": "Add the entry under Unreleased", "status": "pending"}]  # fmt: skip
EDIT = {"path": "CHANGELOG.md", "old_string": "## 0.3.0",
        "new_string": "## Unreleased\n- Fix the parser crash on empty input.\n\n## 0.3.0"}  # fmt: skip
MARKER = "Summarize the conversation below"
ANSWERS: list[dict[str, Any]] = [
    {"reply": [{"text": "Session A says hello."}], "stop_reason": "end_turn"},  # agentd run (session A)
    {"fault": {"http": 529, "headers": {"retry-after-ms": "1500"}}},  # session B's first request: overloaded
    {"reply": [{"text": "I'll plan this first.\n\nThe entry goes under a **new heading**.\n\n"},
               {"tool_use": {"name": "todo_write", "input": {"todos": PLAN}}}]},
    {"reply": [{"tool_use": {"name": "read_file", "input": {"path": "CHANGELOG.md"}}}]},
    {"reply": [{"tool_use": {"name": "edit_file", "input": EDIT}}]},
    {"reply": [{"text": "Added the entry under `## Unreleased`."}], "stop_reason": "end_turn"},
    {"reply": [{"text": "Part one of a very long essay. "}, {"text": "Part two never arrives."}],
     "stop_reason": "end_turn", "hold_after_events": 6, "gate": "held"},  # cancelled with Ctrl-C
    {"reply": [{"text": "I added the changelog entry."}], "stop_reason": "end_turn"},  # agentd --resume B
]  # fmt: skip


def step(t: Terminal, name: str, wait: str | re.Pattern[str], *present: str, where: str = "screen") -> str:
    """One step's screen capture: wait for `wait`, then every text of `present` is shown and nothing is
    escape-code debris or a traceback. The capture is kept as `<name>.txt` in $AGENTD_TEST_SCREENS, if set."""
    t.wait_for(wait, where=where)
    shown = t.settle()
    if where == "transcript":
        shown = t.transcript()
    if os.environ.get("AGENTD_TEST_SCREENS"):
        (Path(os.environ["AGENTD_TEST_SCREENS"]) / f"{name}.txt").write_text(shown + "\n", encoding="utf-8")
    missing = [p for p in present if p not in shown]
    assert missing == [], f"step {name}: {missing} not shown:\n{shown}"
    assert t.garbage() == [], f"step {name}: escape-code debris or a traceback:\n{shown}"
    return shown


def run_a(env: dict[str, str], ws: Path) -> str:
    """Session A, one turn through `agentd run`; its id."""
    out = subprocess.run([sys.executable, "-m", "agentd", "run", "--workspace", str(ws), "--prompt", "Hello A"],
                         env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return next(line for line in out.stderr.splitlines() if line.startswith("[session "))[9:-1]


def test_a_session_in_the_terminal_client(
    emulator: Emulator, workspace: Path, term_env: dict[str, str], terminals: Any, tmp_path: Path
) -> None:
    (workspace / ".agentd").mkdir()
    (workspace / ".agentd" / "config.toml").write_text("[context]\nkeep_recent_messages = 2\n")
    emulator.script({"compaction_marker": MARKER, "answers": ANSWERS})
    a = run_a(term_env, workspace)

    t = terminals(["--new"], term_env, workspace)
    step(t, "open", "❯", "new session", "/help · Enter sends", "claude-sonnet-4-6 · default")

    t.line("Add a CHANGELOG entry for the parser fix.")
    step(t, "retry", "retrying in", "retrying in 1.5 s", where="transcript")
    shown = step(t, "approval", "Allow once", "I'll plan this first.", "new heading", "[~] Read CHANGELOG.md",
                 "● Read CHANGELOG.md", "--- a/CHANGELOG.md", "+## Unreleased",
                 "+- Fix the parser crash on empty input.", "Always allow edit_file in this session (a)",
                 "Reject (n)")  # fmt: skip
    assert "Allow Edit CHANGELOG.md?" in shown
    t.type("y")
    shown = step(
        t, "stream", "Added the entry", "[approval · Allow once]", "● Edit CHANGELOG.md", "## Unreleased"
    )
    assert " - First release.\n[approval · Allow once]" in shown  # the whole diff stays once answered
    assert "## Unreleased\n- Fix the parser crash" in (workspace / "CHANGELOG.md").read_text()

    t.line("Write a long essay.")
    assert emulator.wait_reached("held", timeout=30)
    step(t, "streaming", "Part one of a very long essay.", "working", "Ctrl-C cancels")
    t.key("ctrl-c")
    step(t, "cancel", "[cancelled]", "Part one of a very long essay.")
    assert "Part two never arrives." not in t.transcript()

    t.line("/compact")
    step(t, "compact", "[compacted ·", "messages]")

    t.line(f"/resume {a}")
    step(t, "resume", "Session A says hello.", f"{a} · resumed · 1 turn", "> Hello A")
    b = next(p.name for p in (Path(term_env["AGENTD_DATA_DIR"]) / "sessions").iterdir() if p.name != a)
    assert f"agentd --resume {b}]" in t.transcript().replace("\n", " ")  # the session switched from is kept

    t.key("ctrl-d")
    assert t.exit_code() == 0
    assert t.garbage() == []

    again = terminals(["--resume", b], term_env, tmp_path)  # another folder: the session keeps its own
    # the session was compacted: a resume shows the summary and the turns from the compaction's on (issue 16's
    # paged load; earlier pages are agentd/session/history's), not the turns the summary replaced
    step(again, "resumed", "❯", f"{b} · resumed", "[Summary of earlier conversation]",
         "> Write a long essay.", "Plan", "[~] Read CHANGELOG.md")  # fmt: skip
    assert "> Add a CHANGELOG entry for the parser fix." not in again.transcript()
    again.line("What did you change?")
    step(again, "continued", "I added the changelog entry.", "I added the changelog entry.")
    again.line("/quit")
    assert again.exit_code() == 0
    last = emulator.journal[-1]
    assert last["usage"]["cache_read_input_tokens"] > 0, "the resumed session's request read the prompt cache"
    log = (Path(term_env["AGENTD_DATA_DIR"]) / "sessions" / b / "log.jsonl").read_text()
    prompts = [json.loads(line) for line in log.splitlines() if '"kind":"prompt"' in line]
    assert [p["content"][0]["text"] for p in prompts] == [
        "Add a CHANGELOG entry for the parser fix.", "Write a long essay.", "What did you change?"]  # fmt: skip
