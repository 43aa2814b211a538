"""Cancel in a real Neovim (PROTOCOL.md §12.2): `:AgentdCancel` while an approval is on screen and while an
approved command runs; each prompt answers `cancelled` promptly, the tool calls end cancelled, the approval
window closes, and the next prompt in the same session works."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from agentd.testing.emulator import Emulator
from tests.editors.nvim.harness import Nvim, scrub

PROMPTS = ["Run the quick check.", "Run the slow check.", "Are you still there?"]
QUICK = f"{sys.executable} -c 'print(1)'"
SLOW = f"{sys.executable} -c 'import time; time.sleep(60)'"
SCENARIO = {
    "answers": [
        {
            "reply": [
                {"text": "Running it."},
                {"tool_use": {"name": "run_command", "input": {"command": QUICK}}},
            ],
            "stop_reason": "tool_use",
        },
        {
            "reply": [
                {"text": "Running the slow one."},
                {"tool_use": {"name": "run_command", "input": {"command": SLOW}}},
            ],
            "stop_reason": "tool_use",
        },
        {
            "expect": {"tool_result_for": "toolu_emu_2_1", "is_error": True},
            "reply": [{"text": "Still here."}],
            "stop_reason": "end_turn",
        },
    ]
}


def test_cancel_during_approval_and_during_a_command(
    nvim: Nvim, emulator: Emulator, make_workspace: Callable[[dict[str, str]], Path]
) -> None:
    ws = make_workspace({"notes.txt": "hello\n"})
    emulator.script(SCENARIO)
    out = nvim.run(
        "cancel",
        AGENTD_WS=str(ws),
        AGENTD_FILE="notes.txt",
        AGENTD_PROMPTS=PROMPTS,
        AGENTD_RUNNING_TOOL="toolu_emu_2_1",
        AGENTD_PICKS={"agentd.approval": ["hold", "Allow once"]},
    )
    # a cancel answers within 1 s (§12.2); the bound here leaves room for a loaded CI machine
    assert (out["cancel1_ms"] < 3000, out["cancel2_ms"] < 3000) == (True, True), out
    got = scrub(
        {k: v for k, v in out.items() if k not in ("_seconds", "cancel1_ms", "cancel2_ms")}, {str(ws): "<ws>"}
    )
    quick = QUICK.replace(str(ws), "<ws>")
    slow = SLOW.replace(str(ws), "<ws>")
    assert [(s["prompt"], s["picked"]) for s in got.pop("selects")] == [
        (f"agentd: Run `{quick}` in <ws>. Allow?", None),
        (f"agentd: Run `{slow}` in <ws>. Allow?", "Allow once"),
    ]
    assert got == {
        "events": [
            {"event": "AgentdSession", "action": "new", "sessionId": "<sid>"},
            {"event": "AgentdTurnStart", "sessionId": "<sid>"},
            {"event": "AgentdApproval", "sessionId": "<sid>", "toolCallId": "toolu_emu_1_1"},
            {"event": "AgentdTurnEnd", "sessionId": "<sid>", "stopReason": "cancelled"},
            {"event": "AgentdTurnStart", "sessionId": "<sid>"},
            {"event": "AgentdApproval", "sessionId": "<sid>", "toolCallId": "toolu_emu_2_1"},
            {"event": "AgentdTurnEnd", "sessionId": "<sid>", "stopReason": "cancelled"},
            {"event": "AgentdTurnStart", "sessionId": "<sid>"},
            {"event": "AgentdTurnEnd", "sessionId": "<sid>", "stopReason": "end_turn"},
            {"event": "AgentdExit", "client_id": 1, "code": 0, "signal": 0},
        ],
        "plans": [],
        "approval_windows_before": 1,
        "approval_windows_after": 0,
        "state_before": "awaiting_permission",
        "state_after": "idle",
        "turn1": {"event": "AgentdTurnEnd", "sessionId": "<sid>", "stopReason": "cancelled"},
        "turn2": {"event": "AgentdTurnEnd", "sessionId": "<sid>", "stopReason": "cancelled"},
        "turn3": {"event": "AgentdTurnEnd", "sessionId": "<sid>", "stopReason": "end_turn"},
        "chat": {
            "lines": [
                "> " + PROMPTS[0],
                "",
                "Running it.",
                f"  ✗ Run `{quick}` (cancelled)",
                "── cancelled · 1 request(s) · in=<n> out=<n> cache_read=<n> cache_write=<n> ──",
                "",
                "> " + PROMPTS[1],
                "",
                "Running the slow one.",
                f"  ✗ Run `{slow}` (cancelled)",
                "── cancelled · 1 request(s) · in=<n> out=<n> cache_read=<n> cache_write=<n> ──",
                "",
                "> " + PROMPTS[2],
                "",
                "Still here.",
                "── end_turn · 1 request(s) · in=<n> out=<n> cache_read=<n> cache_write=<n> ──",
            ],
            "winbar": "end_turn · ctx <share>% · $<cost>",
        },
    }
    assert [e["status"] for e in emulator.journal] == [200, 200, 200]
