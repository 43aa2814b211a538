"""Issue 10 Part 1 over ACP: `session/load` replays what the live turns sent, update for update (the adapter
frames the core's updates and computes nothing). Live and replayed updates are compared through the
adapter-neutral fold of tests/replay_fold.py, as the LSP adapter's test does."""

from __future__ import annotations

from pathlib import Path

from agentd.testing.emulator import Emulator
from tests.acp.harness import agent_env, start
from tests.replay_fold import live_conversation, replay_conversation

TODO = {"todos": [{"content": "Write notes", "status": "in_progress"}]}
SCENARIO = {"answers": [
    {"reply": [{"text": "Planning."}, {"tool_use": {"name": "todo_write", "input": TODO}}], "stop_reason": "tool_use"},
    {"reply": [{"tool_use": {"name": "read_file", "input": {"path": "a.txt"}}},
               {"tool_use": {"name": "write_file", "input": {"path": "notes.md", "content": "# Notes\n"}}}],
     "stop_reason": "tool_use"},
    {"reply": [{"text": "Done."}], "stop_reason": "end_turn"},
]}  # fmt: skip
REPLAY = {"agentd": {"replay": True}}


async def test_load_replays_what_the_live_turn_sent(
    emulator: Emulator, workspace: Path, data_dir: Path, tmp_path: Path
) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    emulator.script(SCENARIO)
    a = await start(agent_env(data_dir, emulator.url), tmp_path / "agent.err")
    a.editor.answers = ["allow_once"]
    sid = await a.new(workspace)
    assert await a.prompt(sid, "Take notes on a.txt") == "end_turn"
    live = [u for u in a.editor.of(sid) if u["sessionUpdate"] != "available_commands_update"]
    await a.call(a.conn.close_session(session_id=sid))
    before = len(a.editor.updates)
    await a.call(a.conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[]))
    replayed = [p["update"] for p in a.editor.updates[before:] if p.get("_meta") == REPLAY]
    assert replay_conversation(replayed) == live_conversation(live)
    assert [u for u in live if u["sessionUpdate"] == "session_info_update"] == replayed[:1]
    folded = live_conversation(live)
    assert [(c["status"], c["_meta"]["agentd"]["decidedBy"]) for c in folded if c["sessionUpdate"] == "tool_call"] == [
        ("completed", "rule"), ("completed", "rule"), ("completed", "user")]  # fmt: skip
    assert await a.close() == 0
