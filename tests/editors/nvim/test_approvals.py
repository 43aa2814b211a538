"""A denied approval in a real Neovim: the user picks "Reject" in `vim.ui.select`; the edit does not happen,
the chat shows it denied, and the model gets the rejection as an error tool result (PROTOCOL.md §6.10)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agentd.testing.emulator import Emulator
from tests.editors.nvim.harness import Nvim, scrub

CHANGELOG = "# Changelog\n\n## 0.3.0\n- First release.\n"
ORIGINAL = ["# Changelog", "", "## 0.3.0", "- First release."]
PROMPT = "Add a CHANGELOG entry for the parser fix."
EDIT = {
    "path": "CHANGELOG.md",
    "old_string": "## 0.3.0",
    "new_string": "## Unreleased\n- Fix parser crash.\n\n## 0.3.0",
}
SCENARIO = {
    "answers": [
        {
            "reply": [{"text": "Adding the entry."}, {"tool_use": {"name": "edit_file", "input": EDIT}}],
            "stop_reason": "tool_use",
        },
        {
            "expect": {"tool_result_for": "toolu_emu_1_1", "is_error": True},
            "reply": [{"text": "Understood, leaving CHANGELOG.md as it is."}],
            "stop_reason": "end_turn",
        },
    ]
}


def test_denied_approval_leaves_the_file_alone(
    nvim: Nvim, emulator: Emulator, make_workspace: Callable[[dict[str, str]], Path]
) -> None:
    ws = make_workspace({"CHANGELOG.md": CHANGELOG})
    emulator.script(SCENARIO)
    out = nvim.run(
        "roundtrip",
        AGENTD_WS=str(ws),
        AGENTD_FILE="CHANGELOG.md",
        AGENTD_PROMPT=PROMPT,
        AGENTD_PICKS={"agentd.approval": "Reject"},
    )
    got = scrub({k: v for k, v in out.items() if k != "_seconds"}, {str(ws): "<ws>"})
    assert [(s["kind"], s["prompt"], s["picked"]) for s in got["selects"]] == [
        ("agentd.approval", "agentd: Edit CHANGELOG.md (+3 -0 lines). Allow?", "Reject")
    ]
    del got["selects"]
    assert got == {
        "started_by_enable": True,
        "attached": True,
        "events": [
            {"event": "AgentdSession", "action": "new", "sessionId": "<sid>"},
            {"event": "AgentdTurnStart", "sessionId": "<sid>"},
            {"event": "AgentdApproval", "sessionId": "<sid>", "toolCallId": "toolu_emu_1_1"},
            {"event": "AgentdTurnEnd", "sessionId": "<sid>", "stopReason": "end_turn"},
            {"event": "AgentdExit", "client_id": 1, "code": 0, "signal": 0},
        ],
        "plans": [],
        "turn": {"event": "AgentdTurnEnd", "sessionId": "<sid>", "stopReason": "end_turn"},
        "chat": {
            "lines": [
                "> " + PROMPT,
                "",
                "Adding the entry.",
                "  ✗ Edit CHANGELOG.md (denied)",
                "Understood, leaving CHANGELOG.md as it is.",
                "── end_turn · 2 request(s) · in=<n> out=<n> cache_read=<n> cache_write=<n> ──",
            ],
            "winbar": "end_turn · ctx <share>% · $<cost>",  # fitted to the default width (80 columns)
        },
        "plan": None,
        "layout": ["<ws>/CHANGELOG.md", "agentd://chat", "agentd://input"],
        "buffer": ORIGINAL,
        "modified": False,
        "disk": ORIGINAL,
        "undo_entries": 0,
        "after_undo": ORIGINAL,
        "after_redo": ORIGINAL,
        "statusline": "agentd: end_turn",
        "session": "<sid>",
        "tools": [
            {
                "id": "toolu_emu_1_1",
                "status": "failed",
                "rawOutput": None,
                "decision": "deny",
                "decidedBy": "user",
                "optionId": "reject_once",
            }
        ],
    }
    assert [e["status"] for e in emulator.journal] == [200, 200]
