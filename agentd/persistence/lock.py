"""The per-session OS lock (CONTRACTS.md §9, PROTOCOL.md §12.3, §11 SessionLocked).

Owns: `SessionLock`, an exclusive `flock` on `sessions/<id>/lock` (0600) held for the session's lifetime
and released by `release()` or by the kernel when the process dies; the holder record
`{"pid", "hostname", "since"}` written into that file; `holder()` for listings; and the in-process registry
that makes a second acquire of a held session in the same process fail with `sameProcess: true`.
A loser writes nothing. Must not import pygls, lsprotocol, acp or agentd.adapters.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from agentd.errors import SessionLocked, StorageError
from agentd.persistence.paths import open_private, write_all
from agentd.persistence.records import format_at

log = logging.getLogger(__name__)

# Locks held by this process, keyed by the lock file's real path. Only SessionLock touches it.
_held: dict[str, SessionLock] = {}
_held_mutex = threading.Lock()

_HOLDER_READ_DEADLINE_S = 1.0  # a winner writes its record right after flock; wait this long for it


def _key(path: Path) -> str:
    return os.path.realpath(path)


def _since_hhmm(since: object) -> str:
    try:
        return datetime.fromisoformat(str(since)).astimezone().strftime("%H:%M")
    except ValueError:
        return str(since)


def locked_error(session_id: str, info: dict[str, Any] | None, *, same_process: bool) -> SessionLocked:
    """The SessionLocked error of PROTOCOL.md §11 for `session_id` held by `info` (`{pid, hostname, since}`).

    `data` is `{sessionId, pid, hostname, since, sameProcess}`; unknown holder fields are None.
    """
    info = info or {}
    pid, host, since = info.get("pid"), info.get("hostname"), info.get("since")
    if same_process:
        msg = (
            f"Another editor window connected to this agentd holds {session_id}; "
            "close the session there, or start a new one."
        )
    elif pid is None:
        msg = (
            f"Session {session_id} is open in another agentd process (its lock file names no holder). "
            f"Stop that process, then retry; or read it with agentd sessions show {session_id}, "
            "or start a new session."
        )
    else:
        msg = (
            f"Session {session_id} is open in agentd pid {pid} on {host} since {_since_hhmm(since)}. "
            f"Close that editor window or stop pid {pid}, then retry; "
            f"or read it with agentd sessions show {session_id}, or start a new session."
        )
    return SessionLocked(
        msg, sessionId=session_id, pid=pid, hostname=host, since=since, sameProcess=same_process
    )


def read_lock_info(path: Path) -> dict[str, Any] | None:
    """The `{pid, hostname, since}` record in the lock file, or None if it is absent, empty or unreadable."""
    try:
        raw = Path(path).read_bytes()
    except OSError:
        return None
    try:
        info = json.loads(raw) if raw.strip() else None
    except ValueError:
        return None
    if not isinstance(info, dict) or not isinstance(info.get("pid"), int):
        return None
    return {"pid": info["pid"], "hostname": info.get("hostname"), "since": info.get("since")}


def pid_alive(pid: int) -> bool:
    """True if process `pid` exists on this host and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def holder(path: Path) -> dict[str, Any] | None:
    """Who holds the lock at `path`: `{pid, hostname, since}`, or None if nobody live does.

    Takes no lock (PROTOCOL.md §6.3): reads the holder record and, for this host, checks that the pid is
    alive; a record naming another host is trusted. A lock held by this process is reported as such.
    """
    with _held_mutex:
        mine = _held.get(_key(path))
        if mine is not None:
            return dict(mine.info)
    info = read_lock_info(path)
    if info is None:
        return None
    if info["hostname"] == socket.gethostname():
        if info["pid"] == os.getpid() or not pid_alive(info["pid"]):
            return None
    return info


def _wait_for_holder_info(path: Path) -> dict[str, Any] | None:
    deadline = time.monotonic() + _HOLDER_READ_DEADLINE_S
    while True:
        info = read_lock_info(path)
        if info is not None or time.monotonic() >= deadline:
            return info
        time.sleep(0.005)


class SessionLock:
    """An exclusive, non-blocking `flock` on one session's lock file, held until `release()` or death."""

    def __init__(self, path: Path, fd: int, session_id: str, info: dict[str, Any]) -> None:
        self.path = path
        self.session_id = session_id
        self.info = info
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, path: Path, *, session_id: str | None = None) -> SessionLock:
        """Lock `path` (created 0600 if absent) and write `{pid, hostname, since}` into it (truncate, fsync).

        `session_id` defaults to the name of the lock file's folder. Raises SessionLocked (PROTOCOL.md §11)
        if another process holds it (naming its pid) or this process does (`sameProcess: true`);
        FileNotFoundError if the session folder does not exist; StorageError if the file cannot be written.
        A record left by a dead holder is taken over with a logged warning (PROTOCOL.md §6.2).
        """
        path = Path(path)
        sid = session_id or path.parent.name
        with _held_mutex:
            mine = _held.get(_key(path))
            if mine is not None:
                raise locked_error(sid, mine.info, same_process=True)
            fd = cls._open_and_flock(path, sid)
            if fd is not None:
                return cls._register(fd, path, sid)
        # Held by another process: report it (outside the mutex, as the wait may take a moment).
        raise locked_error(sid, _wait_for_holder_info(path), same_process=False)

    @classmethod
    def _register(cls, fd: int, path: Path, sid: str) -> SessionLock:
        try:
            info = cls._write_holder(fd, path, sid)
        except OSError as exc:
            os.close(fd)
            raise StorageError(
                f"Cannot write the lock file of session {sid} ({path}): {exc.strerror}. "
                "Check the data dir's permissions and free space, or set --data-dir.",
                sessionId=sid,
                path=str(path),
            ) from exc
        lock = cls(path, fd, sid, info)
        _held[_key(path)] = lock
        return lock

    @staticmethod
    def _open_and_flock(path: Path, sid: str) -> int | None:
        """The locked fd, or None if another process holds the lock. Raises FileNotFoundError, StorageError."""
        try:
            fd = open_private(path, os.O_RDWR | os.O_CREAT)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise StorageError(
                f"Cannot open the lock file of session {sid} ({path}): {exc.strerror}. "
                "Check the data dir's permissions, or set --data-dir.",
                sessionId=sid,
                path=str(path),
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        # The file may have been unlinked (session deleted) between open and flock: then we hold nothing.
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
            raise FileNotFoundError(2, "session deleted while opening it", str(path))
        return fd

    @staticmethod
    def _write_holder(fd: int, path: Path, sid: str) -> dict[str, Any]:
        stale = read_lock_info(path)
        info = {"pid": os.getpid(), "hostname": socket.gethostname(), "since": format_at()}
        if stale is not None and stale["pid"] != info["pid"]:
            log.warning(
                "session %s: taking over the lock left by pid %s on %s (since %s); that process is gone",
                sid,
                stale["pid"],
                stale["hostname"],
                stale["since"],
            )
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        write_all(fd, json.dumps(info, separators=(",", ":")).encode() + b"\n")
        os.fsync(fd)
        return info

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Clear the holder record, unlock and close. Idempotent; never raises for an I/O error."""
        with _held_mutex:
            fd, self._fd = self._fd, None
            if fd is None:
                return
            if _held.get(_key(self.path)) is self:
                del _held[_key(self.path)]
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __enter__(self) -> SessionLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
