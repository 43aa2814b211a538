"""agentd through avante.nvim's ACP client (`lua/avante/libs/acp_client.lua`, the library avante's chat runs on)
in the real headless Neovim of the nvim tier (tests/acp/avante/drive.lua): initialize, session/new, mode
changes, a prompt whose reads and writes go through avante's `fs/*` handlers and whose two approvals are
answered allow_once then reject_once, and session/load. Opt-in: avante is not part of agentd and the test
machine has no network, so the test runs when `AGENTD_AVANTE_DIR` names a checkout of `avante.nvim`
(docs/acp.md, "Trying a real client")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from agentd.testing.emulator import Emulator
from tests.acp.harness import agent_env
from tests.acp.scenario import TURN_1

DRIVER = Path(__file__).parent / "avante" / "drive.lua"
PASSED_ON = ("AGENTD_DATA_DIR", "PYTHONPATH", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "HOME", "XDG_CONFIG_HOME",
             "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")  # fmt: skip


def _checkout() -> Path:
    folder = os.environ.get("AGENTD_AVANTE_DIR")
    if not folder or not (Path(folder) / "lua" / "avante" / "libs" / "acp_client.lua").is_file():
        pytest.skip("opt-in: set AGENTD_AVANTE_DIR to a checkout of avante.nvim")
    return Path(folder)


def test_avantes_acp_client_runs_a_session_with_approvals_and_client_files(
    emulator: Emulator, workspace: Path, data_dir: Path, tmp_path: Path
) -> None:
    checkout = _checkout()
    nvim = Path(sysconfig.get_path("scripts")) / "nvim"
    (workspace / "a.txt").write_text("alpha on disk\n")
    emulator.script({"answers": TURN_1})
    out = tmp_path / "out.json"
    agent = agent_env(data_dir, emulator.url)
    env = {**agent, "AVANTE_DIR": str(checkout), "AGENTD_OUT": str(out), "AGENTD_PROMPT": "Take notes on a.txt",
           "AGENTD_ENV": json.dumps({k: agent[k] for k in PASSED_ON if k in agent}),  # avante passes only these
           "AGENTD_CMD": json.dumps([sys.executable, "-m", "agentd", "--acp"]),
           "AGENTD_ANSWERS": json.dumps(["allow_once", "reject_once"])}  # fmt: skip
    done = subprocess.run([str(nvim), "--headless", "-u", "NONE", "-i", "NONE", "-l", str(DRIVER)], cwd=workspace,
                          env=env, capture_output=True, text=True, timeout=180)  # fmt: skip
    seen = json.loads(out.read_text())
    assert (done.returncode, seen.get("error"), seen["notes"]) == (0, None, []), done.stderr[-2000:]
    assert seen["steps"] == ["initialize", "new", "set_mode", "prompt", "load"]
    assert [o["id"] for o in seen["set_mode"]["options"]] == ["mode"]
    assert seen["prompt"].get("err") is None and seen["prompt"]["result"]["stopReason"] == "end_turn"
    assert seen["prompt"]["result"]["usage"]["cachedReadTokens"] > 0
    assert [(p["title"], p["pick"]) for p in seen["permissions"]] == [
        ("Write notes.md", "allow_once"), ("Write secret.md", "reject_once")]  # fmt: skip
    ws = str(workspace.resolve())
    assert seen["reads"] == [f"{ws}/a.txt"] and seen["writes"] == [f"{ws}/notes.md"]
    assert (workspace / "notes.md").read_text() == "# Notes\n" and not (workspace / "secret.md").exists()
    assert seen["load"].get("err") is None
    replayed = [u for u in seen["updates"] if u["sessionUpdate"] == "user_message_chunk"]
    assert [u["content"]["text"] for u in replayed] == ["Take notes on a.txt"]
