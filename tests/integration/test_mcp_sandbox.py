"""MCP stdio servers start inside the sandbox when it is active (issue 12 §1, follow-up item 4), as
`run_command` does: through the session's launcher. Inside, a server writes the workspace and nothing
else, cannot read `~/.ssh`, agentd's data dir or its config, cannot reach a listener on 127.0.0.1 (unless
its `network = true`), cannot read agentd's own process, and never gets the API key. `sandbox = false`
runs one outside; `sandbox = "required"` refuses that with a warning naming the server."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentd.config import Settings
from agentd.core.factory import session_launcher
from agentd.mcp.manager import MCPManager, specs_from_settings, start_servers
from agentd.persistence.paths import DataDir
from tests.sandbox_fixtures import Box, box, needs_bwrap

__all__ = ["box"]
REPO = Path(__file__).resolve().parents[2]
DEMO = {"command": sys.executable, "args": ["-m", "tests.mcp_servers.demo"],
        "env": {"PYTHONPATH": str(REPO), "HOME": "{home}", "ANTHROPIC_API_KEY": "sk-ant-leak"}}  # fmt: skip


async def _servers(b: Box, monkeypatch: pytest.MonkeyPatch, servers: dict[str, Any], **cfg: Any,
                   ) -> tuple[MCPManager | None, list[str]]:  # fmt: skip
    monkeypatch.setenv("HOME", str(b.home))
    monkeypatch.setenv("AGENTD_CONFIG_DIR", str(b.config))
    for spec in servers.values():
        spec["env"] = {k: v.replace("{home}", str(b.home)) for k, v in spec.get("env", {}).items()}
    mode = cfg.pop(
        "sandbox", "auto"
    )  # the box stands for the read-only rest of the file system (sandbox-tmp)
    settings = Settings.model_validate(
        {"mcp": {"servers": servers}, "sandbox": {"mode": mode, "readable": b.readable}, **cfg}
    )
    warnings: list[str] = []
    launcher = session_launcher(settings, b.ws, DataDir(b.data))
    mcp = await start_servers(specs_from_settings(settings), b.ws, settings, warn=warnings.append,
                              launcher=launcher)  # fmt: skip
    return mcp, warnings


async def _call(mcp: MCPManager, server: str, tool: str, **args: Any) -> str:
    conn = next(c for c in mcp.connections if c.spec.name == server)
    result = await conn.call(tool, args, 30)
    return "".join(getattr(c, "text", "") for c in result.content)


@pytest.fixture
async def listener() -> AsyncIterator[int]:
    server = await asyncio.start_server(lambda _r, w: w.close(), "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


async def test_a_stdio_server_runs_in_the_sandbox(
    box: Box, monkeypatch: pytest.MonkeyPatch, listener: int
) -> None:
    needs_bwrap()
    mcp, warnings = await _servers(box, monkeypatch, {"demo": dict(DEMO)})
    assert mcp is not None and warnings == []
    try:
        assert [(s["name"], s["sandboxed"], s["state"]) for s in mcp.status()] == [("demo", True, "running")]
        assert await _call(mcp, "demo", "write_text", path=str(box.ws / "made.txt"), text="hi") == "ok"
        assert (box.ws / "made.txt").read_text() == "hi"
        for path in (box.home / "escaped.txt", box.outside / "escaped.txt", box.ws / ".git" / "config"):
            assert (await _call(mcp, "demo", "write_text", path=str(path), text="x")).startswith("error: "), (
                path
            )
        assert (
            not (box.home / "escaped.txt").exists() and (box.ws / ".git" / "config").read_text() == "[core]\n"
        )
        for path in (box.home / ".ssh" / "id_ed25519", box.home / ".netrc", box.config / "config.toml",
                     box.data / "sessions" / "s1" / "log.jsonl", Path(f"/proc/{os.getpid()}/environ")):  # fmt: skip
            text = await _call(mcp, "demo", "read_text", path=str(path))
            assert text.startswith("error: ") or text == "", (path, text)  # hidden: missing or an empty file
        assert (await _call(mcp, "demo", "connect", port=listener)).startswith("error: ")
        assert await _call(mcp, "demo", "env", name="ANTHROPIC_API_KEY") == "(unset)"
    finally:
        await mcp.aclose()


async def test_network_true_lets_a_sandboxed_server_connect(
    box: Box, monkeypatch: pytest.MonkeyPatch, listener: int
) -> None:
    needs_bwrap()
    mcp, _ = await _servers(box, monkeypatch, {"demo": {**DEMO, "network": True}})
    assert mcp is not None
    try:
        assert mcp.status()[0]["sandboxed"] is True
        assert await _call(mcp, "demo", "connect", port=listener) == "connected"
        text = await _call(mcp, "demo", "read_text", path=str(box.home / ".ssh" / "id_ed25519"))
        assert "PRIVATE KEY" not in text  # the network is open; the secrets stay hidden
    finally:
        await mcp.aclose()


async def test_sandbox_false_runs_outside_and_required_refuses_it(
    box: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    needs_bwrap()
    mcp, _ = await _servers(box, monkeypatch, {"demo": {**DEMO, "sandbox": False}})
    assert mcp is not None
    try:
        assert mcp.status()[0]["sandboxed"] is False
        text = await _call(mcp, "demo", "read_text", path=str(box.home / ".ssh" / "id_ed25519"))
        assert text == "PRIVATE KEY\n"  # outside the sandbox: the user's rights, as configured
    finally:
        await mcp.aclose()
    mcp, warnings = await _servers(box, monkeypatch, {"demo": {**DEMO, "sandbox": False}}, sandbox="required")
    assert mcp is not None
    try:
        assert warnings == ['MCP server demo did not start (sandbox = "required" and this server is configured '
                            "with sandbox = false)"]  # fmt: skip
        assert json.dumps(mcp.status()[0]["state"]) == '"failed"'
    finally:
        await mcp.aclose()
