"""Every `agentd/session/*` method on its happy path (PROTOCOL.md §6): new, setMode, prompt, todos, status,
list, compact, close, load (the replay of §6.2, with the last plan), under both client capability sets."""

from __future__ import annotations

import json
import os
import socket
from datetime import datetime
from pathlib import Path
from typing import Any

from agentd.sandbox import Launcher, SandboxPolicy, detect, wire_state
from agentd.testing.emulator import Emulator
from tests.lsp.harness import daemon_env, scrub

TODO = {"todos": [{"content": "Step one", "status": "in_progress"}]}
SNAPSHOT = '{"todos":[{"content":"Step one","status":"in_progress"}]}'
SCENARIO = {"compaction_marker": "Summarize the conversation below", "answers": [
    {"reply": [{"text": "Planning."}, {"tool_use": {"name": "todo_write", "input": TODO}}], "stop_reason": "tool_use"},
    {"reply": [{"text": "Planned."}], "stop_reason": "end_turn"},
]}  # fmt: skip
MODES = [
    {"id": "default", "name": "Ask", "description": "Follow the permission rules; ask when a rule says ask."},
    {"id": "acceptEdits", "name": "Accept edits",
     "description": "Also allow write_file and edit_file inside the workspace without asking."},
    {"id": "readOnly", "name": "Read only", "description": "Reject every write and command without asking."},
    {"id": "auto", "name": "Auto (sandbox)",
     "description": "Allow edits inside the workspace and commands that run in the sandbox without asking; "
                    "network use, running outside the sandbox and protected paths still ask."},
]  # fmt: skip
PLAN = {"sessionUpdate": "plan", "entries": [{"content": "Step one", "priority": "medium", "status": "in_progress"}],
        "_meta": {"agentd": {"planId": "main", "snapshot": SNAPSHOT}}}  # fmt: skip


async def test_every_session_method(
    client_name: str, emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    emulator.script(SCENARIO)
    (workspace / "AGENTS.md").write_text("Be brief.\n", encoding="utf-8")  # status names it (issue 11)
    options = {"context": {"keepRecentMessages": 2}}
    d = await daemons(client_name, daemon_env(data_dir, emulator.url), [workspace], init_options=options)
    paths = {str(workspace.resolve()): "<ws>"}

    new = await d.request("agentd/session/new", {"cwd": str(workspace)})
    sid = new["sessionId"]
    assert scrub(new) == {"sessionId": "<sess>", "modes": {"currentModeId": "default", "availableModes": MODES},
                          "_meta": {"agentd": {"provider": "anthropic", "model": "claude-sonnet-4-6",
                                               "createdAt": "<ts>"}}}  # fmt: skip
    assert await d.request("agentd/session/todos", {"sessionId": sid}) == {
        "todos": [],
        "snapshot": '{"todos":[]}',
    }
    assert await d.request("agentd/session/setMode", {"sessionId": sid, "modeId": "acceptEdits"}) == {}
    assert d.rec.of(sid) == [{"sessionUpdate": "current_mode_update", "currentModeId": "acceptEdits"}]

    assert await d.prompt(sid, "Plan it.") == "end_turn"
    assert scrub(await d.request("agentd/session/todos", {"sessionId": sid})) == {
        "todos": TODO["todos"], "snapshot": SNAPSHOT, "updatedAt": "<ts>"}  # fmt: skip
    status = await d.request("agentd/session/status", {"sessionId": sid})
    assert scrub(status, paths) == {
        "sessionId": "<sess>", "cwd": "<ws>", "state": "idle", "mode": "acceptEdits", "provider": "anthropic",
        "model": "claude-sonnet-4-6",
        "context": {"usedTokens": "<n>", "windowTokens": 200000, "compressThresholdTokens": 160000, "messages": 4,
                    "compactions": 0},
        "totals": {"requests": 2, "inputTokens": "<n>", "outputTokens": "<n>", "cacheReadTokens": "<n>",
                   "cacheWriteTokens": "<n>"},
        "costEstimate": {"amount": "<n>", "currency": "USD"}, "turns": 1, "updatedAt": "<ts>",
        "sandbox": wire_state(Launcher("auto", detect(), SandboxPolicy(writable=()))),
        "instructions": [{"path": "AGENTS.md", "bytes": 10, "loadedBytes": 10}],
        "trust": {"trusted": True, "ignored": []}}  # fmt: skip
    listed = await d.request("agentd/session/list", {})
    assert scrub(listed, paths) == {"sessions": [{
        "sessionId": "<sess>", "cwd": "<ws>", "title": "Plan it.", "updatedAt": "<ts>",
        "_meta": {"agentd": {"createdAt": "<ts>", "model": "claude-sonnet-4-6", "turns": 1,
                             "lockedBy": {"pid": "<n>", "hostname": socket.gethostname()}}}}]}  # fmt: skip
    assert listed["sessions"][0]["_meta"]["agentd"]["lockedBy"]["pid"] == d.client._server.pid  # type: ignore[union-attr]
    assert await d.request("agentd/session/list", {"cwd": str(workspace.parent)}) == {"sessions": []}

    compacted = await d.request("agentd/session/compact", {"sessionId": sid})
    assert scrub(compacted) == {"compacted": True, "tokensBefore": "<n>", "tokensAfter": "<n>", "messagesBefore": 4,
                                "messagesAfter": 4}  # fmt: skip
    assert [e["compaction"] for e in emulator.journal] == [False, False, True]  # the summary request
    empty = await d.new(workspace)
    too_short = await d.request("agentd/session/compact", {"sessionId": empty})
    assert too_short == {"compacted": False, "reason": "too_short"}

    assert await d.request("agentd/session/close", {"sessionId": sid}) == {}
    error = await d.error("agentd/session/status", {"sessionId": sid})
    assert error == {"code": -32011, "message": f"Call agentd/session/load for {sid} before prompting it.",
                     "data": {"name": "SessionNotLoaded", "sessionId": sid}}  # fmt: skip
    assert (data_dir / "sessions" / sid / "lock").read_bytes() == b""  # released

    before = len(d.rec.updates)
    loaded = await d.request("agentd/session/load", {"sessionId": sid, "cwd": str(workspace)})
    assert loaded == {"modes": {"currentModeId": "acceptEdits", "availableModes": [
        {"id": m["id"], "name": m["name"]} for m in MODES]}}  # fmt: skip
    replay = d.rec.updates[before:]
    assert {json.dumps(p["_meta"]) for p in replay} == {'{"agentd": {"replay": true}}'}
    assert scrub([p["update"] for p in replay], paths) == [
        {"sessionUpdate": "session_info_update", "title": "Plan it.", "updatedAt": "<ts>"},
        {"sessionUpdate": "current_mode_update", "currentModeId": "acceptEdits"},
        {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "Plan it."}, "messageId": "<msg>"},
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Planning."}, "messageId": "<msg>"},
        {"sessionUpdate": "tool_call", "toolCallId": "toolu_emu_1_1", "title": "Update todos (1 item)", "kind": "think",
         "status": "completed", "rawInput": TODO,
         "content": [{"type": "content", "content": {"type": "text", "text": SNAPSHOT}}], "rawOutput": {"items": 1},
         "_meta": {"agentd": {"decidedBy": "rule"}}},
        PLAN,
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Planned."}, "messageId": "<msg>"},
        PLAN,
        {"sessionUpdate": "usage_update", "used": "<n>", "size": 200000, "cost": {"amount": "<n>", "currency": "USD"}},
    ]  # fmt: skip
    again = await d.request("agentd/session/load", {"sessionId": sid, "cwd": str(workspace)})  # idempotent
    assert (again, len(d.rec.updates) - before) == (loaded, 2 * len(replay))


async def test_a_session_held_by_another_process_is_locked(
    client_name: str, emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    env = daemon_env(data_dir, emulator.url)
    first = await daemons(client_name, env, [workspace])
    sid = await first.new(workspace)
    second = await daemons(client_name, env, [workspace])
    log = data_dir / "sessions" / sid / "log.jsonl"
    before = log.read_bytes()
    error = await second.error("agentd/session/load", {"sessionId": sid, "cwd": str(workspace)})
    pid = first.client._server.pid  # type: ignore[union-attr]
    host = socket.gethostname()
    since = error["data"]["since"]
    hhmm = datetime.fromisoformat(since.replace("Z", "+00:00")).astimezone().strftime("%H:%M")
    assert error == {"code": -32012, "message": (
        f"Session {sid} is open in agentd pid {pid} on {host} since {hhmm}. Close that editor window or stop pid "
        f"{pid}, then retry; or read it with agentd sessions show {sid}, or start a new session."),
        "data": {"name": "SessionLocked", "sessionId": sid, "pid": pid, "hostname": host, "since": since,
                 "sameProcess": False}}  # fmt: skip
    assert [(m.type, m.message) for m in second.client.messages] == [
        (1, f"agentd: session {sid} is open in agentd pid {pid}; close it there, or start a new session.")
    ]
    assert log.read_bytes() == before  # the loser wrote nothing
    assert os.path.exists(log)


async def test_removing_a_workspace_folder_unloads_its_sessions(
    client_name: str, emulator: Emulator, tmp_path: Path, data_dir: Path, daemons: Any
) -> None:
    from lsprotocol import types

    ws_a, ws_b = tmp_path / "a", tmp_path / "b"
    ws_a.mkdir()
    ws_b.mkdir()
    d = await daemons(client_name, daemon_env(data_dir, emulator.url), [ws_a, ws_b])
    sid_a, sid_b = await d.new(ws_a), await d.new(ws_b)
    removed = types.WorkspaceFolder(uri=ws_a.as_uri(), name="a")
    d.client.workspace_did_change_workspace_folders(types.DidChangeWorkspaceFoldersParams(
        event=types.WorkspaceFoldersChangeEvent(added=[], removed=[removed])))  # fmt: skip
    error = await d.error("agentd/session/status", {"sessionId": sid_a})
    assert (error["code"], error["data"]["name"]) == (-32011, "SessionNotLoaded")
    assert (data_dir / "sessions" / sid_a / "lock").read_bytes() == b""
    assert (await d.request("agentd/session/status", {"sessionId": sid_b}))["state"] == "idle"
    outside = await d.error("agentd/session/new", {"cwd": str(ws_a)})
    assert (outside["code"], outside["data"]["name"]) == (-32014, "OutsideWorkspace")
