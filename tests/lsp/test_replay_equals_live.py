"""Issue 10 Part 1 over LSP: `agentd/session/load` replays what the live turns sent, update for update (the
adapter frames the core's updates and computes nothing). Live and replayed updates are compared through the
adapter-neutral fold of tests/replay_fold.py (the ACP adapter's test will use the same)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from tests.lsp.harness import daemon_env
from tests.replay_fold import live_conversation, replay_conversation

TODO = {"todos": [{"content": "Write notes", "status": "in_progress"}]}
SCENARIO = {"answers": [
    {"reply": [{"text": "Planning."}, {"tool_use": {"name": "todo_write", "input": TODO}}], "stop_reason": "tool_use"},
    {"reply": [{"tool_use": {"name": "read_file", "input": {"path": "a.txt"}}},
               {"tool_use": {"name": "write_file", "input": {"path": "notes.md", "content": "# Notes\n"}}}],
     "stop_reason": "tool_use"},
    {"reply": [{"text": "Done."}], "stop_reason": "end_turn"},
]}  # fmt: skip


async def test_load_replays_what_the_live_turn_sent(
    client_name: str, emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    emulator.script(SCENARIO)
    d = await daemons(client_name, daemon_env(data_dir, emulator.url), [workspace])
    sid = await d.new(workspace)
    assert await d.prompt(sid, "Take notes on a.txt") == "end_turn"
    live = d.rec.of(sid)
    assert await d.request("agentd/session/close", {"sessionId": sid}) == {}
    before = len(d.rec.updates)
    await d.request("agentd/session/load", {"sessionId": sid, "cwd": str(workspace)})
    replayed = [p["update"] for p in d.rec.updates[before:]]
    assert replay_conversation(replayed) == live_conversation(live)
    assert [u for u in live if u["sessionUpdate"] == "session_info_update"] == replayed[:1]
    folded = live_conversation(live)
    assert [(c["status"], c["_meta"]["agentd"]["decidedBy"]) for c in folded if c["sessionUpdate"] == "tool_call"] == [
        ("completed", "rule"), ("completed", "rule"), ("completed", "user")]  # fmt: skip
