"""/rewind and /fork in the terminal client (issue 14 Part 1 with issue 13's checkpoints): a rewind picked
from the list puts the files and the conversation back to before a prompt and offers that prompt again in
the input; a file the user changed after the checkpoint is asked about and left alone; `/rewind rK files`
undoes the files; `/fork` opens a new session with the history, the original kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from tests.terminal.test_chat import step
from tests.terminal.test_keys_and_commands import _text_of


def _write(path: str, content: str) -> dict[str, Any]:
    return {"reply": [{"tool_use": {"name": "write_file", "input": {"path": path, "content": content}}}]}


def test_rewind_and_fork_from_the_keyboard(
    emulator: Emulator, workspace: Path, term_env: dict[str, str], terminals: Any
) -> None:
    (workspace / "notes.md").write_text("mine\n")
    emulator.script([
        _write("CHANGELOG.md", "# Changelog\n\nrewritten by turn 1\n"),
        {"reply": [{"text": "Turn one done."}], "stop_reason": "end_turn"},
        _write("NEW.md", "created by turn 2\n"),
        {"reply": [{"text": "Turn two done."}], "stop_reason": "end_turn"},
        {"reply": [{"text": "Asked again, answered again."}], "stop_reason": "end_turn"},
        {"reply": [{"text": "Hello from the fork."}], "stop_reason": "end_turn"},
    ])  # fmt: skip
    t = terminals(["--new"], term_env, workspace)
    step(t, "open", "❯", "new session")
    t.line("/mode acceptEdits")
    t.line("First change.")
    step(t, "turn one", "Turn one done.", "● Write CHANGELOG.md")
    t.line("Second change.")
    step(t, "turn two", "Turn two done.", "● Write NEW.md")
    (workspace / "notes.md").write_text("mine, edited by hand\n")  # the user's own change after the turns

    t.line("/rewind")
    step(t, "pick", "(keep everything)", "1. 2 · Second change.", "2. 1 · First change.")
    t.type("2")
    step(t, "what", "Put back what", "1. Files and conversation", "2. Conversation only", "3. Files only")
    t.type("1")
    step(
        t,
        "yours",
        "Esc leaves them",
        "You changed notes.md after checkpoint 1.",
        "Leave them as they are (n)",
    )
    t.type("n")
    shown = step(t, "rewound", "[undo the files with:", "files: 1 restored, 1 removed", "conversation: ",
                 "→ 0 messages", "kept notes.md (changed by user)", "❯ First change.")  # fmt: skip
    assert "[rewind r1]" not in shown  # the core's own line: the report says it all
    assert (workspace / "CHANGELOG.md").read_text().endswith("- First release.\n")
    assert not (workspace / "NEW.md").exists()
    assert (workspace / "notes.md").read_text() == "mine, edited by hand\n"  # not the agent's: untouched

    t.key("enter")  # the prompt the rewind took back, sent again as it was
    step(t, "again", "Asked again, answered again.", "Asked again, answered again.")
    sent = [m for m in emulator.journal[-1]["body"]["messages"] if m["role"] == "user"]
    assert [_text_of(m) for m in sent] == ["First change."]  # the conversation went back

    t.line("/rewind r1 files")  # the undo the report named: the files as they were before the rewind
    step(t, "undone", "[rewound to checkpoint r1 · files:", "[rewound to checkpoint r1 · files:")
    assert (workspace / "NEW.md").read_text() == "created by turn 2\n"

    a = next(p.name for p in (Path(term_env["AGENTD_DATA_DIR"]) / "sessions").iterdir())
    t.line("/fork")
    step(t, "forked", "── now ──", f"[forked {a} at its end", "(fork)", "> First change.")
    t.line("Hello?")
    step(t, "in the fork", "Hello from the fork.", "Hello from the fork.")
    forks = [p.name for p in (Path(term_env["AGENTD_DATA_DIR"]) / "sessions").iterdir() if p.name != a]
    assert len(forks) == 1 and f"{forks[0]} · resumed" in t.transcript()
    t.key("ctrl-d")
    assert t.exit_code() == 0
    assert t.garbage() == []
