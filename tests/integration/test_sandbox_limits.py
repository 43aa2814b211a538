"""The sandbox's limits from outside (issue 12, break12's second review): `agentd run` ended by SIGTERM or
SIGHUP while a sandboxed command runs cleans up as a cancel does (no stand-in left, the session's lock
released, exit 128 + the signal); a workspace whose protected paths have long paths still runs commands
(bwrap's options through `--args`, break12 S3).

Needs a working bubblewrap (skipped with bwrap's reason elsewhere; a failure under AGENTD_TEST_STRICT=1).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agentd.sandbox import SandboxStatus
from tests.integration.test_sandbox_protected import auto_run, listing
from tests.sandbox_fixtures import Box, needs_bwrap

AGENTD = [sys.executable, "-m", "agentd"]
_TICK = threading.Event()  # never set: its wait() is the poll interval


@pytest.fixture
def bwrap_ok() -> SandboxStatus:
    return needs_bwrap()


def _run_args(ws: Path, scenario: Path, *more: str) -> list[str]:
    return [*AGENTD, "run", "--workspace", str(ws), "--provider", "scripted", "--scenario", str(scenario),
            "--prompt", "go", "--yes", *more]  # fmt: skip


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_end_agentd_run_as_a_cancel(
    bwrap_ok: SandboxStatus, tmp_path: Path, sig: signal.Signals
) -> None:
    """break12 (new-user trial): `timeout 6 agentd run ... --yes` (SIGTERM) or SIGHUP while a sandboxed
    `sleep 30` ran left 8 empty stand-ins in the workspace and the session's lock held (the next run
    warned "taking over the lock"). Now: exit 128 + the signal, `[cancelled]`, nothing left, lock free."""
    ws = tmp_path / "ws"
    ws.mkdir()
    scenario = tmp_path / "s.json"
    call = {"tool_use": {"name": "run_command", "input": {"command": "echo $$ > cmd.pid; sleep 60"}}}
    scenario.write_text(json.dumps({"answers": [{"reply": [call]}, {"reply": []}]}), encoding="utf-8")
    env = {**os.environ, "AGENTD_DATA_DIR": str(tmp_path / "data")}
    proc = subprocess.Popen(
        _run_args(ws, scenario), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (ws / "cmd.pid").exists() or not (ws / "cmd.pid").read_text().endswith("\n"):
            assert time.monotonic() < deadline and proc.poll() is None, "the command never started"
            _TICK.wait(0.02)  # a readiness poll with a deadline, not synchronisation by sleeping
        assert ".vscode" in os.listdir(ws)  # the stand-ins are there while the command runs
        os.kill(proc.pid, sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (proc.returncode, err.splitlines()[-1]) == (128 + sig, "[cancelled]"), err
    assert listing(ws) == ["cmd.pid"]
    again = subprocess.run(
        _run_args(ws, scenario, "--continue"), env=env, stdin=subprocess.DEVNULL, capture_output=True,
        text=True, timeout=120, start_new_session=True,
    )  # fmt: skip
    assert "taking over the lock" not in again.stderr, again.stderr


def _deep(top: Path, length: int) -> int:
    """A folder chain below `top` whose path is about `length` bytes long; an open fd of its last folder."""
    fd = os.open(top, os.O_RDONLY)
    path = len(str(top))
    while path < length - 250:
        os.mkdir("d" * 200, dir_fd=fd)
        fd, old = os.open("d" * 200, os.O_RDONLY, dir_fd=fd), fd
        os.close(old)
        path += 201
    return fd


async def test_many_protected_paths_with_long_paths_still_run(bwrap_ok: SandboxStatus, box: Box) -> None:
    """break12 (S3): 541 `.../NNN/.idea` folders at ~4070-byte paths made every later command fail with
    `[Errno 7] Argument list too long: '/usr/bin/bwrap'`. 300 such binds (2.4 MB of options, beyond the
    kernel's limit) now reach bwrap through `--args`: the command runs and the folders stay read-only."""
    fd = _deep(box.ws, 3800)
    try:
        for i in range(300):
            os.makedirs(f"/proc/self/fd/{fd}/{i:03d}/.idea", exist_ok=True)
    finally:
        os.close(fd)
    idea = next(box.ws.rglob("299/.idea"))
    out = await auto_run(f"echo ran; touch {idea}/x 2>&1 | grep -c Read-only", box.ctx(), box)
    assert out.content.splitlines()[:2] == ["ran", "1"], out.content[:2000]
    assert not any(n.startswith("agentd-bwrap-") for n in os.listdir("/tmp"))


async def test_a_protected_path_beyond_path_max_stays_read_only(bwrap_ok: SandboxStatus, box: Box) -> None:
    """break12 (S2): a `.git` at a path longer than PATH_MAX was never seen by the walk (ENAMETOOLONG), so
    its hooks stayed writable. It is now found and kept read-only (the deepest folder above it that a
    mount can name is bound read-only), and commands elsewhere still run."""
    fd = _deep(box.ws, 4300)
    try:
        os.makedirs(f"/proc/self/fd/{fd}/.git/hooks")
    finally:
        os.close(fd)
    out = await auto_run("echo ran", box.ctx(), box)
    assert out.content.startswith("ran"), out.content[:3000]
    deep = await auto_run(
        "while cd dddd* 2>/dev/null; do :; done; echo evil > .git/hooks/pre-commit; ls .git/hooks",
        box.ctx(),
        box,
    )
    assert "Read-only file system" in deep.content, deep.content[-3000:]


async def test_home_as_workspace_beyond_the_bind_cap_is_refused_not_half_guarded(
    bwrap_ok: SandboxStatus, box: Box
) -> None:
    """break12 (S1): workspace = the home folder with `.bashrc` and 520 folders `pN/.git`: the bind list was
    cut after the walk's finds, so the fixed-place start-up files were the ones dropped and `cp evil
    .bashrc` succeeded. Now the command is refused with a clear error and `.bashrc` is unchanged."""
    from agentd.sandbox import Launcher, build_policy, detect
    from agentd.tools.base import ToolContext

    for i in range(520):
        (box.home / f"p{i}" / ".git").mkdir(parents=True)
    policy = build_policy([box.home], box.protected(), readable=box.readable)
    ctx = ToolContext(
        root=box.home,
        env={"PATH": os.environ["PATH"], "HOME": str(box.home)},
        run_timeout_s=20,
        launcher=Launcher("required", detect(), policy),
    )
    (box.home / "evil").write_text("evil\n")
    out = await auto_run("cp evil .bashrc; echo done", ctx, box)
    assert (box.home / ".bashrc").read_text() == "# rc\n", out.content
    assert out.is_error and "run_command is refused: the workspace holds" in out.content, out.content
    assert "more than the 512 the sandbox can keep read-only" in out.content
    assert sorted(n for n in os.listdir(box.home) if not n.startswith("p")) == [
        ".bashrc",
        ".config",
        ".netrc",
        ".ssh",
        "evil",
    ]
