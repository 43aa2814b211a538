"""Issue 10 Part 2 acceptance, through the official TypeScript SDK's client side (`@agentclientprotocol/sdk`, a
small Node script: tests/acp/node-client/journey.mjs, installed from its lock by .ci/install-acp-client.sh).

The same journey as tests/acp/test_journey.py, by a client that advertises no `fs` capability (agentd's tools
then use the disk): initialize -> new -> a turn with todo_write, read_file and two writes answered allow_once
then reject_once -> cancel during a 30 s command -> SIGKILL -> list and load in a new process (history and
the last plan replayed) -> a prompt whose request reads the prompt cache -> end of input (exit 0). The SDK
validates every message agentd sends against its schema; it logs what it rejects, so its stderr must be
empty."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from agentd.testing.emulator import Emulator
from tests.acp.harness import ROOT, agent_env
from tests.acp.scenario import MARK, REJECTED, TURN_1, TURN_2, TURN_3
from tests.sandbox_fixtures import survivors, wait_survivors

CLIENT = Path(__file__).parent / "node-client"


def _node() -> str:
    node = shutil.which("node")
    ready = (CLIENT / "node_modules" / "@agentclientprotocol" / "sdk" / "package.json").exists()
    if node and ready:
        return node
    reason = "the Node client is not installed: run bash .ci/install-acp-client.sh (node and npm needed)"
    if os.environ.get("AGENTD_TEST_STRICT") == "1":
        pytest.fail(f"{reason} (AGENTD_TEST_STRICT=1: .ci/run installs it)")
    pytest.skip(reason)


async def test_acp_journey_through_the_typescript_sdk(
    emulator: Emulator, workspace: Path, data_dir: Path, tmp_path: Path
) -> None:
    """Issue 10 Part 2: the acp tier's journey, by the TypeScript SDK (see the module docstring)."""
    node = _node()
    (workspace / "a.txt").write_text("alpha on disk\n")
    emulator.script({"answers": TURN_1 + TURN_2 + TURN_3})
    env = {**agent_env(data_dir, emulator.url), "AGENTD_WS": str(workspace), "AGENTD_ERR": str(tmp_path / "agent.err"),
           "AGENTD_CMD": json.dumps([sys.executable, "-m", "agentd", "--acp"])}  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        node, str(CLIENT / "journey.mjs"), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=env, cwd=str(ROOT),
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert (proc.returncode, err.decode()) == (0, ""), (tmp_path / "agent.err").read_text()
    phases = {p["phase"]: p for p in map(json.loads, out.decode().splitlines())}
    first, second = phases["first"], phases["second"]

    init = first["initialized"]
    assert (init["protocolVersion"], init["agentCapabilities"]["loadSession"]) == (1, True)
    assert first["stops"] == ["end_turn", "cancelled"] and first["cancelMs"] < 1000
    assert wait_survivors(MARK, 0) == [] and survivors(MARK) == []
    assert (workspace / "notes.md").read_text() == "# Notes\n" and not (workspace / "secret.md").exists()
    sid = first["sessionId"]
    assert [[o["kind"] for o in p["options"]] for p in first["permissions"]] == [
        ["allow_once", "allow_always", "reject_once", "reject_always"]] * 2 + [
        ["allow_once", "reject_once", "reject_always"]]  # a compound command: no "always" covers it  # fmt: skip
    audit = [json.loads(x) for x in (data_dir / "sessions" / sid / "audit.jsonl").read_text().splitlines()]
    assert ("write_file", "deny", "user") in [(x["tool"], x["decision"], x["decidedBy"]) for x in audit]
    updates: list[dict[str, Any]] = [p["update"] for p in first["updates"]]
    rejected = [u for u in updates if u.get("toolCallId") == "toolu_emu_4_1" and u.get("status") == "failed"]
    assert rejected and rejected[0]["content"][0]["content"]["text"] == REJECTED

    assert [s["sessionId"] for s in second["listed"]["sessions"]] == [sid]
    replay = [p["update"] for p in second["replay"] if (p.get("_meta") or {}).get("agentd", {}).get("replay")]
    assert next(u["sessionUpdate"] for u in replay) == "session_info_update"
    assert [e["status"] for e in [u for u in replay if u["sessionUpdate"] == "plan"][-1]["entries"]] == [
        "completed", "completed"]  # fmt: skip
    assert second["stop"] == "end_turn"
    assert emulator.journal[-1]["usage"]["cache_read_input_tokens"] > 0
    assert phases["exit"]["code"] == 0
