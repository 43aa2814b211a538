"""`:AgentdStatus` names the project-instruction files in the session's system prompt (issue 11: the
editors' status says which files were loaded)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agentd.testing.emulator import Emulator
from tests.editors.nvim.harness import Nvim


def test_status_names_the_instruction_files(
    nvim: Nvim, emulator: Emulator, make_workspace: Callable[[dict[str, str]], Path]
) -> None:
    ws = make_workspace({"notes.txt": "hello\n", "AGENTS.md": "Answer briefly.\n"})
    emulator.script({"answers": [{"reply": [{"text": "Hi."}], "stop_reason": "end_turn"}]})
    out = nvim.run(
        "commands",
        AGENTD_WS=str(ws),
        AGENTD_FILE="notes.txt",
        AGENTD_CMDS=["Agentd hello"],
        AGENTD_TURNS=1,
        AGENTD_THEN=["AgentdStatus"],
    )
    status = [m for m in out["messages"] if " · instructions: " in m]
    assert len(status) == 1, out["messages"]
    assert status[0].endswith(" · instructions: AGENTS.md"), status
