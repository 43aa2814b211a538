"""Cancellation over the wire (PROTOCOL.md §12.2): every cancel path ends the pending prompt with
`{"stopReason":"cancelled"}` within 1 s, kills a running command's process group, withdraws an open
approval with `$/cancelRequest`, and leaves a history that `agentd/session/load` replays and the next
request validates."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from lsprotocol import types

from agentd.testing.emulator import Emulator
from tests.lsp.harness import daemon_env, scrub, wait_until
from tests.sandbox_fixtures import wait_survivors

INTERRUPTED = (
    "interrupted after the tool started; its outcome is unknown, check the workspace before retrying"
)
MARK = "30.004217"  # finds the command on the host (inside the sandbox its pid is not the host's)
LONG = f"echo $$ > pid.txt; exec sleep {MARK}"


async def test_cancel_during_a_30_second_command(
    client_name: str, emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    emulator.script({"answers": [
        {"reply": [{"tool_use": {"name": "run_command", "input": {"command": LONG}}}], "stop_reason": "tool_use"},
        {"reply": [{"text": "Stopped."}], "stop_reason": "end_turn",
         "expect": {"tool_result_for": "toolu_emu_1_1", "is_error": True, "content": INTERRUPTED}},
    ]})  # fmt: skip
    d = await daemons(client_name, daemon_env(data_dir, emulator.url), [workspace])
    sid = await d.new(workspace)
    prompt = asyncio.ensure_future(d.prompt(sid, "Run the slow thing."))
    pid_file = workspace / "pid.txt"
    await wait_until(
        lambda: pid_file.exists() and pid_file.read_text().strip().isdigit(), "the command to start"
    )
    assert len(wait_survivors(MARK, 1)) == 1

    started = time.monotonic()
    d.notify("agentd/session/cancel", {"sessionId": sid})
    assert await asyncio.wait_for(prompt, 5) == "cancelled"
    assert time.monotonic() - started < 1.0
    assert wait_survivors(MARK, 0) == []
    failed = d.rec.of(sid, "tool_call_update")[-1]
    assert (failed["toolCallId"], failed["status"], failed["_meta"]["agentd"]["cancelled"]) == (
        "toolu_emu_1_1", "failed", True)  # fmt: skip

    assert await d.request("agentd/session/close", {"sessionId": sid}) == {}
    before = len(d.rec.updates)
    assert await d.request("agentd/session/load", {"sessionId": sid, "cwd": str(workspace)}) == {
        "modes": {"currentModeId": "default", "availableModes": [
            {"id": "default", "name": "Ask"}, {"id": "acceptEdits", "name": "Accept edits"},
            {"id": "readOnly", "name": "Read only"}, {"id": "auto", "name": "Auto (sandbox)"}]}}  # fmt: skip
    replay = d.rec.updates[before:]
    assert all(p["_meta"] == {"agentd": {"replay": True}} and p["sessionId"] == sid for p in replay)
    assert scrub([p["update"] for p in replay], {str(workspace.resolve()): "<ws>"}) == [
        {"sessionUpdate": "session_info_update", "title": "Run the slow thing.", "updatedAt": "<ts>"},
        {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "Run the slow thing."},
         "messageId": "<msg>"},
        {"sessionUpdate": "tool_call", "toolCallId": "toolu_emu_1_1", "title": f"Run `{LONG}`", "kind": "execute",
         "status": "failed", "rawInput": {"command": LONG}, "_meta": {"agentd": {"interrupted": True}}},
        {"sessionUpdate": "usage_update", "used": "<n>", "size": 200000, "cost": {"amount": "<n>", "currency": "USD"}},
    ]  # fmt: skip
    assert await d.prompt(sid, "Go on.") == "end_turn"  # the emulator's `expect` checks the synthetic result


async def test_cancel_request_for_the_pending_prompt_is_a_turn_cancel(
    client_name: str, emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    emulator.script({"answers": [
        {"reply": [{"text": "Thinking about it for a long time."}], "stop_reason": "end_turn",
         "hold_after_events": 3, "gate": "slow"},
    ]})  # fmt: skip
    d = await daemons(client_name, daemon_env(data_dir, emulator.url), [workspace])
    sid = await d.new(workspace)
    fut = d.client.protocol.send_request(
        "agentd/session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "Think."}]}, msg_id=77
    )
    assert await emulator.wait_reached_async("slow", 15)
    started = time.monotonic()
    d.notify(types.CANCEL_REQUEST, types.CancelParams(id=77))
    assert await asyncio.wait_for(asyncio.wrap_future(fut), 5) == {"stopReason": "cancelled"}
    assert time.monotonic() - started < 1.0
    status = await d.request("agentd/session/status", {"sessionId": sid})
    assert (status["state"], status["turns"]) == ("idle", 1)


async def test_cancel_while_an_approval_is_open_withdraws_it(
    client_name: str, emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    emulator.script({"answers": [
        {"reply": [{"tool_use": {"name": "write_file", "input": {"path": "notes.md", "content": "x\n"}}}],
         "stop_reason": "tool_use"},
    ]})  # fmt: skip
    d = await daemons(client_name, daemon_env(data_dir, emulator.url), [workspace])
    withdrawn = asyncio.get_running_loop().create_future()

    async def never(_params: Any) -> Any:
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:  # the server's $/cancelRequest cancels this handler
            withdrawn.set_result(True)
            raise

    d.rec.permission_answer = never
    sid = await d.new(workspace)
    prompt = asyncio.ensure_future(d.prompt(sid, "Write notes."))
    await d.rec.expect(lambda r: len(r.permissions) == 1, "the permission request")
    started = time.monotonic()
    d.notify("agentd/session/cancel", {"sessionId": sid})
    assert await asyncio.wait_for(prompt, 5) == "cancelled"
    assert time.monotonic() - started < 1.0
    assert await asyncio.wait_for(withdrawn, 5) is True
    last = d.rec.of(sid, "tool_call_update")[-1]
    assert scrub(last) == {"sessionUpdate": "tool_call_update", "toolCallId": "toolu_emu_1_1", "status": "failed",
                           "_meta": {"agentd": {"decision": "deny", "decidedBy": "cancel", "durationMs": "<n>",
                                                "cancelled": True}}}  # fmt: skip
    assert not (workspace / "notes.md").exists()
    audit = [json.loads(x) for x in (data_dir / "sessions" / sid / "audit.jsonl").read_text().splitlines()]
    assert [(a["tool"], a["decision"], a["decidedBy"]) for a in audit] == [("write_file", "deny", "cancel")]


async def test_shutdown_answers_the_running_prompt_first(
    client_name: str, emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    emulator.script({"answers": [
        {"reply": [{"text": "Working."}], "stop_reason": "end_turn", "hold_after_events": 3, "gate": "held"},
    ]})  # fmt: skip
    d = await daemons(client_name, daemon_env(data_dir, emulator.url), [workspace])
    sid = await d.new(workspace)
    answered: list[Any] = []  # response ids in wire order
    handle = d.client.protocol._handle_response
    d.client.protocol._handle_response = lambda msg_id, *a: (answered.append(msg_id), handle(msg_id, *a))[1]
    prompt = asyncio.ensure_future(
        d.client.protocol.send_request_async(
            "agentd/session/prompt",
            {"sessionId": sid, "prompt": [{"type": "text", "text": "Work."}]},
            msg_id="p",
        )
    )
    assert await emulator.wait_reached_async("held", 15)
    shutdown = asyncio.ensure_future(d.client.protocol.send_request_async(types.SHUTDOWN, None, msg_id="s"))
    assert await asyncio.wait_for(prompt, 10) == {"stopReason": "cancelled"}
    assert await asyncio.wait_for(shutdown, 10) is None
    assert answered == ["p", "s"]  # the prompt is answered before shutdown
    assert (data_dir / "sessions" / sid / "lock").read_bytes() == b""  # released before the answer
    d.client.exit(None)
    assert await asyncio.wait_for(d.client._server.wait(), 10) == 0  # type: ignore[union-attr]


async def test_an_unanswered_approval_times_out_and_is_withdrawn(
    client_name: str, emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    denied = "No approval was given (timed out after 1 s); the call was not run."
    emulator.script({"answers": [
        {"reply": [{"tool_use": {"name": "write_file", "input": {"path": "notes.md", "content": "x\n"}}}],
         "stop_reason": "tool_use"},
        {"reply": [{"text": "No approval."}], "stop_reason": "end_turn",
         "expect": {"tool_result_for": "toolu_emu_1_1", "is_error": True, "content": denied}},
    ]})  # fmt: skip
    options = {"permissions": {"approvalTimeoutS": 1}}
    d = await daemons(client_name, daemon_env(data_dir, emulator.url), [workspace], init_options=options)
    withdrawn = asyncio.get_running_loop().create_future()

    async def never(_params: Any) -> Any:
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            withdrawn.set_result(True)
            raise

    d.rec.permission_answer = never
    sid = await d.new(workspace)
    assert await d.prompt(sid, "Write notes.") == "end_turn"
    assert await asyncio.wait_for(withdrawn, 5) is True
    assert d.rec.permissions[0]["_meta"]["agentd"]["timeoutS"] == 1
    audit = [json.loads(x) for x in (data_dir / "sessions" / sid / "audit.jsonl").read_text().splitlines()]
    assert [(a["tool"], a["decision"], a["decidedBy"]) for a in audit] == [("write_file", "deny", "timeout")]
    assert not (workspace / "notes.md").exists()
