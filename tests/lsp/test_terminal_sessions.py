"""One session, two front ends (issue 14 Part 1): a session started in the terminal client (`agentd` on a
real pseudo-terminal) continues over LSP, and one started over LSP continues in the terminal client with
`agentd --resume ID`; each side shows the other's history, and the continued request reads the prompt
cache."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from tests.lsp.harness import daemon_env
from tests.terminal.screen import Terminal

ANSWERS = [
    {"reply": [{"text": "Hello from the model, in the terminal."}], "stop_reason": "end_turn"},
    {"reply": [{"text": "Continued in the editor."}], "stop_reason": "end_turn"},
    {"reply": [{"text": "Started in the editor."}], "stop_reason": "end_turn"},
    {"reply": [{"text": "Continued in the terminal."}], "stop_reason": "end_turn"},
]


def _terminal(args: list[str], env: dict[str, str], cwd: Path) -> Terminal:
    return Terminal([sys.executable, "-m", "agentd", *args], {**env, "TERM": "xterm-256color"}, str(cwd))


async def test_a_session_moves_between_the_terminal_and_an_editor(
    emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    emulator.script(ANSWERS)
    env = daemon_env(data_dir, emulator.url)
    t = _terminal(["--new"], env, workspace)
    try:
        t.wait_for("❯")
        t.line("Say hello.")
        t.wait_for("Hello from the model, in the terminal.")
        t.key("ctrl-d")
        assert t.exit_code() == 0
    finally:
        t.close()
    (from_terminal,) = [p.name for p in (data_dir / "sessions").iterdir()]

    d = await daemons("neovim", env, [workspace])
    await d.request("agentd/session/load", {"sessionId": from_terminal, "cwd": str(workspace)})
    replayed = [u["content"]["text"] for u in d.rec.of(from_terminal) if "content" in u]
    assert replayed == ["Say hello.", "Hello from the model, in the terminal."]
    assert await d.prompt(from_terminal, "Go on.") == "end_turn"
    assert emulator.journal[-1]["usage"]["cache_read_input_tokens"] > 0
    from_editor = await d.new(workspace)
    assert await d.prompt(from_editor, "Start here.") == "end_turn"
    assert await d.stop() == 0

    t = _terminal(["--resume", from_editor], env, workspace)
    try:
        t.wait_for("❯")
        shown = t.screen()
        assert f"{from_editor} · resumed · 1 turn" in shown and "> Start here." in shown, shown
        assert "Started in the editor." in shown, shown
        t.line("And now here.")
        t.wait_for("Continued in the terminal.")
        assert emulator.journal[-1]["usage"]["cache_read_input_tokens"] > 0
        t.line("/quit")
        assert t.exit_code() == 0
        assert t.garbage() == []
    finally:
        t.close()
