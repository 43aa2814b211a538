"""Adversarial review of `agentd --acp` (issue 10 Part 2, break10; docs/acp.md "Bad input", "Approvals"):
raw JSON-RPC lines a client gets wrong, each answered as docs/acp.md says, stdout carrying protocol lines
only."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from agentd.testing.emulator import Emulator
from tests.acp.harness import ROOT, agent_env
from tests.acp.test_malformed import DEADLINE, Raw


async def test_a_notification_sent_as_a_request_and_an_option_agentd_did_not_offer(
    emulator: Emulator, workspace: Path, data_dir: Path, tmp_path: Path
) -> None:
    """issue 10 (break10): `session/cancel` sent with an id was answered "agentd does not implement
    session/cancel" (it does, as a notification); now -32601 says to send it without an id. A cancel of an
    unknown session gets no answer; an `optionId` agentd did not offer rejects the call, the turn goes on."""
    emulator.script({"answers": [
        {"reply": [{"tool_use": {"name": "run_command", "input": {"command": "echo hi"}}}],
         "stop_reason": "tool_use"},
        {"reply": [{"text": "ok"}], "stop_reason": "end_turn"},
    ]})  # fmt: skip
    err = (tmp_path / "agent.err").open("wb")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentd", "--acp", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=err, env=agent_env(data_dir, emulator.url), cwd=str(ROOT), limit=2**24,
    )  # fmt: skip
    raw = Raw(proc)
    raw.send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"protocolVersion": 1}})
    await raw.answer("init")
    raw.send({"jsonrpc": "2.0", "id": "c", "method": "session/cancel", "params": {"sessionId": "nope"}})
    got = (await raw.answer("c"))["error"]
    assert got["code"] == -32601 and "without an id" in got["message"], got
    raw.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "nope"}})
    new = {"cwd": str(workspace), "mcpServers": []}
    raw.send({"jsonrpc": "2.0", "id": "new", "method": "session/new", "params": new})
    sid = (await raw.answer("new"))["result"]["sessionId"]
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "Run it"}]}
    raw.send({"jsonrpc": "2.0", "id": "p", "method": "session/prompt", "params": prompt})
    while not (asked := [m for m in raw.messages if m.get("method") == "session/request_permission"]):
        raw._new.clear()
        await asyncio.wait_for(raw._new.wait(), DEADLINE)
    bogus = {"outcome": {"outcome": "selected", "optionId": "no_such_option"}}
    raw.send({"jsonrpc": "2.0", "id": asked[0]["id"], "result": bogus})
    assert (await raw.answer("p"))["result"]["stopReason"] == "end_turn"
    updates = [m["params"]["update"] for m in raw.messages if m.get("method") == "session/update"]
    assert [u["status"] for u in updates if u.get("sessionUpdate") == "tool_call_update"][-1] == "failed"
    assert "no_such_option" not in str(emulator.journal[-1]["body"])  # nothing of it reached the model
    answered = {m["id"] for m in raw.messages if "method" not in m}
    assert answered == {"init", "c", "new", "p"} and raw.garbage == []
    assert proc.stdin is not None
    proc.stdin.close()
    assert await asyncio.wait_for(proc.wait(), DEADLINE) == 0
    err.close()
    assert b"Traceback" not in (tmp_path / "agent.err").read_bytes()
