"""MCP servers as session tools (issue 11), offline, with real servers: one written with the SDK's server
API (`tests/mcp_servers/demo.py`) and the reference `mcp-server-git` from the package index on a real git
repository. Listed in a fixed order, called through the permission gate (approval, rules by exact name and
`mcp__NAME__*`), audited, results mapped (text, image, resource link), cancelled mid-call, killed and
restarted on the next call, timed out, a failed start as a warning with the server's stderr, and a server
environment holding only what the config gives it."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentd.clock import ManualClock
from agentd.config import Settings
from agentd.core.factory import create_session, session_launcher
from agentd.core.session import Session
from agentd.mcp.manager import MCPManager, specs_from_settings, start_servers
from agentd.permissions.approver import QueueApprover
from agentd.persistence.paths import DataDir
from agentd.providers.scripted import ScriptedProvider
from agentd.sandbox.status import detect
from tests.mcp_servers.demo import PNG

REPO = Path(__file__).resolve().parents[2]
DEMO = {"command": sys.executable, "args": ["-m", "tests.mcp_servers.demo"], "env": {"PYTHONPATH": str(REPO)}}


def call(tool: str, /, **args: Any) -> dict[str, Any]:
    return {"reply": [{"tool_use": {"name": tool, "input": args}}]}


def say(text: str) -> dict[str, Any]:
    return {"reply": [{"text": text}]}


class Run:
    """A session with MCP servers on a scripted model; `lines` and `warnings` collected."""

    def __init__(
        self, session: Session, provider: ScriptedProvider, approver: QueueApprover, mcp: MCPManager | None
    ):
        self.session, self.provider, self.approver, self.mcp = session, provider, approver, mcp
        self.lines: list[str] = []
        self.warnings: list[str] = []
        self.running = asyncio.Event()

    def results(self, request: int) -> list[Any]:
        blocks = self.provider.requests[request]["messages"][-1]["content"]
        return [b["content"] for b in blocks if b["type"] == "tool_result"]  # (a stale-plan reminder aside)

    def audit(self, data_dir: Path) -> list[tuple[str, str, str]]:
        path = data_dir / "sessions" / self.session.id / "audit.jsonl"
        return [
            (r["tool"], r["decision"], r["decidedBy"]) for r in map(json.loads, path.read_text().splitlines())
        ]


@pytest.fixture
async def start(workspace: Path, data_dir: Path) -> Any:
    runs: list[Run] = []

    async def make(
        servers: dict[str, Any], answers: list[dict[str, Any]], *approvals: str, **cfg: Any
    ) -> Run:
        settings = Settings.model_validate({"provider": "scripted", "mcp": {"servers": servers}, **cfg})
        warnings: list[str] = []
        launcher = session_launcher(settings, workspace, DataDir(data_dir))  # as the product starts them
        mcp = await start_servers(specs_from_settings(settings), workspace, settings, warn=warnings.append,
                                  launcher=launcher)  # fmt: skip
        provider = ScriptedProvider({"answers": answers}, clock=ManualClock())
        approver = QueueApprover.of(*approvals)  # type: ignore[arg-type]
        lines: list[str] = []
        running = asyncio.Event()  # set when a tool call is in progress (its tool_call_update says so)

        def sink(update: dict[str, Any]) -> None:
            if update.get("sessionUpdate") == "tool_call_update" and update.get("status") == "in_progress":
                running.set()

        session = create_session(cwd=workspace, settings=settings, provider=provider, data_dir=DataDir(data_dir),
                                 approver=approver, clock=ManualClock(), lines=lines.append, mcp=mcp,
                                 sink=sink)  # fmt: skip
        run = Run(session, provider, approver, mcp)
        run.running = running
        run.lines, run.warnings = lines, warnings
        runs.append(run)
        return run

    yield make
    for run in runs:
        await run.session.aclose()


async def test_listed_called_through_an_approval_audited_and_mapped(start: Any, data_dir: Path) -> None:
    run = await start(
        {"demo": DEMO},
        [call("mcp__demo__echo", text="hello"), call("mcp__demo__picture"), call("mcp__demo__fail"), say("done")],
        "allow_once", "allow_once", "allow_once",
    )  # fmt: skip
    assert await run.session.prompt([{"type": "text", "text": "use the server"}]) == "end_turn"
    names = [t["name"] for t in run.provider.requests[0]["tools"]]
    assert names[-12:] == [f"mcp__demo__{n}" for n in ("add", "big", "connect", "crash", "echo", "env", "fail",
                                                      "picture", "read_text", "refuse", "sleep", "write_text")]  # fmt: skip
    echo = next(t for t in run.provider.requests[0]["tools"] if t["name"] == "mcp__demo__echo")
    assert echo["description"] == "[MCP server demo] Return the text as given."
    assert echo["input_schema"]["required"] == ["text"]
    assert [r.tool_name for r in run.approver.requests] == [
        "mcp__demo__echo",
        "mcp__demo__picture",
        "mcp__demo__fail",
    ]
    assert run.approver.requests[0].preview.summary == 'MCP server demo: echo {"text": "hello"}'
    assert run.results(1) == ["hello"]
    assert run.results(2) == [[
        {"type": "text", "text": "a picture\n[resource: pic.png file:///tmp/pic.png - the file]"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
    ]]  # fmt: skip
    failed = run.provider.requests[3]["messages"][-1]["content"][0]
    assert (failed["is_error"], failed["content"]) == (True, "Error executing tool fail")
    assert run.audit(data_dir) == [("mcp__demo__echo", "allow", "user")] * 1 + [
        ("mcp__demo__picture", "allow", "user"), ("mcp__demo__fail", "allow", "user")]  # fmt: skip
    assert "[Permission] mcp__demo__echo -> allow (user)" in run.lines
    assert "[Tool] echo (demo) -> completed" in run.lines


async def test_rules_by_server_and_exact_name_and_read_only_mode(start: Any, data_dir: Path) -> None:
    rules = [{"tool": "mcp__demo__*", "action": "allow"}, {"tool": "mcp__demo__add", "action": "deny"}]
    run = await start(
        {"demo": DEMO},
        [call("mcp__demo__echo", text="x"), call("mcp__demo__add", a=1, b=2), call("mcp__demo__add", a="one"),
         say("ok")],
        permissions={"rules": rules},
    )  # fmt: skip
    await run.session.prompt([{"type": "text", "text": "go"}])
    assert run.approver.requests == []
    assert run.results(1) == ["x"]
    assert run.results(2) == ["mcp__demo__add was denied (rule: mcp__demo__add=deny); the call was not run."]
    assert run.results(3) == [
        "invalid_arguments: input: 'b' is a required property; a: 'one' is not of type 'integer'"
    ]
    assert run.audit(data_dir) == [
        ("mcp__demo__echo", "allow", "rule"), ("mcp__demo__add", "deny", "rule"),
        ("mcp__demo__add", "deny", "invalid_input")]  # fmt: skip
    run.session.p.gate.mode = "readOnly"
    run.provider.scenario["answers"] += [call("mcp__demo__echo", text="y"), say("ok")]
    await run.session.prompt([{"type": "text", "text": "again"}])
    assert run.results(5) == ["mcp__demo__echo was denied (mode: readOnly); the call was not run."]


async def test_cancelled_mid_call_then_killed_and_restarted(start: Any, data_dir: Path) -> None:
    run = await start(
        {"demo": DEMO},
        [call("mcp__demo__sleep", seconds=60)],
        permissions={"rules": [{"tool": "mcp__demo__*", "action": "allow"}]},
    )
    turn = asyncio.ensure_future(run.session.prompt([{"type": "text", "text": "wait"}]))
    await asyncio.wait_for(run.running.wait(), 30)  # the call is running
    run.session.cancel()
    assert await asyncio.wait_for(turn, 10) == "cancelled"
    assert run.audit(data_dir) == [("mcp__demo__sleep", "allow", "rule")]
    conn = run.mcp.connections[0]
    assert (conn.state, conn.starts) == ("running", 1)  # cancelling a call does not stop its server

    run.provider.scenario["answers"] += [
        call("mcp__demo__crash"),
        call("mcp__demo__echo", text="back"),
        say("ok"),
    ]
    assert await run.session.prompt([{"type": "text", "text": "crash it"}]) == "end_turn"
    crashed = run.provider.requests[-2]["messages"][-1]["content"][0]
    assert crashed["is_error"] is True
    assert crashed["content"].startswith(
        "mcp__demo__crash failed: the MCP server demo stopped during the call ("
    )
    assert crashed["content"].endswith("; it will be started again on the next call")
    assert run.results(-1) == ["back"]
    assert (conn.state, conn.starts) == ("running", 2)


async def test_timeout_failed_start_and_environment(start: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-never-passed-on")
    monkeypatch.setenv("AGENTD_TEST_OUTER", "not given")
    env = {**DEMO["env"], "GIVEN": "by config", "OPENAI_API_KEY": "sk-config-has-no-say"}
    broken = {**DEMO, "env": {**DEMO["env"], "DEMO_FAIL_START": "1"}}
    run = await start(
        {"demo": {**DEMO, "env": env, "timeoutS": 1}, "broken": broken},
        [call("mcp__demo__env", name="GIVEN"), call("mcp__demo__env", name="ANTHROPIC_API_KEY"),
         call("mcp__demo__env", name="OPENAI_API_KEY"), call("mcp__demo__env", name="AGENTD_TEST_OUTER"),
         call("mcp__demo__sleep", seconds=30), say("ok")],
        permissions={"rules": [{"tool": "mcp__demo__*", "action": "allow"}]},
    )  # fmt: skip
    assert len(run.warnings) == 1
    assert run.warnings[0].startswith("MCP server broken did not start (")
    assert run.warnings[0].endswith("stderr: demo: cannot start: the database is locked)")
    assert not any(t.name.startswith("mcp__broken__") for t in run.session.p.registry)
    await run.session.prompt([{"type": "text", "text": "env"}])
    assert [run.results(i) for i in range(1, 6)] == [
        ["by config"], ["(unset)"], ["(unset)"], ["(unset)"],
        ["mcp__demo__sleep timed out after 1 s; the call was cancelled."]]  # fmt: skip


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
async def test_mcp_server_git_on_a_real_repository(start: Any, workspace: Path, data_dir: Path) -> None:
    """The reference server from the package index, over stdio, on a real git repository."""
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=T"]
    subprocess.run([*git, "init", "-q", "-b", "main", str(workspace)], check=True)
    (workspace / "a.txt").write_text("one\n")
    subprocess.run([*git, "-C", str(workspace), "add", "a.txt"], check=True)
    subprocess.run([*git, "-C", str(workspace), "commit", "-qm", "first commit"], check=True)
    (workspace / "a.txt").write_text("two\n")
    server = shutil.which("mcp-server-git", path=os.path.dirname(sys.executable))
    assert server, "mcp-server-git is not installed (pip install -c .ci/constraints.txt -e '.[test]')"
    run = await start(
        {"git": {"command": server, "args": ["--repository", str(workspace)]}},
        [call("mcp__git__git_status", repo_path=str(workspace)), call("mcp__git__git_log", repo_path=str(workspace)),
         say("done")],
        "allow_once", "reject_once",
    )  # fmt: skip
    names = [t.name for t in run.session.p.registry if t.name.startswith("mcp__git__")]
    assert "mcp__git__git_status" in names and names == sorted(names)
    await run.session.prompt([{"type": "text", "text": "status"}])
    status = run.results(1)[0]
    assert "On branch main" in status and "modified:   a.txt" in status
    assert run.results(2) == ["The user rejected this call; it was not run."]
    assert run.audit(data_dir) == [
        ("mcp__git__git_status", "allow", "user"),
        ("mcp__git__git_log", "deny", "user"),
    ]


def test_agentd_mcp_list(tmp_path: Path, workspace: Path) -> None:
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    args = ", ".join(json.dumps(a) for a in DEMO["args"])
    (cfg / "config.toml").write_text(
        f"[mcp.servers.demo]\ncommand = {json.dumps(sys.executable)}\nargs = [{args}]\n"
        f"env = {{ PYTHONPATH = {json.dumps(str(REPO))} }}\n"
        f'[mcp.servers.nope]\ncommand = "/nonexistent/mcp-server"\n'
    )
    env = {**os.environ, "AGENTD_CONFIG_DIR": str(cfg)}
    proc = subprocess.run([sys.executable, "-m", "agentd", "mcp", "list", "--workspace", str(workspace)],
                          capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    boxed = " (sandboxed)" if detect().available else ""  # stdio servers start in the sandbox (issue 12 §1)
    assert lines[:2] == [f"demo  stdio{boxed}  running  12 tools", "  mcp__demo__add"]
    assert lines[13:] == [f"nope  stdio{boxed}  failed", lines[14]]
    assert lines[14].startswith("  FileNotFoundError") or "No such file" in lines[14]
