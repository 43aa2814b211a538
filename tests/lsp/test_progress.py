"""Work-done progress of a turn (PROTOCOL.md §10.1): a token agentd creates when the client declared
`window.workDoneProgress`, or the prompt's own `workDoneToken`; `end` before the prompt answer, with the stop
reason first; `window/workDoneProgress/cancel` cancels the turn."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from lsprotocol import types

from agentd.testing.emulator import Emulator
from tests.lsp.harness import daemon_env


async def test_a_turn_reports_progress_on_a_token_agentd_creates(
    client_name: str, emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    emulator.script({"answers": [
        {"reply": [{"tool_use": {"name": "list_dir", "input": {}}}], "stop_reason": "tool_use"},
        {"reply": [{"text": "Listed."}], "stop_reason": "end_turn"},
    ]})  # fmt: skip
    d = await daemons(client_name, daemon_env(data_dir, emulator.url), [workspace])
    sid = await d.new(workspace)
    assert await d.prompt(sid, "List it.") == "end_turn"
    assert list(d.client.progress_reports) == [f"agentd-turn-{sid}-1"]
    reports = d.client.progress_reports[f"agentd-turn-{sid}-1"]
    assert reports[0] == types.WorkDoneProgressBegin(title=f"agentd: {workspace.name}", message="Thinking",
                                                     cancellable=True)  # fmt: skip
    assert all(r.kind == "report" for r in reports[1:-1])
    assert reports[-1].kind == "end"
    assert re.fullmatch(r"end_turn · 2 requests · in=\d+ out=\d+ cache_read=\d+ cache_write=\d+",
                        reports[-1].message or "")  # fmt: skip


async def test_a_client_token_and_progress_cancel(
    client_name: str, emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    emulator.script({"answers": [
        {"reply": [{"text": "A long answer."}], "stop_reason": "end_turn", "hold_after_events": 3, "gate": "g"},
    ]})  # fmt: skip
    d = await daemons(client_name, daemon_env(data_dir, emulator.url), [workspace])
    sid = await d.new(workspace)
    d.client.progress_reports["mine"] = []  # a client-supplied token (TESTING.md §2 item 8)
    params = {"sessionId": sid, "prompt": [{"type": "text", "text": "Go."}], "workDoneToken": "mine"}
    prompt = asyncio.ensure_future(d.request("agentd/session/prompt", params))
    assert await emulator.wait_reached_async("g", 15)
    d.notify(types.WINDOW_WORK_DONE_PROGRESS_CANCEL, types.WorkDoneProgressCancelParams(token="mine"))
    assert await asyncio.wait_for(prompt, 5) == {"stopReason": "cancelled"}
    kinds = [r.kind for r in d.client.progress_reports["mine"]]
    assert (kinds[0], kinds[-1], list(d.client.progress_reports)) == ("begin", "end", ["mine"])
    # the cancelled request never completed, so it is not counted
    assert (
        d.client.progress_reports["mine"][-1].message
        == "cancelled · 0 requests · in=0 out=0 cache_read=0 cache_write=0"
    )
