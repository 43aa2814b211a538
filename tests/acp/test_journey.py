"""Issue 10 Part 2 acceptance, through the Python SDK's client side: `agentd --acp` as an editor drives it.

initialize -> session/new -> a prompt with todo_write, read_file (an unsaved buffer, through
`fs/read_text_file`) and two writes needing permission, answered allow_once then reject_once (the first lands
through `fs/write_text_file`, the second is audited and returned to the model as an error) -> session/cancel
during a 30 s run_command (`cancelled` within 1 s, no process left) -> the process killed with SIGKILL ->
session/list and session/load in a new process (the history and the last plan replayed; the dead process's
lock is not in the way) -> a prompt on the loaded session whose request is a prompt-cache hit -> the same
session loaded in the LSP adapter, where it continues."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from tests.acp.harness import agent_env, start
from tests.acp.scenario import MARK, TURN_1, TURN_2, TURN_3, TURN_4
from tests.lsp.harness import daemon_env, wait_until
from tests.sandbox_fixtures import wait_survivors


def _audit(data_dir: Path, sid: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (data_dir / "sessions" / sid / "audit.jsonl").read_text().splitlines()]


async def test_acp_journey_through_the_python_sdk(
    emulator: Emulator, workspace: Path, data_dir: Path, tmp_path: Path, daemons: Any
) -> None:
    """Issue 10 Part 2: the acp tier's journey (see the module docstring)."""
    (workspace / "a.txt").write_text("alpha on disk\n")
    emulator.script({"answers": TURN_1 + TURN_2 + TURN_3 + TURN_4})
    env = agent_env(data_dir, emulator.url)
    a = await start(env, tmp_path / "agent1.err")
    caps = a.init.agent_capabilities
    assert a.init.protocol_version == 1 and caps.load_session
    assert caps.session_capabilities.list is not None
    assert (caps.prompt_capabilities.embedded_context, caps.prompt_capabilities.audio) == (True, False)

    # ---- a turn with a plan, a read of an unsaved buffer, two writes asked: allowed once, rejected once
    a.editor.buffers[str(workspace.resolve() / "a.txt")] = "alpha in the buffer\n"
    a.editor.answers = ["allow_once", "reject_once"]
    sid = await a.new(workspace)
    assert await a.prompt(sid, "Take notes on a.txt") == "end_turn"
    ed = a.editor
    assert (workspace / "notes.md").read_text() == "# Notes\n" and not (workspace / "secret.md").exists()
    assert [w["path"] for w in ed.writes] == [str(workspace.resolve() / "notes.md")]
    assert [r["path"] for r in ed.reads][:1] == [str(workspace.resolve() / "a.txt")]
    read_result = emulator.journal[2]["body"]["messages"][-1]["content"][0]["content"]
    assert "alpha in the buffer" in json.dumps(read_result)
    assert [[o["optionId"] for o in p["options"]] for p in ed.permissions] == [
        ["allow_once", "allow_always", "reject_once", "reject_always"]
    ] * 2
    assert [(x["tool"], x["decision"], x["decidedBy"]) for x in _audit(data_dir, sid)] == [
        ("todo_write", "allow", "rule"), ("read_file", "allow", "rule"), ("write_file", "allow", "user"),
        ("write_file", "deny", "user"), ("todo_write", "allow", "rule")]  # fmt: skip
    calls = {u["toolCallId"]: u for u in ed.of(sid, "tool_call")}
    assert [(c["kind"], c["title"]) for c in calls.values()] == [
        ("think", "Update todos (2 items)"), ("read", "Read a.txt"), ("edit", "Write notes.md"),
        ("edit", "Write secret.md"), ("think", "Update todos (2 items)")]  # fmt: skip
    finals = {
        u["toolCallId"]: u
        for u in ed.of(sid, "tool_call_update")
        if u.get("status") in ("completed", "failed")
    }
    assert finals["toolu_emu_2_1"]["locations"] == [{"path": str(workspace.resolve() / "a.txt"), "line": 1}]
    assert finals["toolu_emu_2_1"]["rawOutput"]["source"] == "buffer"
    diff = finals["toolu_emu_3_1"]["content"][0]
    assert (diff["type"], diff["path"], diff["newText"]) == (
        "diff",
        str(workspace.resolve() / "notes.md"),
        "# Notes\n",
    )
    assert finals["toolu_emu_4_1"]["status"] == "failed"
    assert finals["toolu_emu_4_1"]["_meta"]["agentd"]["optionId"] == "reject_once"
    plans = ed.of(sid, "plan")
    assert [[(e["status"], e["priority"]) for e in p["entries"]] for p in plans] == [
        [("in_progress", "medium"), ("pending", "medium")],
        [("completed", "medium"), ("completed", "medium")],
    ]
    assert ed.of(sid, "usage_update") and all(u["size"] > 0 for u in ed.of(sid, "usage_update"))
    assert ed.of(sid, "agent_message_chunk")[0]["content"] == {"type": "text", "text": "Planning."}

    # ---- cancel during a 30 s command: cancelled within 1 s, no process left
    a.editor.answers = ["allow_once"]
    prompt = asyncio.ensure_future(a.prompt(sid, "Run the slow thing."))
    pid_file = workspace / "pid.txt"
    await wait_until(
        lambda: pid_file.exists() and pid_file.read_text().strip().isdigit(), "the command to start"
    )
    assert len(wait_survivors(MARK, 1)) == 1
    started = time.monotonic()
    await a.conn.cancel(session_id=sid)
    assert await asyncio.wait_for(prompt, 5) == "cancelled"
    assert time.monotonic() - started < 1.0
    assert wait_survivors(MARK, 0) == []

    # ---- the editor kills the agent; a new one lists and loads the session at once
    a.kill()
    await asyncio.wait_for(a.proc.wait(), 10)
    await a.conn.close()
    b = await start(env, tmp_path / "agent2.err")
    listed = await b.call(b.conn.list_sessions())
    assert [s.session_id for s in listed.sessions] == [sid]
    assert listed.sessions[0].title == "Take notes on a.txt"
    await b.call(b.conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[]))
    await b.editor.expect(lambda e: bool(e.of(sid, "available_commands_update")), "the slash commands")
    replay = [p["update"] for p in b.editor.updates if p.get("_meta") == {"agentd": {"replay": True}}]
    assert [u for u in b.editor.of(sid) if u not in replay] == [
        {"sessionUpdate": "available_commands_update", "availableCommands": [
            {"name": "compact", "description": "Compress the conversation history now (the plan is kept)"},
            {"name": "status", "description": "Show the model, context size, token and cache totals, cost and sandbox"},
            {"name": "reload-instructions", "description": "Read the project's AGENTS.md files again"}]}]  # fmt: skip
    kinds = [u["sessionUpdate"] for u in replay]
    assert kinds[0] == "session_info_update" and kinds[-1] == "usage_update"
    assert [u["content"]["text"] for u in replay if u["sessionUpdate"] == "user_message_chunk"] == [
        "Take notes on a.txt",
        "Run the slow thing.",
    ]
    last_plan = [u for u in replay if u["sessionUpdate"] == "plan"][-1]
    assert [e["status"] for e in last_plan["entries"]] == ["completed", "completed"]
    replayed_calls = [u for u in replay if u["sessionUpdate"] == "tool_call"]
    assert [c["status"] for c in replayed_calls] == [
        "completed",
        "completed",
        "completed",
        "failed",
        "completed",
        "failed",
    ]

    # ---- the next prompt continues the loaded session, and its request reads the prompt cache
    before = len(emulator.journal)
    assert await b.prompt(sid, "Go on.") == "end_turn"
    usage = emulator.journal[before]["usage"]
    assert usage["cache_read_input_tokens"] > 0
    await b.close()

    # ---- the same session continues in the LSP adapter
    d = await daemons("neovim", daemon_env(data_dir, emulator.url), [workspace])
    listed_lsp = await d.request("agentd/session/list", {"cwd": str(workspace)})
    assert [s["sessionId"] for s in listed_lsp["sessions"]] == [sid]
    await d.request("agentd/session/load", {"sessionId": sid, "cwd": str(workspace)})
    assert await d.prompt(sid, "And over LSP?") == "end_turn"
    assert emulator.journal[-1]["usage"]["cache_read_input_tokens"] > 0
