"""MCP pieces without a server (issue 11): tool names, result mapping, ACP server definitions, config
(a workspace file may not start programs), and rules by server."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from agentd.config import load_settings, tool_name_problem
from agentd.mcp.connection import ServerSpec
from agentd.mcp.manager import specs_from_settings
from agentd.mcp.tools import map_result, qualified_name
from agentd.permissions.rules import Rule, strictest


def test_qualified_names() -> None:
    assert qualified_name("git", "git_status") == "mcp__git__git_status"
    assert qualified_name("fs", "read.file v2") == "mcp__fs__read_file_v2"
    long = qualified_name("server", "x" * 80)
    assert (
        len(long) == 64 and long.startswith("mcp__server__xxx") and long != qualified_name("server", "x" * 81)
    )


def test_result_mapping() -> None:
    result = NS(
        is_error=False,
        structured_content=None,
        content=[
            NS(type="text", text="hello"),
            NS(type="resource_link", name="a.txt", uri="file:///a.txt", description=None),
            NS(type="resource", resource=NS(uri="mem://n", text="note body")),
            NS(type="resource", resource=NS(uri="mem://b", mime_type="application/zip")),
            NS(
                type="image",
                data="iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAAC0lEQVR4nGNgAAIAAAUAAXpeqz8AAAAASUVORK5CYII=",
                mime_type="image/png",
            ),
            NS(type="audio", data="QUJD", mime_type="audio/wav"),
        ],
    )
    out = map_result(result, 1000)
    assert out.content == (
        "hello\n[resource: a.txt file:///a.txt]\n[resource mem://n]\nnote body\n"
        "[resource mem://b: application/zip, 0 bytes, not shown]\n"
        "[audio audio/wav, 3 bytes: not shown (the model takes no audio)]"
    )
    assert out.images == [
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/png",
                "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAAC0lEQVR4nGNgAAIAAAUAAXpeqz8AAAAASUVORK5CYII=",
            },
        }
    ]
    big = map_result(
        NS(is_error=True, structured_content=None, content=[NS(type="text", text="x" * 5000)]), 1000
    )
    assert big.is_error and "[... 4000 of 5000 bytes omitted ...]" in big.content
    structured = map_result(NS(is_error=False, structured_content={"b": 1, "a": 2}, content=[]), 1000)
    assert structured.content == '{"a": 2, "b": 1}'


def test_acp_server_definitions() -> None:
    stdio = ServerSpec.from_acp({"name": "git", "command": "uvx", "args": ["mcp-server-git"],
                                 "env": [{"name": "A", "value": "1"}]})  # fmt: skip
    assert (stdio.command, stdio.args, dict(stdio.env)) == ("uvx", ("mcp-server-git",), {"A": "1"})
    http = ServerSpec.from_acp({"type": "http", "name": "d", "url": "http://127.0.0.1:1/mcp",
                                "headers": [{"name": "X", "value": "y"}]})  # fmt: skip
    assert (http.url, dict(http.headers)) == ("http://127.0.0.1:1/mcp", {"X": "y"})
    with pytest.raises(ValueError):
        ServerSpec.from_acp({"type": "sse", "name": "old", "url": "http://x"})


def test_a_workspace_files_servers_wait_for_trust(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A workspace's servers are kept apart (`workspace_mcp_servers`) and not started unless the caller
    says the user trusts the workspace (agentd.core.factory.session_mcp_specs); editor options cannot set
    them."""
    monkeypatch.setenv("AGENTD_CONFIG_DIR", str(tmp_path / "cfg"))
    ws = tmp_path / "ws"
    (ws / ".agentd").mkdir(parents=True)
    (ws / ".agentd" / "config.toml").write_text('[mcp.servers.evil]\ncommand = "sh"\nargs = ["-c", "id"]\n')
    warnings: list[str] = []
    settings = load_settings(
        ws, editor_options={"workspaceMcpServers": {"x": {"command": "sh"}}}, warnings=warnings
    )
    assert settings.mcp.servers == {} and list(settings.workspace_mcp_servers) == ["evil"]
    assert specs_from_settings(settings) == []
    assert [s.name for s in specs_from_settings(settings, workspace_trusted=True)] == ["evil"]
    assert any("initializationOptions.workspace_mcp_servers ignored" in w for w in warnings), warnings


def test_rules_by_server() -> None:
    rules = [Rule(tool="mcp__git__*", action="allow"), Rule(tool="mcp__git__git_reset", action="deny")]
    assert strictest(rules, "mcp__git__git_status") == rules[0]
    assert strictest(rules, "mcp__git__git_reset") == rules[1]
    assert strictest(rules, "mcp__gitx__status") is None and strictest(rules, "run_command") is None
    assert tool_name_problem("mcp__git__*") is None
