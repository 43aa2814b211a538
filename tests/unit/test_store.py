"""SessionStore, paths and the in-process lock (CONTRACTS.md §9, TESTING.md §4.2, §4.7)."""

from __future__ import annotations

import builtins
import errno
import hashlib
import json
import logging
import os
import re
import stat
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import platformdirs
import pytest

from agentd import failpoints
from agentd.errors import SessionLocked, SessionNotFound, StorageError, UnsupportedSessionVersion
from agentd.persistence import store as store_mod
from agentd.persistence.lock import SessionLock, holder
from agentd.persistence.paths import DataDir, ensure_dir, new_session_id, resolve_data_dir
from agentd.persistence.store import SessionStore, read_blob, read_records

SID = "sess_01test"
META = {"cwd": "/projects/shop", "directories": [], "provider": "anthropic", "model": "claude-sonnet-4-6"}
WRITE_FAILED = (
    "Cannot write the session log in the data dir (disk full?). Free space or set --data-dir; "
    "the turn was stopped and nothing was lost before this point."
)


def ticking_clock(start: datetime = datetime(2026, 9, 1, 10, 15, 30, tzinfo=UTC)) -> Callable[[], datetime]:
    """A wall clock that advances one second per call."""
    state = {"n": 0}

    def now() -> datetime:
        state["n"] += 1
        return start + timedelta(seconds=state["n"] - 1)

    return now


@pytest.fixture
def dd(tmp_path: Path) -> DataDir:
    return DataDir(tmp_path / "data")


@pytest.fixture
def store(dd: DataDir) -> Iterator[SessionStore]:
    s = SessionStore.create(dd, SID, META, clock=ticking_clock())
    yield s
    s.close()


def snapshot(d: Path, *, skip: tuple[str, ...] = ("lock",)) -> dict[str, str]:
    """sha256 of every file under `d` (relative path -> digest), except the lock file."""
    return {
        str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(d.rglob("*"))
        if p.is_file() and p.name not in skip
    }


# ---- paths ---------------------------------------------------------------------------------------


def test_resolve_data_dir_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTD_DATA_DIR", str(tmp_path / "env"))
    assert resolve_data_dir(str(tmp_path / "cli")) == tmp_path / "cli"
    assert resolve_data_dir(None) == tmp_path / "env"
    monkeypatch.delenv("AGENTD_DATA_DIR")
    assert resolve_data_dir(None) == Path(platformdirs.user_data_dir("agentd"))


def test_session_ids_are_url_safe_and_time_sortable() -> None:
    ids = [new_session_id() for _ in range(50)]
    assert all(re.fullmatch(r"sess_[0-9a-z]{26}", i) for i in ids)
    assert len(set(ids)) == 50
    assert [i[:15] for i in ids] == sorted(i[:15] for i in ids)  # the ULID time part never goes back


def test_data_dir_layout(tmp_path: Path) -> None:
    d = DataDir(tmp_path)
    s = tmp_path / "sessions" / SID
    assert (d.sessions_dir, d.session_dir(SID), d.log_path(SID), d.meta_path(SID)) == (
        tmp_path / "sessions", s, s / "log.jsonl", s / "meta.json"
    )  # fmt: skip
    assert (d.lock_path(SID), d.audit_path(SID), d.blobs_dir(SID)) == (
        s / "lock",
        s / "audit.jsonl",
        s / "blobs",
    )
    assert d.tcp_token_path(7777) == tmp_path / "tcp-7777.token"
    for bad in ("../x", "a/b", "", "x" * 65, "sess.1"):
        with pytest.raises(ValueError):
            d.session_dir(bad)


@pytest.fixture(params=[0o022, 0o077, 0o000, 0o277])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def test_ensure_dir_modes_ignore_umask(tmp_path: Path, umask: int) -> None:
    (tmp_path / "old").mkdir(mode=0o755)
    os.chmod(tmp_path / "old", 0o755)
    ensure_dir(tmp_path / "old" / "a" / "b")
    assert stat.S_IMODE((tmp_path / "old").stat().st_mode) == 0o755  # existing folders are left alone
    assert stat.S_IMODE((tmp_path / "old" / "a").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "old" / "a" / "b").stat().st_mode) == 0o700


def test_layout_modes_ignore_umask(dd: DataDir, umask: int) -> None:
    s = SessionStore.create(dd, SID, META)
    s.write_blob(b"x" * 10)
    s.update_meta(title="t")
    s.append("title", {"title": "t"})
    s.close()
    s = SessionStore.open(dd, SID)
    s.close()
    modes = {str(p.relative_to(dd.root)): stat.S_IMODE(p.stat().st_mode) for p in sorted(dd.root.rglob("*"))}
    blob = f"sessions/{SID}/blobs/{hashlib.sha256(b'x' * 10).hexdigest()}"
    assert modes == {
        "sessions": 0o700,
        f"sessions/{SID}": 0o700,
        f"sessions/{SID}/blobs": 0o700,
        blob: 0o600,
        f"sessions/{SID}/lock": 0o600,
        f"sessions/{SID}/log.jsonl": 0o600,
        f"sessions/{SID}/meta.json": 0o600,
    }
    assert stat.S_IMODE(dd.root.stat().st_mode) == 0o700


# ---- appending and reading -----------------------------------------------------------------------


def test_create_writes_meta_record_and_meta_json(dd: DataDir, store: SessionStore) -> None:
    line = dd.log_path(SID).read_bytes()
    assert line == (
        b'{"v":1,"seq":1,"at":"2026-09-01T10:15:30Z","kind":"meta","sessionId":"sess_01test",'
        b'"agentdVersion":"0.1.0","cwd":"/projects/shop","directories":[],"provider":"anthropic",'
        b'"model":"claude-sonnet-4-6"}\n'
    )
    assert store.records() == [json.loads(line)]
    expected_meta = {
        "id": SID, "cwd": "/projects/shop", "title": None, "model": "claude-sonnet-4-6", "provider": "anthropic",
        "createdAt": "2026-09-01T10:15:30Z", "updatedAt": "2026-09-01T10:15:30Z", "turns": 0,
        "tokens": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}, "logVersion": 1,
    }  # fmt: skip
    assert json.loads(dd.meta_path(SID).read_bytes()) == expected_meta
    assert store.meta == expected_meta
    assert store.last_seq == 1
    with pytest.raises(FileExistsError):
        SessionStore.create(dd, SID, META)


def test_append_assigns_consecutive_seqs_and_round_trips(dd: DataDir, store: SessionStore) -> None:
    blocks = [
        {"type": "text", "text": "hi"},
        {"type": "tool_use", "id": "t1", "name": "read_file", "input": {}},
    ]
    r2 = store.append("message", {"messageId": "m1", "role": "assistant", "content": blocks})
    r3 = store.append("todos", {"todos": []}, fsync=False)
    r45 = store.append_many(
        [("message", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]}),
         ("prompt", {"messageId": "m2", "content": [{"type": "text", "text": "go"}]})]
    )  # fmt: skip
    store.sync()
    assert [r["seq"] for r in [r2, r3, *r45]] == [2, 3, 4, 5]
    assert store.last_seq == 5
    assert r2 == {"v": 1, "seq": 2, "at": "2026-09-01T10:15:31Z", "kind": "message", "messageId": "m1",
                  "role": "assistant", "content": blocks}  # fmt: skip
    assert r45[0]["at"] == r45[1]["at"]  # one write, one timestamp
    assert store.append_many([]) == []
    store.close()
    lines = dd.log_path(SID).read_bytes().splitlines()
    assert [json.loads(x) for x in lines[1:]] == [r2, r3, *r45]
    again = SessionStore.open(dd, SID)
    assert again.records()[1:] == [r2, r3, *r45]
    assert again.records()[1]["content"] == blocks  # block lists stay block lists
    assert again.append("title", {"title": "t"})["seq"] == 6
    again.close()


def test_append_never_rereads_the_log(
    dd: DataDir, store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_open = builtins.open

    def guarded_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        assert not str(file).endswith("log.jsonl"), "append re-read the log"
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded_open)
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail(f"append read {self}"))
    assert [store.append("usage", {"n": i})["seq"] for i in range(3)] == [2, 3, 4]


def test_closed_store_refuses_appends(store: SessionStore) -> None:
    store.close()
    store.close()  # idempotent
    with pytest.raises(ValueError) as info:
        store.append("title", {"title": "x"})
    assert str(info.value) == "the store of session sess_01test is closed"


def test_write_error_is_storage_error_and_rolls_back(
    dd: DataDir, store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = dd.log_path(SID).read_bytes()

    def half_then_enospc(fd: int, data: bytes) -> None:
        os.write(fd, data[:10])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store_mod, "write_all", half_then_enospc)
    with pytest.raises(StorageError) as info:
        store.append("title", {"title": "x"})
    assert info.value.message == WRITE_FAILED
    assert info.value.data == {
        "sessionId": SID,
        "path": str(dd.log_path(SID)),
        "reason": "No space left on device",
    }
    assert dd.log_path(SID).read_bytes() == before
    monkeypatch.undo()
    assert store.append("title", {"title": "y"})["seq"] == 2


def test_failed_rollback_refuses_appends_until_reopen(
    dd: DataDir, store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = dd.log_path(SID).read_bytes()

    def half_then_eio(fd: int, data: bytes) -> None:
        os.write(fd, data[:10])
        raise OSError(errno.EIO, "Input/output error")

    def no_truncate(fd: int, length: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(store_mod, "write_all", half_then_eio)
    monkeypatch.setattr(os, "ftruncate", no_truncate)
    with pytest.raises(StorageError):
        store.append("title", {"title": "x"})
    monkeypatch.undo()
    with pytest.raises(StorageError) as info:
        store.append("title", {"title": "y"})
    assert info.value.data["reason"] == "an earlier write failed and could not be rolled back"
    assert dd.log_path(SID).read_bytes() == before + b'{"v":1,"se'
    store.close()
    with SessionStore.open(dd, SID) as s:
        assert s.append("title", {"title": "z"})["seq"] == 2
    assert (dd.session_dir(SID) / "log.jsonl.torn-2").read_bytes() == b'{"v":1,"se'


def test_mid_failpoint_raise_leaves_log_unchanged(
    dd: DataDir, store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = dd.log_path(SID).read_bytes()
    monkeypatch.setenv("AGENTD_FAILPOINTS", "store.append.mid=raise")
    with pytest.raises(failpoints.FailpointError):
        store.append("title", {"title": "x"})
    assert dd.log_path(SID).read_bytes() == before
    monkeypatch.delenv("AGENTD_FAILPOINTS")
    assert store.append("title", {"title": "y"})["seq"] == 2


# ---- torn last line (TESTING.md §4.2) ---------------------------------------------------------------


def _session_with_lines(dd: DataDir) -> list[bytes]:
    with SessionStore.create(dd, SID, META, clock=ticking_clock()) as s:
        s.append("prompt", {"messageId": "m1", "content": [{"type": "text", "text": "go"}]})
        s.append(
            "message", {"messageId": "m2", "role": "assistant", "content": [{"type": "text", "text": "ok"}]}
        )
    return dd.log_path(SID).read_bytes().splitlines(keepends=True)


@pytest.mark.parametrize("cut", ["one", "half", "all_but_brace"])
def test_torn_last_line_is_set_aside(dd: DataDir, cut: str, caplog: pytest.LogCaptureFixture) -> None:
    lines = _session_with_lines(dd)
    keep = {"one": 1, "half": len(lines[-1]) // 2, "all_but_brace": len(lines[-1]) - 2}[cut]
    torn = lines[-1][:keep]
    dd.log_path(SID).write_bytes(b"".join(lines[:-1]) + torn)
    sdir = dd.session_dir(SID)
    untouched = snapshot(sdir)

    records, warnings = read_records(dd, SID)  # read-only first: skips, warns, changes nothing
    assert [r["seq"] for r in records] == [1, 2]
    assert warnings == [
        f"Session {SID}: skipped a torn last line of log.jsonl ({keep} bytes after record 2); "
        "it is set aside the next time the session is opened."
    ]
    assert snapshot(sdir) == untouched
    with pytest.raises(StorageError) as info:
        read_records(dd, SID, tolerate_torn=False)
    assert info.value.data["line"] == 3

    with caplog.at_level(logging.WARNING):
        s = SessionStore.open(dd, SID)
    warning = (
        f"Session {SID}: the last line of log.jsonl was torn (a crash during a write); its {keep} bytes "
        "were moved to log.jsonl.torn-3 and the log ends at record 2."
    )
    assert s.warnings == [warning]
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [warning]
    assert dd.log_path(SID).read_bytes() == b"".join(lines[:-1])
    assert (sdir / "log.jsonl.torn-3").read_bytes() == torn
    assert stat.S_IMODE((sdir / "log.jsonl.torn-3").stat().st_mode) == 0o600
    assert s.last_seq == 2
    s.close()

    repaired = snapshot(sdir)
    s = SessionStore.open(dd, SID)  # a second open changes nothing
    assert s.warnings == []
    s.close()
    assert snapshot(sdir) == repaired
    with SessionStore.open(dd, SID) as s:
        s.append("title", {"title": "t"})
    assert [json.loads(x)["seq"] for x in dd.log_path(SID).read_bytes().splitlines()] == [1, 2, 3]


def test_torn_at_line_start_needs_no_repair(dd: DataDir) -> None:
    lines = _session_with_lines(dd)
    dd.log_path(SID).write_bytes(b"".join(lines[:-1]))
    with SessionStore.open(dd, SID) as s:
        assert (s.warnings, s.last_seq) == ([], 2)
    assert sorted(p.name for p in dd.session_dir(SID).iterdir()) == ["lock", "log.jsonl", "meta.json"]


def test_complete_last_line_without_newline_is_accepted(dd: DataDir) -> None:
    lines = _session_with_lines(dd)
    unterminated = b"".join(lines)[:-1]
    dd.log_path(SID).write_bytes(unterminated)
    assert read_records(dd, SID)[1] == []
    with SessionStore.open(dd, SID) as s:
        assert (s.warnings, s.last_seq) == ([], 3)
        assert dd.log_path(SID).read_bytes() == unterminated  # nothing written at open
        s.append("title", {"title": "t"})
    data = dd.log_path(SID).read_bytes()
    assert data.startswith(b"".join(lines))
    assert [json.loads(x)["seq"] for x in data.splitlines()] == [1, 2, 3, 4]


def test_same_torn_bytes_twice_reuse_the_file_and_new_bytes_get_a_suffix(dd: DataDir) -> None:
    lines = _session_with_lines(dd)
    good = b"".join(lines[:-1])
    sdir = dd.session_dir(SID)
    (sdir / "log.jsonl.torn-3").write_bytes(b"{older")
    dd.log_path(SID).write_bytes(good + b"{newer")
    SessionStore.open(dd, SID).close()
    assert ((sdir / "log.jsonl.torn-3").read_bytes(), (sdir / "log.jsonl.torn-3.1").read_bytes()) == (
        b"{older", b"{newer"
    )  # fmt: skip
    dd.log_path(SID).write_bytes(good + b"{newer")
    SessionStore.open(dd, SID).close()
    assert sorted(p.name for p in sdir.glob("log.jsonl.torn-*")) == ["log.jsonl.torn-3", "log.jsonl.torn-3.1"]


def test_corrupt_middle_line_is_an_error_naming_it(dd: DataDir) -> None:
    lines = _session_with_lines(dd)
    dd.log_path(SID).write_bytes(lines[0] + b"{broken\n" + lines[2])
    for call in (lambda: SessionStore.open(dd, SID), lambda: read_records(dd, SID)):
        with pytest.raises(StorageError) as info:
            call()
        assert info.value.data == {"sessionId": SID, "path": str(dd.log_path(SID)), "line": 2}
        assert info.value.exit_code == 5
    assert holder(dd.lock_path(SID)) is None  # the failed open let the lock go
    SessionLock.acquire(dd.lock_path(SID)).release()


def test_newer_log_version_is_refused(dd: DataDir) -> None:
    lines = _session_with_lines(dd)
    dd.log_path(SID).write_bytes(lines[0] + b'{"v":2,"seq":2,"at":"x","kind":"message"}\n')
    for call in (lambda: SessionStore.open(dd, SID), lambda: read_records(dd, SID)):
        with pytest.raises(UnsupportedSessionVersion) as info:
            call()
        assert (
            info.value.message == f"{SID} was written by a newer agentd (log v2); upgrade agentd to open it."
        )


@pytest.mark.parametrize("sid", ["sess_nope", "../../etc"])
@pytest.mark.parametrize("reader", [SessionStore.open, read_records])
def test_missing_session(dd: DataDir, sid: str, reader: Callable[[DataDir, str], Any]) -> None:
    with pytest.raises(SessionNotFound) as info:
        reader(dd, sid)
    assert info.value.message == (
        f"Session {sid} is not in the data dir ({dd.root}); run agentd sessions list to see "
        "sessions, or start a new session."
    )
    assert info.value.data == {"sessionId": sid}


# ---- blobs and meta.json ---------------------------------------------------------------------------


def test_blobs(dd: DataDir, store: SessionStore) -> None:
    data = b"\x00big output\xff" * 1000
    ref = store.write_blob(data)
    assert ref == hashlib.sha256(data).hexdigest()
    path = dd.blobs_dir(SID) / ref
    assert path.read_bytes() == data
    mtime = path.stat().st_mtime_ns
    assert store.write_blob(data) == ref
    assert path.stat().st_mtime_ns == mtime  # written once
    assert store.read_blob(ref) == data
    assert read_blob(dd, SID, ref) == data
    assert sorted(p.name for p in dd.blobs_dir(SID).iterdir()) == [ref]
    with pytest.raises(ValueError):
        store.read_blob("../meta.json")
    with pytest.raises(StorageError):
        store.read_blob("0" * 64)


def test_update_meta_is_atomic(dd: DataDir, store: SessionStore, monkeypatch: pytest.MonkeyPatch) -> None:
    tokens = {"input": 10, "output": 5, "cacheRead": 100, "cacheWrite": 0}
    new = store.update_meta(title="Fix the parser", turns=1, tokens=tokens)
    assert new == {**store.meta, "title": "Fix the parser", "turns": 1, "tokens": tokens}
    assert new["updatedAt"] == "2026-09-01T10:15:31Z"
    assert json.loads(dd.meta_path(SID).read_bytes()) == new
    assert store.update_meta(updatedAt="2030-01-01T00:00:00Z")["updatedAt"] == "2030-01-01T00:00:00Z"
    before = dd.meta_path(SID).read_bytes()
    monkeypatch.setenv("AGENTD_FAILPOINTS", "meta.before_rename=raise")
    with pytest.raises(failpoints.FailpointError):
        store.update_meta(title="lost")
    assert dd.meta_path(SID).read_bytes() == before
    assert store.meta["title"] == "Fix the parser"
    assert list(dd.session_dir(SID).glob("*.tmp")) == []
    with pytest.raises(TypeError) as info:
        store.update_meta(id="x", colour="red")
    assert str(info.value) == "update_meta: unknown or read-only fields: colour, id"


def test_open_rebuilds_missing_meta_and_drops_stale_tmp(dd: DataDir, store: SessionStore) -> None:
    store.append("title", {"title": "t"})
    store.close()
    dd.meta_path(SID).unlink()
    (dd.session_dir(SID) / "meta.json.tmp").write_bytes(b"{half")
    with SessionStore.open(dd, SID) as s:
        assert s.warnings == [f"Session {SID}: meta.json is missing or unreadable; rebuilt it from the log."]
        assert (s.meta["createdAt"], s.meta["updatedAt"], s.meta["cwd"]) == (
            "2026-09-01T10:15:30Z", "2026-09-01T10:15:31Z", "/projects/shop"
        )  # fmt: skip
    assert sorted(p.name for p in dd.session_dir(SID).iterdir()) == ["lock", "log.jsonl"]


# ---- the lock within one process ---------------------------------------------------------------------


def test_second_open_in_the_same_process_is_refused(dd: DataDir, store: SessionStore) -> None:
    before = snapshot(dd.session_dir(SID), skip=())
    with pytest.raises(SessionLocked) as info:
        SessionStore.open(dd, SID)
    assert info.value.message == (
        f"Another editor window connected to this agentd holds {SID}; close the session there, or start a new one."
    )
    assert info.value.data == {"sessionId": SID, **store._lock.info, "sameProcess": True}
    assert info.value.data["pid"] == os.getpid()
    assert snapshot(dd.session_dir(SID), skip=()) == before  # the loser wrote nothing, not even the lock
    store.close()
    SessionStore.open(dd, SID).close()


def test_flock_conflicts_across_fds_of_one_process(dd: DataDir, store: SessionStore) -> None:
    import fcntl

    fd = os.open(dd.lock_path(SID), os.O_RDWR)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)


def test_lock_record_and_release(dd: DataDir, store: SessionStore) -> None:
    info = json.loads(dd.lock_path(SID).read_bytes())
    assert list(info) == ["pid", "hostname", "since"]
    assert info["pid"] == os.getpid()
    assert holder(dd.lock_path(SID)) == info
    store.close()
    assert dd.lock_path(SID).read_bytes() == b""
    assert holder(dd.lock_path(SID)) is None
