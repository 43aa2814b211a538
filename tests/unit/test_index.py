"""Listing and deleting sessions (CONTRACTS.md §9; agentd/persistence/index.py)."""

from __future__ import annotations

import builtins
import io
import json
import os
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agentd.errors import SessionLocked, SessionNotFound
from agentd.persistence.index import delete_session, list_sessions, newest_session, read_meta
from agentd.persistence.lock import holder
from agentd.persistence.paths import DataDir
from agentd.persistence.store import SessionStore


def at(minute: int) -> Any:
    return lambda: datetime(2026, 9, 1, 10, minute, 0, tzinfo=UTC)


def make(dd: DataDir, sid: str, cwd: Path, minute: int, *, keep_open: bool = False) -> SessionStore:
    s = SessionStore.create(
        dd, sid, {"cwd": str(cwd), "provider": "anthropic", "model": "m"}, clock=at(minute)
    )
    if not keep_open:
        s.close()
    return s


def expected(sid: str, cwd: Path, minute: int, locked_by: Any = None) -> dict[str, Any]:
    t = f"2026-09-01T10:{minute:02d}:00Z"
    return {
        "id": sid, "cwd": str(cwd), "title": None, "model": "m", "provider": "anthropic", "createdAt": t,
        "updatedAt": t, "turns": 0, "tokens": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        "logVersion": 1, "lockedBy": locked_by,
    }  # fmt: skip


@pytest.fixture
def dd(tmp_path: Path) -> DataDir:
    return DataDir(tmp_path / "data")


@pytest.fixture
def ws(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "ws_a", tmp_path / "ws_b"
    a.mkdir()
    b.mkdir()
    return a, b


def test_empty_data_dir(dd: DataDir) -> None:
    assert list_sessions(dd) == []
    assert newest_session(dd, None) is None


def test_newest_first_filtered_by_workspace(dd: DataDir, ws: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = ws
    make(dd, "sess_1", a, 5)
    make(dd, "sess_2", b, 9)
    open_one = make(dd, "sess_3", a, 7, keep_open=True)
    lock = json.loads(dd.lock_path("sess_3").read_bytes())
    assert list_sessions(dd) == [
        expected("sess_2", b, 9),
        expected("sess_3", a, 7, lock),
        expected("sess_1", a, 5),
    ]
    link = tmp_path / "link_to_a"
    link.symlink_to(a)
    assert list_sessions(dd, link) == [expected("sess_3", a, 7, lock), expected("sess_1", a, 5)]
    assert newest_session(dd, a) == "sess_3"
    assert newest_session(dd, b) == "sess_2"
    assert newest_session(dd, tmp_path) is None
    open_one.close()
    assert list_sessions(dd, a)[0]["lockedBy"] is None


def test_ties_break_by_newest_id(dd: DataDir, ws: tuple[Path, Path]) -> None:
    make(dd, "sess_a", ws[0], 5)
    make(dd, "sess_b", ws[0], 5)
    assert [m["id"] for m in list_sessions(dd)] == ["sess_b", "sess_a"]


def test_listing_reads_only_meta_json(
    dd: DataDir, ws: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    make(dd, "sess_1", ws[0], 5)
    (dd.sessions_dir / "sess_broken").mkdir()
    (dd.sessions_dir / "sess_broken" / "log.jsonl").write_bytes(b"{}\n")  # no meta record: not listed
    (dd.sessions_dir / "stray.txt").write_bytes(b"")
    opened: list[str] = []
    real_open, real_io_open, real_os_open = builtins.open, io.open, os.open

    def spy(real: Any) -> Any:
        def wrapper(file: Any, *args: Any, **kwargs: Any) -> Any:
            opened.append(Path(os.fsdecode(file)).name)
            if str(file).endswith("log.jsonl"):
                raise PermissionError(f"listing opened {file}")
            return real(file, *args, **kwargs)

        return wrapper

    monkeypatch.setattr(builtins, "open", spy(real_open))
    monkeypatch.setattr(io, "open", spy(real_io_open))
    monkeypatch.setattr(os, "open", spy(real_os_open))
    assert [m["id"] for m in list_sessions(dd)] == ["sess_1"]
    assert opened.count("log.jsonl") == 1  # only sess_broken's, which has no meta.json (H12 class, break9)
    assert "meta.json" in opened


def test_read_meta(dd: DataDir, ws: tuple[Path, Path]) -> None:
    make(dd, "sess_1", ws[0], 5)
    assert read_meta(dd, "sess_1") == {
        k: v for k, v in expected("sess_1", ws[0], 5).items() if k != "lockedBy"
    }
    assert read_meta(dd, "sess_none") is None
    assert read_meta(dd, "../x") is None
    dd.meta_path("sess_1").write_bytes(b"[1]")
    assert read_meta(dd, "sess_1") is None


def test_delete_session(dd: DataDir, ws: tuple[Path, Path]) -> None:
    s = make(dd, "sess_1", ws[0], 5, keep_open=True)
    with pytest.raises(SessionLocked) as info:
        delete_session(dd, "sess_1")
    assert info.value.data["sameProcess"] is True
    assert dd.log_path("sess_1").exists()
    s.close()
    delete_session(dd, "sess_1")
    assert not dd.session_dir("sess_1").exists()
    assert list_sessions(dd) == []
    for sid in ("sess_1", "../data"):
        with pytest.raises(SessionNotFound):
            delete_session(dd, sid)


def test_holder_of_stale_and_foreign_records(dd: DataDir, ws: tuple[Path, Path]) -> None:
    make(dd, "sess_1", ws[0], 5)
    lock = dd.lock_path("sess_1")
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True
    )
    stale = {"pid": int(dead.stdout), "hostname": socket.gethostname(), "since": "2026-09-01T10:00:00Z"}
    lock.write_text(json.dumps(stale))
    assert holder(lock) is None  # that process is gone
    foreign = {"pid": 1, "hostname": "some-other-host", "since": "2026-09-01T10:00:00Z"}
    lock.write_text(json.dumps(foreign))
    assert holder(lock) == foreign  # another host's pid cannot be checked: trusted
    lock.write_text("not json")
    assert holder(lock) is None
