"""Shared fixtures of the sandbox tests (issue 12): a home, data dir and outside folder that the sandbox
shows as the read-only rest of the file system wherever the checkout lives, a sandboxed and an
unsandboxed `ToolContext`, and process-survivor checks by a unique marker (pids inside the sandbox's pid
namespace differ from the host's).

The box lives in the checkout (`.cache/sandbox-tests`), not in the test's tmp folder: the sandbox replaces
`/tmp`, `/var/tmp` and `/run` with private folders, which would make "cannot read" and "cannot write"
pass for the wrong reason (missing, not refused). A checkout can itself lie under one of them (a CI clone
under /tmp: sandbox-tmp); the box's folder is then declared `sandbox.readable` (`Box.readable`, a no-op
elsewhere), so the same promises are tested both ways: read-only, and hidden only where the policy hides.

`needs_bwrap()` skips with the reason bubblewrap gives when it cannot run here; under
`AGENTD_TEST_STRICT=1` (CI) that is a failure instead (TESTING.md §1.1).
"""

from __future__ import annotations

import os
import secrets
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentd.permissions.protected import ProtectedPaths
from agentd.sandbox import Launcher, SandboxStatus, build_policy, detect
from agentd.tools.base import ToolContext

REPO = Path(__file__).resolve().parents[1]
CANARY_PREFIX = "sk-ant-emu-"


def needs_bwrap() -> SandboxStatus:
    """The detected status when bubblewrap works here; else skip (fail under AGENTD_TEST_STRICT=1)."""
    status = detect()
    if status.backend == "bubblewrap" and status.available:
        return status
    reason = f"bubblewrap cannot run here: {status.problem}"
    if os.environ.get("AGENTD_TEST_STRICT") == "1":
        pytest.fail(f"{reason} (AGENTD_TEST_STRICT=1: .ci/run installs bubblewrap)")
    pytest.skip(reason)


@dataclass
class Box:
    """One test's folders, all in `top`: `ws` (the workspace), `home` (with `.ssh/id_ed25519` and
    `.bashrc`), `config` (agentd's user config dir, inside `home`), `data` (the data dir, with a session
    file), `outside` (a folder next to the workspace's)."""

    ws: Path
    home: Path
    config: Path
    data: Path
    outside: Path
    top: Path

    @property
    def readable(self) -> list[str]:
        """`sandbox.readable` for this box: its folder, shown read-only even under a private folder."""
        return [str(self.top)]

    def protected(self) -> ProtectedPaths:
        return ProtectedPaths.of(self.home, self.config, self.data)

    def ctx(
        self, mode: str = "required", *, network: bool = False, env: dict[str, str] | None = None
    ) -> ToolContext:
        status = detect()
        policy = build_policy([self.ws], self.protected(), readable=self.readable, network=network)
        launcher = Launcher(mode, status, policy)  # type: ignore[arg-type]
        base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home)}
        return ToolContext(root=self.ws, env={**base, **(env or {})}, run_timeout_s=20, launcher=launcher)


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Box]:
    top = REPO / ".cache" / "sandbox-tests" / secrets.token_hex(6)
    home, data, outside = top / "home", top / "data", top / "outside"
    for d in (home / ".ssh", home / ".config" / "agentd", data / "sessions" / "s1", outside):
        d.mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (home / ".bashrc").write_text("# rc\n")
    (home / ".netrc").write_text("machine example.com password hunter2\n")
    (home / ".config" / "agentd" / "config.toml").write_text('model = "x"\n')
    (data / "sessions" / "s1" / "log.jsonl").write_text('{"kind":"grant"}\n')
    (outside / "secret.txt").write_text("outside\n")
    ws = top / "ws"
    ws.mkdir()
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n")
    try:
        yield Box(ws, home, home / ".config" / "agentd", data, outside, top)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def marker() -> str:
    """A unique sleep duration: `sleep <marker>` identifies this test's processes on the host."""
    return f"{1000 + secrets.randbelow(8000)}.{secrets.randbelow(10**6):06d}"


def survivors(mark: str) -> list[int]:
    """Host pids of live processes (not zombies) running `sleep <mark>` (not the shells whose command
    text merely contains it)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{name}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        argv = cmd.split(b"\0")
        if len(argv) >= 2 and argv[0].endswith(b"sleep") and argv[1] == mark.encode() and state != "Z":
            found.append(int(name))
    return found


def escapes(mark: str) -> str:
    """A command that starts `sleep <mark>` four ways that leave the process group (`setsid`, `env -i
    setsid`, a double fork, `setsid` under `set -m`), waits until all four run, then prints `started`."""
    run = f"exec sleep {mark}"
    return (
        f"setsid sh -c 'echo > .s1; {run}' & env -i setsid sh -c 'echo > .s2; {run}' & "
        f"(sh -c 'echo > .s3; {run}' &) ; (set -m; setsid sh -c \"sh -c 'echo > .s4; {run}' &\" &) ; "
        "until [ -e .s1 ] && [ -e .s2 ] && [ -e .s3 ] && [ -e .s4 ]; do sleep 0.05; done; rm .s?; echo started"
    )


@pytest.fixture
def canary() -> str:
    """A fake API key unique to the test (`sk-ant-emu-` + 32 hex digits, TESTING.md §4.6)."""
    return CANARY_PREFIX + secrets.token_hex(16)


_TICK = threading.Event()  # never set: its wait() is the poll interval


def wait_survivors(mark: str, count: int, timeout_s: float = 15.0) -> list[int]:
    """Poll until exactly `count` processes carry `mark` (0: all gone), or the deadline; the last list."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = survivors(mark)
        if len(alive) == count or time.monotonic() > deadline:
            return alive
        _TICK.wait(0.02)
