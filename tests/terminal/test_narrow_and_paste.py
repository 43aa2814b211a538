"""The terminal client as found by using it (issue 14 Part 1, T1-T6): on a narrow terminal the status line
leaves parts out instead of being cut (T1) and an approval's options wrap with their keys visible (T2); a
command's tool line says its exit code and output size and shows the output's last lines (T3); pasted
multi-line text is one prompt, sent as pasted; a resize at the prompt leaves no debris; a session resumed
after another one with the same plan shows its plan (T4); Ctrl-C on a typed line only clears it, then two at
the empty prompt leave (T5); /model continues the session without showing its history again (T6)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from tests.terminal.test_chat import step
from tests.terminal.test_keys_and_commands import _text_of

PLAN = {
    "tool_use": {
        "name": "todo_write",
        "input": {"todos": [{"content": "Count to fifty", "status": "in_progress"}]},
    }
}
PASTED = "First pasted line\nsecond pasted line\n\n    indented fourth"


def test_narrow_terminal_paste_resize_and_leaving(
    emulator: Emulator, workspace: Path, term_env: dict[str, str], terminals: Any
) -> None:
    emulator.script([
        {"reply": [{"tool_use": {"name": "run_command", "input": {"command": "seq 1 50"}}}]},
        {"reply": [PLAN]},
        {"reply": [{"text": "Counted."}], "stop_reason": "end_turn"},
        {"reply": [PLAN]},
        {"reply": [{"text": "Pasted text received."}], "stop_reason": "end_turn"},
        {"reply": [{"text": "A wide answer."}], "stop_reason": "end_turn"},
        {"reply": [{"text": "From the other model."}], "stop_reason": "end_turn"},
    ])  # fmt: skip
    t = terminals(["--new"], term_env, workspace, cols=44, rows=30)
    shown = step(t, "narrow open", "❯", "Ctrl-D exits")
    assert shown.splitlines()[-1] == " default · ctx 0/200k (0 %) · $0.0000", "T1: the status line fits"

    t.line("Count.")
    shown = step(t, "narrow ask", "Always allow", "$ seq 1 50", "(a)", "(y)", "(n)")
    assert "seq` commands in this session (a)" in shown.replace("\n", ""), "T2: the options wrap"
    t.type("a")
    shown = step(
        t,
        "tool lines",
        "Counted.",
        "● Update todos (1 item)\n",
        "exit 0 · 50 lines of",
        "│ … 46 more lines",
        "│ 50",
        "Plan",
    )
    assert "│ 46" not in shown, "T3: only the last lines of the output"
    a = next(p.name for p in (Path(term_env["AGENTD_DATA_DIR"]) / "sessions").iterdir())

    t.line("/new")
    step(t, "new", re.compile(r"kept · continue it[\s\S]*Ctrl-D exits"), "· new")  # the new header
    t.paste(PASTED)
    step(t, "pasted", "indented fourth", "❯ First pasted line", "  second pasted line")
    t.key("enter")
    step(t, "pasted sent", "Pasted text received.", "Pasted text received.")
    assert _text_of(emulator.journal[-2]["body"]["messages"][-1]) == PASTED  # the turn's first request

    t.line(f"/resume {a}")
    shown = step(t, "resumed same plan", "── now ──", "── history ──", "> Count.")
    assert "Plan\n  [~] Count to fifty\n── now ──" in shown, "T4: the resumed session's plan is shown"

    t.resize(80, 30)
    t.line("Wider?")
    shown = step(t, "wider", "A wide answer.", "claude-sonnet-4-6 · default · ctx")
    assert shown.count("❯ Wider?") == 1

    t.line("/model claude-haiku-4-5")
    shown = step(
        t, "model", "claude-haiku-4-5 from the next", f"[{a} · anthropic claude-haiku-4-5 from the next"
    )
    assert shown.count("── history ──") == 1, "T6: the history is not shown again"
    t.line("Again.")
    step(t, "other model", "From the other model.", "claude-haiku-4-5 · default")

    t.type("half a thought")
    t.wait_for("❯ half a thought")
    t.key("ctrl-c")
    shown = step(t, "cleared", re.compile(r"^❯$", re.M), "❯")
    assert "half a thought" not in shown.splitlines()[-2] and "[Ctrl-C again to exit]" not in shown, "T5"
    t.key("ctrl-c")
    step(t, "armed", "[Ctrl-C again to exit]", "[Ctrl-C again to exit]")
    t.key("ctrl-c")
    assert t.exit_code() == 0
    assert t.garbage() == []
