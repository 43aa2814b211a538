"""One turn end to end over the wire (PROTOCOL.md §7.6): prompt -> plan update with the exact snapshot ->
read -> a write that asks -> the client answers -> end_turn; allowed and rejected, under Neovim and VS Code
capabilities, with the Anthropic emulator as the model."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from tests.lsp.harness import merged_chunks, scrub

TODOS = [
    {"content": "Fix the parser bug", "status": "done"},
    {"content": "Read CHANGELOG.md", "status": "in_progress"},
    {"content": "Add CHANGELOG entry — parser fix", "status": "pending"},
]
# CONTRACTS.md §2, computed independently of agentd: compact, keys in order, non-ASCII as \uXXXX.
SNAPSHOT = (
    '{"todos":[{"content":"Fix the parser bug","status":"done"},{"content":"Read CHANGELOG.md",'
    '"status":"in_progress"},{"content":"Add CHANGELOG entry \\u2014 parser fix","status":"pending"}]}'
)
OLD = "# Changelog\n\n## 0.3.0\n- First release.\n"
NEW = "# Changelog\n\n## Unreleased\n- Fix parser crash on empty input.\n\n## 0.3.0\n- First release.\n"
PROMPT = "Add a CHANGELOG entry for the parser fix."
REJECTED = "The user rejected this call; it was not run. Reason: Keep entries under ## 0.3.1 instead."


def scenario() -> dict[str, Any]:
    return {"answers": [
        {"reply": [{"text": "I'll plan this first."}, {"tool_use": {"name": "todo_write", "input": {"todos": TODOS}}}],
         "stop_reason": "tool_use"},
        {"reply": [{"tool_use": {"name": "read_file", "input": {"path": "CHANGELOG.md"}}}], "stop_reason": "tool_use"},
        {"reply": [{"text": "Adding the entry."},
                   {"tool_use": {"name": "write_file", "input": {"path": "CHANGELOG.md", "content": NEW}}}],
         "stop_reason": "tool_use"},
        {"reply": [{"text": "Done."}], "stop_reason": "end_turn"},
    ]}  # fmt: skip


def usage() -> dict[str, Any]:
    return {"sessionUpdate": "usage_update", "used": "<n>", "size": 200000, "cost": {"amount": "<n>", "currency": "USD"},
            "_meta": {"agentd": {"request": {"inputTokens": "<n>", "outputTokens": "<n>", "cacheReadTokens": "<n>",
                                             "cacheWriteTokens": "<n>"}}}}  # fmt: skip


def chunk(text: str) -> dict[str, Any]:
    return {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": text},
        "messageId": "<msg>",
    }


def expected_updates(write_final: dict[str, Any]) -> list[dict[str, Any]]:
    ws_file = "<ws>/CHANGELOG.md"
    allow = {"decision": "allow", "decidedBy": "rule", "durationMs": "<n>"}
    return [
        chunk("I'll plan this first."),
        usage(),
        {"sessionUpdate": "tool_call", "toolCallId": "toolu_emu_1_1", "title": "Update todos (3 items)", "kind": "think",
         "status": "pending", "rawInput": {"todos": TODOS}},
        {"sessionUpdate": "tool_call_update", "toolCallId": "toolu_emu_1_1", "status": "in_progress"},
        {"sessionUpdate": "tool_call_update", "toolCallId": "toolu_emu_1_1", "status": "completed",
         "content": [{"type": "content", "content": {"type": "text", "text": SNAPSHOT}}], "rawOutput": {"items": 3},
         "_meta": {"agentd": allow}},
        {"sessionUpdate": "plan",
         "entries": [{"content": "Fix the parser bug", "priority": "medium", "status": "completed"},
                     {"content": "Read CHANGELOG.md", "priority": "medium", "status": "in_progress"},
                     {"content": "Add CHANGELOG entry — parser fix", "priority": "medium", "status": "pending"}],
         "_meta": {"agentd": {"planId": "main", "snapshot": SNAPSHOT}}},
        usage(),
        {"sessionUpdate": "tool_call", "toolCallId": "toolu_emu_2_1", "title": "Read CHANGELOG.md", "kind": "read",
         "status": "pending", "rawInput": {"path": "CHANGELOG.md"}},
        {"sessionUpdate": "tool_call_update", "toolCallId": "toolu_emu_2_1", "status": "in_progress"},
        {"sessionUpdate": "tool_call_update", "toolCallId": "toolu_emu_2_1", "status": "completed",
         "content": [{"type": "content", "content": {"type": "text", "text":
                      "     1\t# Changelog\n     2\t\n     3\t## 0.3.0\n     4\t- First release."}}],
         "rawOutput": {"lines": 4, "bytes": 39, "source": "disk"}, "locations": [{"path": ws_file, "line": 1}],
         "_meta": {"agentd": allow}},
        chunk("Adding the entry."),
        usage(),
        {"sessionUpdate": "tool_call", "toolCallId": "toolu_emu_3_1", "title": "Write CHANGELOG.md", "kind": "edit",
         "status": "pending", "rawInput": {"content": NEW, "path": "CHANGELOG.md"}},
        *write_final["updates"],
        chunk("Done."),
        usage(),
        {"sessionUpdate": "session_info_update", "title": PROMPT, "updatedAt": "<ts>"},
    ]  # fmt: skip


PERMISSION = {
    "sessionId": "<sess>",
    "toolCall": {"toolCallId": "toolu_emu_3_1", "title": "Write CHANGELOG.md", "kind": "edit", "status": "pending",
                 "rawInput": {"path": "CHANGELOG.md", "content": NEW},
                 "content": [{"type": "diff", "path": "<ws>/CHANGELOG.md", "oldText": OLD, "newText": NEW}],
                 "locations": [{"path": "<ws>/CHANGELOG.md", "line": 1}]},
    "options": [{"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
                {"optionId": "allow_always", "name": "Always allow write_file in this session", "kind": "allow_always"},
                {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
                {"optionId": "reject_always", "name": "Always reject write_file in this session", "kind": "reject_always"}],
    "_meta": {"agentd": {"title": "Write CHANGELOG.md", "description": "Create or overwrite a file in <ws>",
                         "subject": {"type": "tool_call", "toolCallId": "toolu_emu_3_1"}, "timeoutS": 120,
                         "expiresAt": "<ts>"}},
}  # fmt: skip


async def _turn(client_name: str, emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any,
                answer: dict[str, Any]) -> tuple[Any, str]:  # fmt: skip
    from tests.lsp.harness import daemon_env

    (workspace / "CHANGELOG.md").write_text(OLD, encoding="utf-8")
    emulator.script(scenario())
    d = await daemons(client_name, daemon_env(data_dir, emulator.url), [workspace])
    d.rec.permission_answer = lambda _p: answer
    sid = await d.new(workspace)
    assert await d.prompt(sid, PROMPT) == "end_turn"
    return d, sid


async def test_a_turn_with_an_approved_write(
    client_name: str, emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    answer = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
    d, sid = await _turn(client_name, emulator, workspace, data_dir, daemons, answer)
    paths = {str(workspace.resolve()): "<ws>"}
    write = {"updates": [
        {"sessionUpdate": "tool_call_update", "toolCallId": "toolu_emu_3_1", "status": "in_progress"},
        {"sessionUpdate": "tool_call_update", "toolCallId": "toolu_emu_3_1", "status": "completed",
         "content": [{"type": "diff", "path": "<ws>/CHANGELOG.md", "oldText": OLD, "newText": NEW},
                     {"type": "content", "content": {"type": "text", "text": "Wrote 89 bytes to CHANGELOG.md."}}],
         "rawOutput": {"bytes": 89, "appliedVia": "disk"}, "locations": [{"path": "<ws>/CHANGELOG.md", "line": 1}],
         "_meta": {"agentd": {"decision": "allow", "decidedBy": "user", "optionId": "allow_once", "durationMs": "<n>"}}},
    ]}  # fmt: skip
    assert scrub(merged_chunks(d.rec.of(sid)), paths) == expected_updates(write)
    assert scrub(d.rec.permissions, paths) == [PERMISSION]
    assert (workspace / "CHANGELOG.md").read_text(encoding="utf-8") == NEW
    accounting = [m.message for m in d.client.log_messages if m.type == 4 and m.message.startswith("[turn")]
    assert len(accounting) == 4
    assert all(
        re.fullmatch(r"\[turn · in=\d+ out=\d+ cache_read=\d+ cache_write=\d+\]", m) for m in accounting
    )
    todos = await d.request("agentd/session/todos", {"sessionId": sid})
    assert scrub(todos) == {"todos": TODOS, "snapshot": SNAPSHOT, "updatedAt": "<ts>"}


async def test_a_turn_with_a_rejected_write(
    client_name: str, emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    answer = {"outcome": {"outcome": "selected", "optionId": "reject_once"},
              "_meta": {"agentd": {"reason": "Keep entries under ## 0.3.1 instead."}}}  # fmt: skip
    d, sid = await _turn(client_name, emulator, workspace, data_dir, daemons, answer)
    paths = {str(workspace.resolve()): "<ws>"}
    write = {"updates": [
        {"sessionUpdate": "tool_call_update", "toolCallId": "toolu_emu_3_1", "status": "failed",
         "content": [{"type": "content", "content": {"type": "text", "text": REJECTED}}],
         "_meta": {"agentd": {"decision": "deny", "decidedBy": "user", "optionId": "reject_once", "durationMs": "<n>"}}},
    ]}  # fmt: skip
    assert scrub(merged_chunks(d.rec.of(sid)), paths) == expected_updates(write)
    assert (workspace / "CHANGELOG.md").read_text(encoding="utf-8") == OLD
    last = emulator.journal[-1]["body"]["messages"][-1]["content"]
    results = [
        {k: v for k, v in b.items() if k != "cache_control"} for b in last if b.get("type") == "tool_result"
    ]
    assert results == [
        {"type": "tool_result", "tool_use_id": "toolu_emu_3_1", "content": REJECTED, "is_error": True}
    ]
    audit = [
        json.loads(line) for line in (data_dir / "sessions" / sid / "audit.jsonl").read_text().splitlines()
    ]
    assert [(a["toolUseId"], a["tool"], a["decision"], a["decidedBy"]) for a in audit] == [
        ("toolu_emu_1_1", "todo_write", "allow", "rule"),
        ("toolu_emu_2_1", "read_file", "allow", "rule"),
        ("toolu_emu_3_1", "write_file", "deny", "user"),
    ]
