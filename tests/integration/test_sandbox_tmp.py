"""sandbox-tmp: a project or a tool under /tmp works in the sandbox (found from outside: with the checkout
cloned under /tmp, every sandboxed MCP server's python vanished, because the sandbox mounts an empty /tmp).
The folders here are made under /tmp itself (not under $TMPDIR, which may lie elsewhere), so these tests
hold the promise wherever the checkout lives: the workspace under /tmp is bound writable, an MCP server's
virtualenv, script and PYTHONPATH under /tmp are shown read-only, and the rest of /tmp stays private.

Needs a working bubblewrap (a failure under AGENTD_TEST_STRICT=1, as every sandbox test)."""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd.config import Settings
from agentd.core.factory import session_launcher
from agentd.mcp.manager import specs_from_settings, start_servers
from agentd.permissions.protected import ProtectedPaths
from agentd.persistence.paths import DataDir
from agentd.sandbox import Launcher, build_policy, detect
from agentd.tools.base import ToolContext, validate_input
from agentd.tools.shell import RunCommand
from tests.sandbox_fixtures import needs_bwrap

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def under_tmp() -> Iterator[Path]:
    """A fresh folder directly under /tmp, with `ws/` (the workspace) and `secret.txt` beside it."""
    top = Path(tempfile.mkdtemp(prefix="agentd-sandbox-tmp-", dir="/tmp")).resolve()
    (top / "ws").mkdir()
    (top / "secret.txt").write_text("next to the workspace\n")
    try:
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


async def test_a_workspace_under_tmp_is_writable_and_the_rest_of_tmp_private(
    under_tmp: Path, tmp_path: Path
) -> None:
    """sandbox-tmp: run_command in a workspace under /tmp writes it; the file next to it is not there."""
    needs_bwrap()
    ws = under_tmp / "ws"
    policy = build_policy([ws], ProtectedPaths.of(tmp_path / "home", tmp_path / "cfg", tmp_path / "data"))
    ctx = ToolContext(root=ws, env={"PATH": "/usr/bin:/bin"}, run_timeout_s=20,
                      launcher=Launcher("required", detect(), policy))  # fmt: skip
    args, err = validate_input(
        RunCommand(), {"command": f"echo made > made.txt && pwd; cat {under_tmp}/secret.txt"}
    )
    assert err is None
    out = await RunCommand().run(args, ctx)
    assert out.content.startswith(f"{ws}\n"), out.content
    assert "No such file or directory" in out.content and "next to the workspace" not in out.content
    assert (ws / "made.txt").read_text() == "made\n"


async def test_an_mcp_server_installed_under_tmp_runs_in_the_sandbox(
    under_tmp: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sandbox-tmp: a virtualenv under /tmp, a server script under /tmp and a PYTHONPATH entry (the SDK's
    site-packages) start and answer in the sandbox; the tool's folder is read-only there; the rest of /tmp
    stays private."""
    needs_bwrap()
    tool = under_tmp / "tool"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(tool / "venv")], check=True, timeout=120
    )
    shutil.copy(REPO / "tests" / "mcp_servers" / "demo.py", tool / "server.py")
    monkeypatch.setenv("AGENTD_CONFIG_DIR", str(tmp_path / "config"))
    server = {"command": str(tool / "venv" / "bin" / "python"), "args": [str(tool / "server.py")],
              "env": {"PYTHONPATH": ":".join(site.getsitepackages())}}  # fmt: skip
    settings = Settings.model_validate({"mcp": {"servers": {"tool": server}}, "sandbox": "required"})
    warnings: list[str] = []
    ws = under_tmp / "ws"
    mcp = await start_servers(specs_from_settings(settings), ws, settings, warn=warnings.append,
                              launcher=session_launcher(settings, ws, DataDir(tmp_path / "data")))  # fmt: skip
    assert mcp is not None and warnings == []
    try:
        assert [(s["sandboxed"], s["state"]) for s in mcp.status()] == [(True, "running")]
        conn = mcp.connections[0]

        async def call(name: str, **args: str) -> str:
            result = await conn.call(name, args, 30)
            return "".join(getattr(c, "text", "") for c in result.content)

        assert await call("echo", text="hi") == "hi"
        assert await call("write_text", path=str(ws / "made.txt"), text="x") == "ok"
        assert "Read-only file system" in await call("write_text", path=str(tool / "planted.py"), text="x")
        assert "No such file or directory" in await call("read_text", path=str(under_tmp / "secret.txt"))
    finally:
        await mcp.aclose()
    assert not (tool / "planted.py").exists() and (ws / "made.txt").read_text() == "x"
