"""agentd through a real ACP client an editor ships: CodeCompanion.nvim in the real headless Neovim of the nvim
tier, driven as its users drive it (tests/acp/codecompanion/drive.lua: a chat, a typed prompt, approvals
answered with the keys CodeCompanion shows). Opt-in: CodeCompanion is not part of agentd and the test machine
has no network, so the test runs when `AGENTD_CODECOMPANION_DIR` names a folder holding checkouts of
`codecompanion.nvim` and `plenary.nvim` (docs/acp.md, "Trying a real client")."""

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

DRIVER = Path(__file__).parent / "codecompanion" / "drive.lua"


def _checkout() -> Path:
    folder = os.environ.get("AGENTD_CODECOMPANION_DIR")
    if not folder or not (Path(folder) / "codecompanion.nvim" / "lua").is_dir():
        pytest.skip(
            "opt-in: set AGENTD_CODECOMPANION_DIR to a folder with codecompanion.nvim and plenary.nvim"
        )
    return Path(folder)


def test_a_codecompanion_chat_with_approvals_and_a_slash_command(
    emulator: Emulator, workspace: Path, data_dir: Path, tmp_path: Path
) -> None:
    checkout = _checkout()
    nvim = Path(sysconfig.get_path("scripts")) / "nvim"
    (workspace / "a.txt").write_text("alpha on disk\n")
    emulator.script({"answers": TURN_1})
    out = tmp_path / "out.json"
    env = {**agent_env(data_dir, emulator.url), "CODECOMPANION_DIR": str(checkout), "AGENTD_OUT": str(out),
           "AGENTD_CMD": json.dumps([sys.executable, "-m", "agentd", "--acp"]),
           "AGENTD_PROMPTS": json.dumps(["/status", "Take notes on a.txt"]),
           "AGENTD_ANSWERS": json.dumps(["Accept", "Reject"])}  # fmt: skip
    done = subprocess.run([str(nvim), "--headless", "-u", "NONE", "-i", "NONE", "-l", str(DRIVER)], cwd=workspace,
                          env=env, capture_output=True, text=True, timeout=180)  # fmt: skip
    seen = json.loads(out.read_text())
    assert (done.returncode, seen.get("error")) == (0, None), done.stderr[-2000:]
    text = "\n".join(seen["buffer"])
    assert "Model: claude-sonnet-4-6 (anthropic), mode default" in text  # /status, answered by agentd itself
    assert "Read: a.txt" in text and "Edit: notes.md" in text and "Done." in text
    assert [a["want"] for a in seen["approvals"]] == ["Accept", "Reject"] and all(
        a["key"] for a in seen["approvals"]
    )
    assert (workspace / "notes.md").read_text() == "# Notes\n" and not (workspace / "secret.md").exists()
    assert seen["title"] == "Take notes on a.txt"
    assert [o["id"] for o in seen["config_options"]] == ["mode"]
