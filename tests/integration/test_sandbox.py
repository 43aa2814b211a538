"""`run_command` in the sandbox and without it (issue 12 acceptance: "Sandbox tests", the key-exfiltration
and background-escape reproductions in-process; the `kill -9` of a real agentd is in
tests/reliability/test_sandbox_kill.py).

Every sandboxed test needs a working bubblewrap: skipped with bwrap's own reason where it cannot run, a
failure under AGENTD_TEST_STRICT=1 (CI installs it). No sleeps as synchronisation: waits are polls with a
deadline that name what they waited for.
"""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agentd.sandbox import Launcher, SandboxPolicy, SandboxStatus, detect, missing, protections
from agentd.tools.base import ToolContext, ToolOutput, validate_input
from agentd.tools.shell import RunCommand
from tests.sandbox_fixtures import Box, escapes, marker, needs_bwrap, survivors


async def run(command: str, ctx: ToolContext, **extra: object) -> ToolOutput:
    args, err = validate_input(RunCommand(), {"command": command, **extra})
    assert err is None
    return await RunCommand().run(args, ctx)


async def poll_until(pred: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not pred():
        if loop.time() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        tick = loop.create_future()
        loop.call_later(0.02, tick.set_result, None)
        await tick


def tree(root: Path) -> dict[str, bytes]:
    """Every file under `root` with its bytes (symlinks as their target)."""
    out: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            rel = str(p.relative_to(root))
            out[rel] = (
                os.readlink(p).encode() if p.is_symlink() else (p.read_bytes() if p.is_file() else b"/")
            )
    return out


@pytest.fixture
def bwrap_ok() -> SandboxStatus:
    return needs_bwrap()


@pytest.fixture
def listener() -> Iterator[tuple[socket.socket, int]]:
    """A TCP listener on 127.0.0.1 that records whether anyone connected."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.settimeout(0.0)
    try:
        yield srv, srv.getsockname()[1]
    finally:
        srv.close()


def accepted(srv: socket.socket) -> bool:
    try:
        conn, _ = srv.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


# ---- the sandbox ------------------------------------------------------------------------------------
async def test_writes_the_workspace_only(bwrap_ok: SandboxStatus, box: Box) -> None:
    """Inside: the workspace is writable; $HOME and the folder next to it are read-only; /tmp is private,
    so nothing written there reaches the host's /tmp (issue 12)."""
    before = {p: tree(p) for p in (box.home, box.outside)}
    ctx = box.ctx()
    out = await run(
        f"echo made > made.txt; touch {box.home}/y; echo x > {box.outside}/new; touch /tmp/agentd-escape-$$; "
        f"echo x >> {box.outside}/secret.txt; mkdir {box.home}/d; echo done",
        ctx,
    )
    assert (box.ws / "made.txt").read_text() == "made\n"
    assert out.content.count("Read-only file system") == 4, (
        out.content
    )  # /tmp is private: the touch works there
    assert {p: tree(p) for p in (box.home, box.outside)} == before
    assert [p for p in Path("/tmp").iterdir() if p.name.startswith("agentd-escape-")] == []


async def test_path_escapes_through_run_command(bwrap_ok: SandboxStatus, box: Box) -> None:
    """The escape attempts of the path-escape table (TESTING.md §4.5), repeated through run_command:
    `..`, a symlink to `/`, `cd ..`: 0 writes land outside the workspace."""
    link_target = box.outside / "via-link"
    before = tree(box.outside)
    parent_before = sorted(p.name for p in box.ws.parent.iterdir())
    attempts = [
        f"echo pwned > ../{box.ws.name}-sibling",
        f"ln -s / x && echo pwned > x{link_target}",
        "cd .. && touch y",
        f"ln -s {box.outside} out && echo pwned > out/secret.txt",
        f"cp /etc/hostname {box.outside}/hostname",
    ]
    for command in attempts:
        out = await run(command, box.ctx())
        assert out.is_error, (command, out.content)
    assert tree(box.outside) == before
    assert sorted(p.name for p in box.ws.parent.iterdir()) == parent_before


async def test_hidden_data_dir_config_and_credential_stores(bwrap_ok: SandboxStatus, box: Box) -> None:
    """agentd's data dir, its config and the user's credential stores are not visible."""
    ctx = box.ctx()
    for path in (
        box.home / ".ssh" / "id_ed25519",
        box.data / "sessions" / "s1" / "log.jsonl",
        box.config / "config.toml",
        box.home / ".netrc",
    ):
        out = await run(f"cat {path}; ls -A {path.parent}", ctx)
        assert "PRIVATE KEY" not in out.content and "hunter2" not in out.content, out.content
        assert "grant" not in out.content and 'model = "x"' not in out.content, out.content
    out = await run(f"cat {box.home}/.bashrc", ctx)  # the rest of the home folder stays readable
    assert out.content == "# rc\n[exit code 0]"


async def test_git_and_agentd_folders_are_read_only_inside_the_workspace(
    bwrap_ok: SandboxStatus, box: Box
) -> None:
    """A command cannot plant a git hook or a workspace config that runs later, outside the sandbox."""
    (box.ws / ".agentd").mkdir()
    out = await run(
        "echo evil > .git/hooks/pre-commit; echo x >> .git/config; echo 'x=1' > .agentd/config.toml; echo ok > f",
        box.ctx(),
    )
    assert out.content.count("Read-only file system") == 3, out.content
    assert sorted(os.listdir(box.ws / ".git" / "hooks")) == []
    assert (box.ws / ".git" / "config").read_text() == "[core]\n"
    assert list((box.ws / ".agentd").iterdir()) == []
    assert (box.ws / "f").read_text() == "ok\n"


async def test_no_network_unless_allowed(
    bwrap_ok: SandboxStatus, box: Box, listener: tuple[socket.socket, int]
) -> None:
    """A listener on 127.0.0.1 started by the test: the sandboxed command cannot reach it; with
    `network: true` (an approved request) it can."""
    srv, port = listener
    probe = f"(echo hi > /dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo connected || echo refused"
    out = await run(probe, box.ctx())
    assert (out.content, accepted(srv)) == ("refused\n[exit code 0]", False)
    out = await run(probe, box.ctx(), network=True)
    assert out.content == "connected\n[exit code 0]"
    await poll_until(lambda: accepted(srv), "the connection of the command with network")
    out = await run(probe, box.ctx(network=True))  # sandbox.network = true
    assert out.content == "connected\n[exit code 0]"


async def test_no_api_key_in_the_environment(bwrap_ok: SandboxStatus, box: Box, canary: str) -> None:
    env = {"ANTHROPIC_API_KEY": canary, "GITHUB_TOKEN": canary, "MY_SECRET": canary, "KEEP": "yes"}
    out = await run("env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'", box.ctx(env=env))
    assert (canary[:16] in out.content, "KEEP=yes" in out.content) == (False, True)


# ---- the key-exfiltration reproduction ----------------------------------------------------------------
@pytest.fixture
def victim(canary: str) -> Iterator[int]:
    """A process standing in for agentd: the API key in its environment, like `ANTHROPIC_API_KEY=... agentd`."""
    env = {"PATH": os.environ.get("PATH", ""), "ANTHROPIC_API_KEY": canary}
    proc = subprocess.Popen(["sleep", "300"], env=env)
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def leaked(canary: str, text: str) -> bool:
    """The key in `text` as is, reversed, or in any base64 line (decoded, also reversed)."""
    pieces = [text, text[::-1]]
    for line in text.splitlines():
        try:
            decoded = base64.b64decode(line.strip() + "==", validate=False).decode("latin-1")
        except ValueError:
            continue
        pieces += [decoded, decoded[::-1]]
    return any(canary[:16] in p for p in pieces)


EXFILTRATE = (
    "cat /proc/{pid}/environ; base64 -w0 /proc/{pid}/environ; echo; rev /proc/{pid}/environ; "
    "for p in /proc/[0-9]*; do base64 -w0 $p/environ 2>/dev/null; echo; done"
)


async def test_key_exfiltration_sandboxed(
    bwrap_ok: SandboxStatus, box: Box, canary: str, victim: int
) -> None:
    """/proc/<agentd pid>/environ, base64 and rev of it, and every /proc/*/environ: 0 leaks."""
    out = await run(EXFILTRATE.format(pid=victim), box.ctx())
    assert leaked(canary, out.content) is False, out.content[:400]
    assert "No such file or directory" in out.content


async def test_key_exfiltration_without_sandbox_is_named(box: Box, canary: str, victim: int) -> None:
    """Without a sandbox the same command reads the key when it may (root, or a dumpable agentd), and
    `protections()` names exactly that missing protection."""
    status = detect()
    facts = protections(status, "off")
    named = {f.name: f.text for f in missing(facts)}
    out = await run(EXFILTRATE.format(pid=victim), box.ctx("off"))
    if leaked(canary, out.content):
        assert "/proc/<agentd pid>/environ" in named.get("agentd's process", ""), named
    assert {"file system", "secrets", "network"} <= set(named)


# ---- the background-escape reproduction ------------------------------------------------------------
@pytest.mark.parametrize("mode", ["required", "off"])
async def test_background_escapes_die_with_the_command(mode: str, box: Box) -> None:
    """setsid, env -i setsid, a double fork and a new group started by a command: 0 survivors when it
    exits, with the sandbox (pid namespace) and without (the subreaper helper)."""
    if mode == "required":
        needs_bwrap()
    mark = marker()
    out = await run(escapes(mark), box.ctx(mode))
    assert out.content == "started\n[exit code 0]", out.content
    await poll_until(lambda: survivors(mark) == [], f"0 survivors of `sleep {mark}` ({mode})")


@pytest.mark.parametrize("mode", ["required", "off"])
async def test_background_escapes_die_on_timeout_and_cancel(mode: str, box: Box) -> None:
    if mode == "required":
        needs_bwrap()
    mark = marker()
    out = await run(escapes(mark) + f"; sleep {mark}", box.ctx(mode), timeout_s=2)
    assert out.content.endswith("[timed out after 2 s; process group killed]"), out.content
    await poll_until(lambda: survivors(mark) == [], f"0 survivors after the timeout ({mode})")
    mark = marker()
    task = asyncio.create_task(run(escapes(mark) + f"; sleep {mark}", box.ctx(mode)))
    await poll_until(lambda: len(survivors(mark)) >= 5, "the escaped processes to start")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await poll_until(lambda: survivors(mark) == [], f"0 survivors after cancel ({mode})")


# ---- modes and detection ----------------------------------------------------------------------------
async def test_required_without_a_sandbox_refuses(box: Box) -> None:
    missing_bwrap = detect(bwrap_path="/nonexistent/bwrap")
    assert (missing_bwrap.available, "apt install bubblewrap" in (missing_bwrap.problem or "")) == (
        False,
        True,
    )
    launcher = Launcher("required", missing_bwrap, SandboxPolicy(writable=(box.ws,)))
    ctx = ToolContext(root=box.ws, env={"PATH": os.environ["PATH"]}, launcher=launcher)
    out = await run("touch ran", ctx)
    assert out.is_error and out.content.startswith(
        'run_command is refused: sandbox = "required" but no sandbox'
    )
    assert not (box.ws / "ran").exists()
    auto = Launcher("auto", missing_bwrap, SandboxPolicy(writable=(box.ws,)))
    out = await run("touch ran", ToolContext(root=box.ws, env={"PATH": os.environ["PATH"]}, launcher=auto))
    assert (out.content, (box.ws / "ran").exists()) == ("[exit code 0]", True)


async def test_unsandboxed_request(bwrap_ok: SandboxStatus, box: Box) -> None:
    """`unsandboxed: true` runs outside the sandbox (the gate always asks first); `required` refuses it."""
    target = box.outside / "written"
    out = await run(f"touch {target}", box.ctx("auto"), unsandboxed=True)
    assert (out.content, target.exists()) == ("[exit code 0]", True)
    out = await run(f"rm {target}", box.ctx("required"), unsandboxed=True)
    assert out.is_error and "does not allow running outside the sandbox" in out.content
    assert target.exists()


async def test_preview_says_where_the_command_runs(bwrap_ok: SandboxStatus, box: Box) -> None:
    tool = RunCommand()
    args = tool.Input.model_validate({"command": "npm test", "network": True})
    p = await tool.preview(args, box.ctx("auto"))
    assert (p.sandboxed, p.escalation) == (True, "network")
    assert p.summary == f"Run `npm test` in {box.ws} in the sandbox with network"
    p = await tool.preview(tool.Input.model_validate({"command": "ls", "unsandboxed": True}), box.ctx("auto"))
    assert (p.sandboxed, p.escalation) == (False, "outside the sandbox")
    p = await tool.preview(tool.Input.model_validate({"command": "ls"}), box.ctx("off"))
    assert (p.sandboxed, p.escalation, p.summary) == (False, None, f"Run `ls` in {box.ws}")
