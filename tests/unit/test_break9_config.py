"""H13 (break9): a tool hook whose `matcher` names no tool never runs, so a `before_tool` hook meant to deny
(exit 2) blocked nothing, silently, as a rule naming no tool did before H13. It is a warning with a "did you
mean", in the user file and in a workspace file (whose hooks run once the workspace is trusted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentd.config import load_settings, user_config_path


def test_a_hook_matcher_naming_no_tool_is_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """H13 (break9): `matcher = "wirte_file"` and `"run_comand(git push *)"` are warnings naming the file,
    the hook and the close tool; `*`, a pattern of a real tool and an MCP name are not."""
    monkeypatch.setenv("AGENTD_CONFIG_DIR", str(tmp_path / "cfg"))
    path = user_config_path()
    path.parent.mkdir(parents=True)
    path.write_text(
        '[[hooks.before_tool]]\nmatcher = "wirte_file"\ncommand = "exit 2"\n'
        '[[hooks.before_tool]]\nmatcher = "*"\ncommand = "true"\n'
        '[[hooks.after_tool]]\nmatcher = "run_command(git push *)"\ncommand = "true"\n'
        '[[hooks.after_tool]]\nmatcher = "run_comand(git push *)"\ncommand = "true"\n'
        '[[hooks.after_tool]]\nmatcher = "mcp__github__create_issue"\ncommand = "true"\n'
    )
    ws = tmp_path / "ws"
    (ws / ".agentd").mkdir(parents=True)
    ws_file = ws / ".agentd" / "config.toml"
    ws_file.write_text('[[hooks.beforeTool]]\nmatcher = "edit_fiel"\ncommand = "true"\n')
    warnings: list[str] = []
    load_settings(ws, warnings=warnings)
    matchers = [w for w in warnings if ".matcher:" in w]
    assert [w.split(": no tool is named ")[0] for w in matchers] == [
        f"{path}: hooks.before_tool[0].matcher",
        f"{path}: hooks.after_tool[1].matcher",
        f"{ws_file}: hooks.before_tool[0].matcher",
    ]
    assert "did you mean 'write_file'?" in matchers[0] and matchers[0].endswith("; this hook never runs")
    assert "did you mean 'run_command'?" in matchers[1] and "did you mean 'edit_file'?" in matchers[2]
