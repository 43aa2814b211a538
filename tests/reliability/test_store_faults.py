"""Store faults with real processes: torn writes, two processes on one session (TESTING.md §4.2, §4.3)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from agentd.errors import SessionLocked
from agentd.persistence.index import list_sessions
from agentd.persistence.lock import holder
from agentd.persistence.paths import DataDir
from agentd.persistence.records import encode_record
from agentd.persistence.store import SessionStore, read_records

SID = "sess_01reliability"
DEADLINE_S = 20.0

HOLD = """
import sys
from agentd.persistence.store import SessionStore
s = SessionStore.open(sys.argv[1], sys.argv[2])
print("ready", flush=True)
sys.stdin.read()
"""

RACE = """
import sys
from agentd.errors import SessionLocked
from agentd.persistence.store import SessionStore
sys.stdin.readline()
try:
    s = SessionStore.open(sys.argv[1], sys.argv[2])
    print("won", flush=True)
except SessionLocked as exc:
    print("locked", exc.data["pid"], flush=True)
sys.stdin.read()
"""

APPEND = """
import sys
from agentd.persistence.store import SessionStore
s = SessionStore.open(sys.argv[1], sys.argv[2])
for i in range(int(sys.argv[3])):
    s.append("prompt", {"messageId": f"m{i}", "content": [{"type": "text", "text": "x" * 200}]})
s.close()
"""


def spawn(code: str, dd: DataDir, *args: str, failpoints: str | None = None) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "AGENTD_FAILPOINTS"}
    if failpoints:
        env["AGENTD_FAILPOINTS"] = failpoints
    return subprocess.Popen(
        [sys.executable, "-c", code, str(dd.root), SID, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        umask=0o022,
    )


def read_line(proc: subprocess.Popen[bytes], what: str) -> str:
    """One stdout line of `proc`, waiting at most DEADLINE_S."""
    assert proc.stdout is not None
    deadline = time.monotonic() + DEADLINE_S
    buf = b""
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, left))
        if not ready:
            pytest.fail(f"timed out waiting for {what} from pid {proc.pid}")
        chunk = os.read(proc.stdout.fileno(), 1)
        if not chunk:
            err = proc.stderr.read().decode() if proc.stderr else ""
            pytest.fail(f"pid {proc.pid} exited before {what}: {err}")
        buf += chunk
    return buf.decode().strip()


def digests(d: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir()) if p.is_file()}


@pytest.fixture
def dd(tmp_path: Path) -> Iterator[DataDir]:
    d = DataDir(tmp_path / "data")
    SessionStore.create(d, SID, {"cwd": str(tmp_path), "provider": "scripted", "model": "m"}).close()
    yield d


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=DEADLINE_S)
        for f in (p.stdin, p.stdout, p.stderr):
            if f is not None:
                f.close()


def test_second_process_gets_session_locked_then_takes_over_after_kill(
    dd: DataDir, procs: list[subprocess.Popen[bytes]], caplog: pytest.LogCaptureFixture
) -> None:
    child = spawn(HOLD, dd)
    procs.append(child)
    assert read_line(child, "ready") == "ready"
    info = json.loads(dd.lock_path(SID).read_bytes())
    assert (info["pid"], info["hostname"]) == (child.pid, socket.gethostname())
    before = digests(dd.session_dir(SID))

    with pytest.raises(SessionLocked) as exc:
        SessionStore.open(dd, SID)
    hhmm = datetime.fromisoformat(info["since"]).astimezone().strftime("%H:%M")
    assert exc.value.message == (
        f"Session {SID} is open in agentd pid {child.pid} on {socket.gethostname()} since {hhmm}. "
        f"Close that editor window or stop pid {child.pid}, then retry; or read it with "
        f"agentd sessions show {SID}, or start a new session."
    )
    assert exc.value.data == {"sessionId": SID, **info, "sameProcess": False}
    assert exc.value.exit_code == 4
    assert digests(dd.session_dir(SID)) == before  # the loser wrote zero bytes, lock file included
    assert read_records(dd, SID) == (read_records(dd, SID)[0], [])  # the read-only view still works
    assert list_sessions(dd)[0]["lockedBy"] == info

    child.send_signal(signal.SIGKILL)
    assert child.wait(timeout=DEADLINE_S) == -signal.SIGKILL
    assert holder(dd.lock_path(SID)) is None
    assert list_sessions(dd)[0]["lockedBy"] is None
    with caplog.at_level(logging.WARNING), SessionStore.open(dd, SID) as s:
        assert s.last_seq == 1
        assert json.loads(dd.lock_path(SID).read_bytes())["pid"] == os.getpid()
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"session {SID}: taking over the lock left by pid {child.pid} on {info['hostname']} "
        f"(since {info['since']}); that process is gone"
    ]


@pytest.mark.parametrize("round_", range(5))
def test_two_simultaneous_opens_exactly_one_wins(
    dd: DataDir, procs: list[subprocess.Popen[bytes]], round_: int
) -> None:
    a, b = spawn(RACE, dd), spawn(RACE, dd)
    procs.extend([a, b])
    for p in (a, b):
        assert p.stdin is not None
        p.stdin.write(b"go\n")
    for p in (a, b):
        assert p.stdin is not None
        p.stdin.flush()
    results = {a.pid: read_line(a, "the open result"), b.pid: read_line(b, "the open result")}
    winners = [pid for pid, r in results.items() if r == "won"]
    assert len(winners) == 1, results
    loser = next(pid for pid in results if pid != winners[0])
    assert results[loser] == f"locked {winners[0]}"


def test_kill_mid_write_leaves_a_torn_line_that_the_next_open_repairs(
    dd: DataDir, procs: list[subprocess.Popen[bytes]]
) -> None:
    log = dd.log_path(SID)
    good = log.read_bytes()
    child = spawn(APPEND, dd, "1", failpoints="store.append.mid=kill-mid-write")
    procs.append(child)
    assert child.wait(timeout=DEADLINE_S) == -signal.SIGKILL
    data = log.read_bytes()
    torn = data[len(good) :]
    assert data.startswith(good)
    at = torn[len(b'{"v":1,"seq":2,"at":"') :][:20].decode()
    line = encode_record(
        2, "prompt", {"messageId": "m0", "content": [{"type": "text", "text": "x" * 200}]}, at
    )
    assert torn == line[: len(line) // 2]  # exactly the first half of the record, fsynced before the kill

    records, warnings = read_records(dd, SID)
    assert ([r["seq"] for r in records], len(warnings)) == ([1], 1)
    assert log.read_bytes() == data  # the read-only view changed nothing

    with SessionStore.open(dd, SID) as s:
        assert s.last_seq == 1
        assert len(s.warnings) == 1
    assert log.read_bytes() == good
    assert (dd.session_dir(SID) / "log.jsonl.torn-2").read_bytes() == torn
    repaired = digests(dd.session_dir(SID))
    SessionStore.open(dd, SID).close()
    assert {k: v for k, v in digests(dd.session_dir(SID)).items() if k != "lock"} == {
        k: v for k, v in repaired.items() if k != "lock"
    }

    child = spawn(APPEND, dd, "2")
    procs.append(child)
    assert child.wait(timeout=DEADLINE_S) == 0
    assert [json.loads(x)["seq"] for x in log.read_bytes().splitlines()] == [1, 2, 3]


@pytest.mark.parametrize(
    ("point", "survivors"), [("store.append.before=kill@2", [1, 2]), ("store.append.after=kill@2", [1, 2, 3])]
)
def test_kill_at_an_append_keeps_every_completed_record(
    dd: DataDir, procs: list[subprocess.Popen[bytes]], point: str, survivors: list[int]
) -> None:
    child = spawn(APPEND, dd, "3", failpoints=point)
    procs.append(child)
    assert child.wait(timeout=DEADLINE_S) == -signal.SIGKILL
    with SessionStore.open(dd, SID) as s:
        assert ([r["seq"] for r in s.records()], s.warnings) == (survivors, [])
