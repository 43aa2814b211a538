"""The trust boundary (issue 12 §5): a workspace's hooks and MCP servers do not run until the user trusts
the workspace; trusting it (`agentd trust DIR`) runs them; a change of its hooks or servers, or `--revoke`,
untrusts it again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agentd.clock import ManualClock
from agentd.config import load_settings
from agentd.core.factory import create_session
from agentd.permissions.approver import QueueApprover
from agentd.persistence.paths import DataDir
from agentd.providers.scripted import ScriptedProvider
from agentd.tools.base import Preview


def hooked_workspace(tmp_path: Path) -> tuple[Path, Path]:
    ws, ran = tmp_path / "ws", tmp_path / "hook-ran"
    (ws / ".agentd").mkdir(parents=True)
    (ws / ".agentd" / "config.toml").write_text(
        f'[[hooks.before_tool]]\nname = "ws-hook"\ncommand = "touch {ran}"\n'
    )
    return ws, ran


async def decide_once(ws: Path, data: Path, lines: list[str]) -> None:
    session = create_session(
        cwd=ws, settings=load_settings(ws), provider=ScriptedProvider({"answers": []}), data_dir=DataDir(data),
        approver=QueueApprover.of("reject_once"), clock=ManualClock(), lines=lines.append,
    )  # fmt: skip
    try:
        await session.p.gate.decide(
            "read_file", {"path": "a"}, Preview(summary="Read a", path=str(ws / "a")), "t"
        )
    finally:
        session.close()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentd", *args], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ), check=False)  # fmt: skip


async def test_untrusted_hooks_do_not_run_trusting_runs_them(tmp_path: Path) -> None:
    ws, ran = hooked_workspace(tmp_path)
    lines: list[str] = []
    await decide_once(ws, tmp_path / "data", lines)
    assert not ran.exists()
    want = f"[Trust] the hooks of {ws}/.agentd/config.toml do not run: this workspace is not trusted"
    assert [line for line in lines if line.startswith(want)] != []
    done = cli("trust", str(ws))
    assert (done.returncode, done.stderr.splitlines()[0]) == (
        0,
        f"agentd: {ws} is trusted; its hooks and MCP servers run from the next session on",
    )
    await decide_once(ws, tmp_path / "data", [])
    assert ran.exists()


async def test_changed_hooks_and_revoke_untrust(tmp_path: Path) -> None:
    ws, ran = hooked_workspace(tmp_path)
    assert cli("trust", str(ws)).returncode == 0
    cfg = ws / ".agentd" / "config.toml"
    cfg.write_text(cfg.read_text().replace("touch", "touch -c"))  # the repository changed its hook
    await decide_once(ws, tmp_path / "data", [])
    assert not ran.exists()
    assert cli("trust", str(ws)).returncode == 0
    assert str(ws) in cli("trust", "--list").stdout
    assert cli("trust", "--revoke", str(ws)).stderr == f"agentd: {ws} is no longer trusted\n"
    await decide_once(ws, tmp_path / "data", [])
    assert not ran.exists()


def test_a_forged_trust_entry_counts_for_nothing(tmp_path: Path) -> None:
    from agentd.core.factory import trust_store

    store = trust_store()
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.write_text('{"trusted": [{"workspace": "/x", "digest": "sha256:0", "mac": "hmac-sha256:00"}]}')
    assert store.entries() == []


async def test_untrusted_mcp_servers_do_not_start_trusting_starts_them(tmp_path: Path) -> None:
    """Issue 12 acceptance ("an untrusted workspace's hooks and MCP servers do not start; trusting it starts
    them"), follow-up item 6: a workspace's `[mcp.servers.NAME]` were dropped for good, so trusting the
    workspace never started them. They are now held until the user trusts the workspace with exactly those
    definitions; a user's server of the same name keeps the user's definition."""
    import json

    from agentd.core.factory import session_mcp_specs, untrusted_notice
    from agentd.mcp.manager import start_servers

    repo = Path(__file__).resolve().parents[2]
    ws = tmp_path / "ws"
    (ws / ".agentd").mkdir(parents=True)
    cfg = ws / ".agentd" / "config.toml"
    cfg.write_text(f"[mcp.servers.demo]\ncommand = {json.dumps(sys.executable)}\n"
                   f'args = ["-m", "tests.mcp_servers.demo"]\nenv = {{ PYTHONPATH = {json.dumps(str(repo))} }}\n')  # fmt: skip
    settings = load_settings(ws)
    assert settings.mcp.servers == {} and list(settings.workspace_mcp_servers) == ["demo"]
    assert session_mcp_specs(settings, ws) == []
    notice = untrusted_notice(settings, ws.resolve())
    assert notice is not None and notice.startswith(
        f"the MCP servers of {ws.resolve()}/.agentd/config.toml do not run"
    )
    lines: list[str] = []
    await decide_once(ws, tmp_path / "data", lines)
    assert [line for line in lines if line.startswith("[Trust] the MCP servers of")] != []

    done = cli("trust", str(ws))
    assert done.returncode == 0 and "  mcp server demo: " in done.stderr, done.stderr
    specs = session_mcp_specs(load_settings(ws), ws)
    assert [(s.name, s.args) for s in specs] == [("demo", ("-m", "tests.mcp_servers.demo"))]
    mcp = await start_servers(specs, ws, load_settings(ws), warn=lines.append)
    assert mcp is not None
    try:
        assert "mcp__demo__echo" in [t.name for t in mcp.tools()]
    finally:
        await mcp.aclose()

    cfg.write_text(cfg.read_text().replace("tests.mcp_servers.demo", "tests.mcp_servers.other"))  # changed
    assert session_mcp_specs(load_settings(ws), ws) == []
    user = Path(os.environ["AGENTD_CONFIG_DIR"]) / "config.toml"
    assert cli("trust", str(ws)).returncode == 0
    saved = user.read_text() if user.exists() else None
    user.write_text('[mcp.servers.demo]\ncommand = "user-demo"\n')
    try:
        assert [s.command for s in session_mcp_specs(load_settings(ws), ws)] == ["user-demo"]
    finally:
        user.unlink() if saved is None else user.write_text(saved)


def test_trust_list_says_when_a_grant_is_not_in_effect(tmp_path: Path) -> None:
    """New-user trial: after the workspace's MCP server or hook changed, `agentd trust --list` still showed it
    as trusted while the sessions (rightly) ran without them. The line now says the grant is not in effect and
    how to renew it; a gone folder is named too."""
    ws, _ = hooked_workspace(tmp_path)
    assert cli("trust", str(ws)).returncode == 0
    mine = [x for x in cli("trust", "--list").stdout.splitlines() if x.startswith(f"{ws}  ")]
    assert len(mine) == 1 and mine[0].endswith(")"), mine
    cfg = ws / ".agentd" / "config.toml"
    cfg.write_text(cfg.read_text().replace("touch", "touch -c"))
    mine = [x for x in cli("trust", "--list").stdout.splitlines() if x.startswith(f"{ws}  ")]
    assert len(mine) == 1 and mine[0].endswith(
        f"[NOT in effect: its hooks or MCP servers changed since; run `agentd trust {ws}` again]"
    )
    assert cli("trust", str(ws)).returncode == 0
    (ws / ".agentd" / "config.toml").unlink()
    (ws / ".agentd").rmdir()
    ws.rmdir()
    mine = [x for x in cli("trust", "--list").stdout.splitlines() if x.startswith(f"{ws}  ")]
    assert len(mine) == 1 and mine[0].endswith("[the folder is gone]")
