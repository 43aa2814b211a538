"""Two workspaces in one daemon (PROTOCOL.md §6.1, §12.1; CONTRACTS.md §1): two sessions with two cwd
folders run turns at the same time and share nothing. A's stale rounds put the reminder in A's request
only; plan updates carry their own session id; cancelling A's turn leaves B's running."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from tests.lsp.harness import daemon_env

REMINDER = (
    "Keep the TODO list current. Call todo_write with the complete task snapshot when the plan changes."
)


def _todo(text: str) -> dict[str, Any]:
    return {
        "tool_use": {"name": "todo_write", "input": {"todos": [{"content": text, "status": "in_progress"}]}}
    }


def _read(path: str) -> dict[str, Any]:
    return {"tool_use": {"name": "read_file", "input": {"path": path}}}


SCENARIO = {"answers": [
    {"reply": [_todo("A: first step")], "stop_reason": "tool_use"},  # A, request 1
    {"reply": [_read("a.txt")], "stop_reason": "tool_use"},  # A, stale round 1
    {"reply": [_read("a.txt")], "stop_reason": "tool_use"},  # A, stale round 2
    {"reply": [_read("a.txt")], "stop_reason": "tool_use"},  # A, stale round 3
    {"reply": [{"text": "Still reading a.txt."}, _read("a.txt")], "stop_reason": "tool_use",
     "hold_after_events": 3, "gate": "a"},  # A, request 5 (with the reminder): held mid-stream
    {"reply": [_todo("B: first step")], "stop_reason": "tool_use"},  # B, request 1
    {"reply": [_read("b.txt")], "stop_reason": "tool_use"},  # B, request 2
    {"reply": [{"text": "B is done."}], "stop_reason": "end_turn", "hold_after_events": 3, "gate": "b"},  # B, 3
]}  # fmt: skip


def _texts(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"], ensure_ascii=False)


async def test_two_workspaces_run_turns_at_once_and_share_nothing(
    client_name: str, emulator: Emulator, tmp_path: Path, data_dir: Path, daemons: Any
) -> None:
    ws_a, ws_b = tmp_path / "shop", tmp_path / "blog"
    for ws, name in ((ws_a, "a.txt"), (ws_b, "b.txt")):
        ws.mkdir()
        (ws / name).write_text(f"{name}\n", encoding="utf-8")
    emulator.script(SCENARIO)
    d = await daemons(client_name, daemon_env(data_dir, emulator.url), [ws_a, ws_b])
    sid_a, sid_b = await d.new(ws_a), await d.new(ws_b)
    prompt_a = asyncio.ensure_future(d.prompt(sid_a, "Work on A."))
    assert await emulator.wait_reached_async("a", 15), "A's fifth request never reached gate a"
    prompt_b = asyncio.ensure_future(d.prompt(sid_b, "Work on B."))
    assert await emulator.wait_reached_async("b", 15), "B's third request never reached gate b"
    assert not prompt_a.done() and not prompt_b.done()  # both turns are running at this moment

    statuses = [await d.request("agentd/session/status", {"sessionId": s}) for s in (sid_a, sid_b)]
    assert [(s["sessionId"], s["state"], s["cwd"]) for s in statuses] == [
        (sid_a, "running", str(ws_a.resolve())), (sid_b, "running", str(ws_b.resolve()))]  # fmt: skip

    started = time.monotonic()
    d.notify("agentd/session/cancel", {"sessionId": sid_a})
    assert await asyncio.wait_for(prompt_a, 5) == "cancelled"
    assert time.monotonic() - started < 1.0
    assert not prompt_b.done()  # cancelling A leaves B's turn running
    emulator.gate("b").open()
    assert await asyncio.wait_for(prompt_b, 15) == "end_turn"

    bodies = [e["body"] for e in emulator.journal]
    owner = ["A" if str(ws_a.resolve()) in b["system"][0]["text"] else "B" for b in bodies]
    assert owner == ["A"] * 5 + ["B"] * 3
    assert [REMINDER in _texts(b) for b in bodies] == [False, False, False, False, True, False, False, False]

    plans = [(p["sessionId"], p["update"]["entries"][0]["content"]) for p in d.rec.updates
             if p["update"]["sessionUpdate"] == "plan"]  # fmt: skip
    assert plans == [(sid_a, "A: first step"), (sid_b, "B: first step")]
    for sid, ws in ((sid_a, ws_a), (sid_b, ws_b)):
        paths = [loc["path"] for u in d.rec.of(sid, "tool_call_update") for loc in u.get("locations", [])]
        assert paths and all(p.startswith(str(ws.resolve())) for p in paths)
    cancelled = [u for u in d.rec.of(sid_a, "tool_call_update") if u["status"] == "failed"]
    assert cancelled == []  # A was cancelled mid-stream, before its fifth reply's tool_use was complete
    assert [s["state"] for s in [await d.request("agentd/session/status", {"sessionId": s}) for s in (sid_a, sid_b)]] \
        == ["idle", "idle"]  # fmt: skip
