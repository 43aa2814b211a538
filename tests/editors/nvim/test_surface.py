"""The plugin without a daemon: its commands, `:help agentd` tags, key mappings, and the LSP config that
`vim.lsp.enable('agentd')` uses (capabilities, root markers, handlers, setup() options, overrides)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.editors.nvim.harness import PLUGIN, Nvim

DOC = PLUGIN / "doc" / "agentd.txt"


def test_commands_help_keymaps_and_lsp_config(nvim_bin: str, tmp_path: Path) -> None:
    doc = tmp_path / "rtp" / "doc"
    doc.mkdir(parents=True)
    shutil.copy(DOC, doc / "agentd.txt")
    tags = sorted(set(re.findall(r"\*([^*\s]+)\*", DOC.read_text(encoding="utf-8"))))
    out = Nvim(nvim_bin, tmp_path).run("surface", AGENTD_DOC=str(doc), AGENTD_TAGS=tags)
    assert out["help"] == dict.fromkeys(tags, True)
    assert {"agentd", ":Agentd", ":AgentdSessions", "agentd-options", "agentd-health"} <= set(tags)
    assert out["commands"] == {
        "Agentd": {"nargs": "*", "range": True},
        "AgentdNew": {"nargs": "0", "range": False},
        "AgentdSessions": {"nargs": "0", "range": False},
        "AgentdCancel": {"nargs": "0", "range": False},
        "AgentdTodos": {"nargs": "0", "range": False},
        "AgentdChat": {"nargs": "0", "range": False},
        "AgentdStatus": {"nargs": "0", "range": False},
        "AgentdMode": {"nargs": "1", "range": False},
        "AgentdRestart": {"nargs": "0", "range": False},
        "AgentdRewind": {"nargs": "*", "range": False},
        "AgentdFork": {"nargs": "?", "range": False},
    }
    assert out["default_config"] == {
        "cmd": ["agentd"],
        "root_markers": [".agentd", ".git", ".hg", ".jj"],
        "capabilities": {
            "workspace": {"workspaceEdit": {"documentChanges": True}},
            "experimental": {
                "agentd": {"protocolVersion": 1, "requestPermission": True, "saveAfterApply": True}
            },
        },
        "init_options": None,
        "handlers": [
            "$/progress",
            "agentd/session/requestPermission",
            "agentd/session/update",
            "workspace/applyEdit",
        ],
    }
    assert out["configured"] == {
        "cmd": ["my-agentd", "--stdio"],
        "init_options": {"provider": "openai", "model": "qwen2.5-coder"},
        "cmd_env": {"AGENTD_DATA_DIR": "/tmp/agentd-data"},
    }
    assert out["override_wins"] == ["override"]
    assert out["keymaps"] == {
        "<leader>aa": "agentd: prompt",
        "<leader>an": "agentd: new session",
        "<leader>as": "agentd: resume a session",
        "<leader>ac": "agentd: cancel the turn",
        "<leader>T": "agentd: show the plan",
        "<leader>ao": None,
    }
    assert out["visual_prompt"] == "agentd: prompt about the selection"
