"""The approval fallback for generic LSP clients (PROTOCOL.md §9): a client that did not declare
`experimental.agentd.requestPermission` gets a `window/logMessage` with the details, then a
`window/showMessageRequest`; its answer is honoured."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentd.testing.emulator import Emulator
from tests.lsp.harness import daemon_env

CONTENT = "remember the milk\n"


@pytest.mark.parametrize(("title", "written"), [("Allow once", True), ("Deny", False)])
async def test_a_client_without_the_agentd_capability_is_asked_with_show_message_request(
    client_name: str,
    emulator: Emulator,
    workspace: Path,
    data_dir: Path,
    daemons: Any,
    title: str,
    written: bool,
) -> None:
    emulator.script({"answers": [
        {"reply": [{"tool_use": {"name": "write_file", "input": {"path": "notes.md", "content": CONTENT}}}],
         "stop_reason": "tool_use"},
        {"reply": [{"text": "Done."}], "stop_reason": "end_turn"},
    ]})  # fmt: skip
    d = await daemons(client_name, daemon_env(data_dir, emulator.url), [workspace], agentd_cap=None)
    d.rec.message_answer = lambda _p: {"title": title}
    sid = await d.new(workspace)
    assert await d.prompt(sid, "Take a note.") == "end_turn"

    target = workspace.resolve() / "notes.md"
    assert d.rec.permissions == []
    assert d.rec.message_requests == [{
        "type": 2,
        "message": f"agentd ({workspace.name}): write_file wants to write {target} (+1 -0 lines). "
                   "Details are in the agentd log. Allow?",
        "actions": [{"title": "Allow once", "optionId": "allow_once"}, {"title": "Always allow", "optionId": "allow_always"},
                    {"title": "Deny", "optionId": "reject_once"}],
    }]  # fmt: skip
    details = [m.message for m in d.client.log_messages if m.type == 3]
    assert details == [
        f"agentd ({workspace.name}): approval requested for write_file (Write notes.md)\n"
        f"input: {json.dumps({'path': 'notes.md', 'content': CONTENT})}\n"
        "--- /dev/null\n+++ b/notes.md\n@@ -0,0 +1 @@\n+remember the milk"
    ]
    assert target.exists() is written
    final = d.rec.of(sid, "tool_call_update")[-1]["_meta"]["agentd"]
    option = "allow_once" if written else "reject_once"
    assert (final["decision"], final["decidedBy"], final["optionId"]) == (
        "allow" if written else "deny", "user", option)  # fmt: skip
