"""The plugin's round trip in a real Neovim (TESTING.md §1.5): `vim.lsp.enable('agentd')`, `:Agentd`,
plan window, an approval answered through `vim.ui.select`, the edit in the open buffer; then a new Neovim
resumes the session with `:AgentdSessions` and shows the restored plan."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from tests.editors.nvim.harness import Nvim, scrub

CHANGELOG = "# Changelog\n\n## 0.3.0\n- First release.\n"
PROMPT = "Add a CHANGELOG entry for the parser fix."
EDIT = {
    "path": "CHANGELOG.md",
    "old_string": "## 0.3.0",
    "new_string": "## Unreleased\n- Fix parser crash.\n\n## 0.3.0",
}
PLAN_1 = [
    {"content": "Read CHANGELOG.md", "status": "in_progress"},
    {"content": "Add the entry", "status": "pending"},
]
PLAN_2 = [
    {"content": "Read CHANGELOG.md", "status": "done"},
    {"content": "Add the entry", "status": "done"},
]
SCENARIO = {
    "answers": [
        {
            "reply": [
                {"text": "I'll plan this first."},
                {"tool_use": {"name": "todo_write", "input": {"todos": PLAN_1}}},
            ],
            "stop_reason": "tool_use",
        },
        {
            "reply": [{"tool_use": {"name": "read_file", "input": {"path": "CHANGELOG.md"}}}],
            "stop_reason": "tool_use",
        },
        {
            "reply": [
                {"text": "Adding it under Unreleased."},
                {"tool_use": {"name": "edit_file", "input": EDIT}},
            ],
            "stop_reason": "tool_use",
        },
        {
            "reply": [{"tool_use": {"name": "todo_write", "input": {"todos": PLAN_2}}}],
            "stop_reason": "tool_use",
        },
        {"reply": [{"text": "Added the entry."}], "stop_reason": "end_turn"},
    ]
}
ALLOW = {"agentd.approval": "Allow once", "agentd.session": "#1"}
EDITED = ["# Changelog", "", "## Unreleased", "- Fix parser crash.", "", "## 0.3.0", "- First release."]
ORIGINAL = ["# Changelog", "", "## 0.3.0", "- First release."]
OPTIONS = [
    "Allow once",
    "Always allow edit_file in this session",
    "Reject",
    "Always reject edit_file in this session",
]
PLAN_WINDOW_1 = {"lines": ["[~] Read CHANGELOG.md", "[ ] Add the entry"], "winbar": "agentd plan · 0/2 done"}
PLAN_WINDOW_2 = {"lines": ["[x] Read CHANGELOG.md", "[x] Add the entry"], "winbar": "agentd plan · 2/2 done"}
CHAT_TURN = [
    "I'll plan this first.",
    "  ✓ Update todos (2 items)",
    "  ✓ Read CHANGELOG.md",
    "Adding it under Unreleased.",
    "  ✓ Edit CHANGELOG.md (+3 -0)",
    "  ✓ Update todos (2 items)",
    "Added the entry.",
]
DIFF = [
    "--- a/CHANGELOG.md",
    "+++ b/CHANGELOG.md",
    "@@ -1,4 +1,7 @@",
    " # Changelog",
    " ",
    "+## Unreleased",
    "+- Fix parser crash.",
    "+",
    " ## 0.3.0",
    " - First release.",
]


def _approval(options: list[str], picked: str) -> dict[str, Any]:
    return {
        "kind": "agentd.approval",
        "prompt": "agentd: Edit CHANGELOG.md (+3 -0 lines). Allow?",
        "items": options,
        "details": ["agentd asks: Edit CHANGELOG.md", "Edit a file in <ws>", "", *DIFF],
        "chat_winbar": "approval: Edit CHANGELOG.md",
        "picked": picked,
    }


def _tool(ident: str, raw: dict[str, Any], by: str = "rule", option: str | None = None) -> dict[str, Any]:
    return {
        "id": ident,
        "status": "completed",
        "rawOutput": raw,
        "decision": "allow",
        "decidedBy": by,
        "optionId": option,
    }


def test_round_trip_then_resume_in_a_new_neovim(
    nvim: Nvim, emulator: Emulator, make_workspace: Callable[[dict[str, str]], Path]
) -> None:
    ws = make_workspace({"CHANGELOG.md": CHANGELOG, "src/parser.py": "def parse(src):\n    return []\n"})
    emulator.script(SCENARIO)
    paths = {str(ws): "<ws>", str(nvim.data_dir): "<data>"}

    first = nvim.run(
        "roundtrip", AGENTD_WS=str(ws), AGENTD_FILE="CHANGELOG.md", AGENTD_PROMPT=PROMPT, AGENTD_PICKS=ALLOW
    )
    sid = first["session"]
    got = scrub({k: v for k, v in first.items() if k != "_seconds"}, paths)
    assert got == {
        "started_by_enable": True,
        "attached": True,
        "selects": [_approval(OPTIONS, "Allow once")],
        "events": [
            {"event": "AgentdSession", "action": "new", "sessionId": "<sid>"},
            {"event": "AgentdTurnStart", "sessionId": "<sid>"},
            {"event": "AgentdApproval", "sessionId": "<sid>", "toolCallId": "toolu_emu_3_1"},
            {"event": "AgentdTurnEnd", "sessionId": "<sid>", "stopReason": "end_turn"},
            {"event": "AgentdExit", "client_id": 1, "code": 0, "signal": 0},
        ],
        "plans": [{"replay": False, "window": PLAN_WINDOW_1}, {"replay": False, "window": PLAN_WINDOW_2}],
        "turn": {"event": "AgentdTurnEnd", "sessionId": "<sid>", "stopReason": "end_turn"},
        "chat": {
            "lines": [
                "> " + PROMPT,
                "",
                *CHAT_TURN,
                "── end_turn · 5 request(s) · in=<n> out=<n> cache_read=<n> cache_write=<n> ──",
            ],
            "winbar": "end_turn · ctx <share>% · $<cost>",
        },
        "plan": PLAN_WINDOW_2,
        "layout": ["<ws>/CHANGELOG.md", "agentd://plan", "agentd://chat", "agentd://input"],
        "buffer": EDITED,
        "modified": False,
        "disk": EDITED,
        "undo_entries": 1,
        "after_undo": ORIGINAL,
        "after_redo": EDITED,
        "statusline": "agentd: end_turn",
        "session": "<sid>",
        "tools": [
            _tool("toolu_emu_1_1", {"items": 2}),
            _tool("toolu_emu_2_1", {"bytes": 39, "lines": 4, "source": "buffer"}),
            # the file is open: the edit goes through workspace/applyEdit and is saved (PROTOCOL.md §8.2)
            _tool("toolu_emu_3_1", {"appliedVia": "editor", "replacements": 1}, "user", "allow_once"),
            _tool("toolu_emu_4_1", {"items": 2}),
        ],
    }
    assert [e["status"] for e in emulator.journal] == [200] * 5

    second = nvim.run("resume", AGENTD_WS=str(ws), AGENTD_FILE="CHANGELOG.md", AGENTD_PICKS=ALLOW)
    assert second["session"] == sid
    got = scrub({k: v for k, v in second.items() if k != "_seconds"}, paths)
    assert got == {
        "selects": [
            {
                "kind": "agentd.session",
                "prompt": "agentd sessions (<ws>)",
                "items": [f"{PROMPT} (just now, 1 turn)"],
                "details": None,
                "chat_winbar": None,
                "picked": f"{PROMPT} (just now, 1 turn)",
            }
        ],
        "events": [
            {"event": "AgentdSession", "action": "load", "sessionId": "<sid>"},
            {"event": "AgentdExit", "client_id": 1, "code": 0, "signal": 0},
        ],
        "plans": [
            {"replay": True, "window": PLAN_WINDOW_1},
            {"replay": True, "window": PLAN_WINDOW_2},
            {"replay": True, "window": PLAN_WINDOW_2},
        ],
        "chat": {
            "lines": ["> " + PROMPT, "", *CHAT_TURN],
            "winbar": "idle · ctx <used>/<size> · $<cost>",
        },
        "plan": PLAN_WINDOW_2,
        "plan_after_todos": PLAN_WINDOW_2,
        "layout": ["<ws>/CHANGELOG.md", "agentd://plan", "agentd://chat", "agentd://input"],
        "session": "<sid>",
    }

    # `agentd --resume ID` announces the session in initialize; the plugin loads it without a command
    third = nvim.run(
        "announced",
        AGENTD_WS=str(ws),
        AGENTD_FILE="CHANGELOG.md",
        AGENTD_CMD=[sys.executable, "-m", "agentd", "--resume", sid],
    )
    assert scrub({k: v for k, v in third.items() if k != "_seconds"}, paths) == {
        "selects": [],
        "events": [
            {"event": "AgentdSession", "action": "load", "sessionId": "<sid>"},
            {"event": "AgentdExit", "client_id": 1, "code": 0, "signal": 0},
        ],
        "plans": [
            {"replay": True, "window": PLAN_WINDOW_1},
            {"replay": True, "window": PLAN_WINDOW_2},
            {"replay": True, "window": PLAN_WINDOW_2},
        ],
        "announced": {"sessionId": "<sid>", "cwd": "<ws>"},
        "session": "<sid>",
        "plan": PLAN_WINDOW_2,
        "chat_lines": 9,
    }
    assert third["session"] == sid
