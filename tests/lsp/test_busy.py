"""Errors that need their own daemon (PROTOCOL.md §6.1, §6.4, §11): missing credentials and a busy session."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agentd.testing.emulator import Emulator
from tests.lsp.harness import daemon_env


async def test_missing_credentials_are_a_provider_error(
    client_name: str, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    env = daemon_env(data_dir)
    env.pop("ANTHROPIC_API_KEY")
    d = await daemons(client_name, env, [workspace])
    assert await d.error("agentd/session/new", {"cwd": str(workspace)}) == {"code": -32015, "data": {
        "name": "ProviderError", "provider": "anthropic", "reason": "missing_credentials", "retryable": False},
        "message": "No API key: set ANTHROPIC_API_KEY in the environment (or choose another provider with "
                   "--provider)"}  # fmt: skip


async def test_a_running_turn_makes_the_session_busy(
    client_name: str, emulator: Emulator, workspace: Path, data_dir: Path, daemons: Any
) -> None:
    emulator.script(
        {
            "answers": [
                {
                    "reply": [{"text": "Working on it."}],
                    "stop_reason": "end_turn",
                    "hold_after_events": 3,
                    "gate": "busy",
                }
            ]
        }
    )
    d = await daemons(client_name, daemon_env(data_dir, emulator.url), [workspace])
    sid = await d.new(workspace)
    prompt = asyncio.ensure_future(d.prompt(sid, "Work."))
    assert await emulator.wait_reached_async("busy", 15)
    busy = {"code": -32013, "data": {"name": "SessionBusy", "sessionId": sid},
            "message": f"A prompt is still running in {sid}; wait for it or send agentd/session/cancel."}  # fmt: skip
    assert (
        await d.error("agentd/session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "2"}]})
        == busy
    )
    assert await d.error("agentd/session/compact", {"sessionId": sid}) == busy
    assert await d.error("agentd/session/load", {"sessionId": sid, "cwd": str(workspace)}) == busy
    status = await d.request("agentd/session/status", {"sessionId": sid})  # never blocked by the turn
    assert status["state"] == "running"
    emulator.gate("busy").open()
    assert await asyncio.wait_for(prompt, 15) == "end_turn"
