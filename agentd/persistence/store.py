"""One open session's files: the append-only log, its index, meta.json, blobs, the lock (CONTRACTS.md §9).

Owns: `SessionStore`, the single writer of `sessions/<id>/log.jsonl` and `log.idx` for as long as it holds
the session lock: at open it reads the log from its last indexed compaction on (agentd/persistence/logindex.py;
the whole log, streamed, when the index is missing or does not verify, and then rewrites the index), repairs
a torn last line, assigns `seq` and `at`, appends records with one `os.write` on an O_APPEND fd (O(1) in the
log's size: the last seq and size live in memory), fsyncs, then indexes a `compaction` record (never before
it is durable), writes blobs and meta.json atomically; it keeps no parsed record but reads them back on
demand (`read_sparse`, `iter_records`). `read_records` is the lock-free read-only view for `sessions
show`/`export`. Failpoints (TESTING.md §4): `store.append.before|mid|after`, `store.index.mid`,
`meta.before_rename`.
Must not import pygls, lsprotocol, acp or agentd.adapters.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import agentd
from agentd import failpoints
from agentd.errors import StorageError
from agentd.persistence.branches import ActiveBranch
from agentd.persistence.index import META_FIELDS, initial_meta, read_meta, session_not_found
from agentd.persistence.lock import SessionLock
from agentd.persistence.logindex import (
    Entry,
    Sparse,
    Tally,
    append_entries,
    iter_decoded,
    iter_lines,
    load_entries,
    read_line,
    rewrite_entries,
    scan_tail,
)
from agentd.persistence.logseek import find_seq, head_at, iter_lines_back
from agentd.persistence.paths import (
    DataDir,
    as_data_dir,
    atomic_write,
    ensure_dir,
    fsync_dir,
    is_valid_session_id,
    open_private,
    write_all,
)
from agentd.persistence.records import (
    LOG_VERSION,
    LogScan,
    decode_line,
    encode_record,
    format_at,
    scan_log,
)

log = logging.getLogger(__name__)

_BLOB_REF = re.compile(r"[0-9a-f]{64}")
_WRITE_FAILED = (
    "Cannot write the session log in the data dir (disk full?). Free space or set --data-dir; "
    "the turn was stopped and nothing was lost before this point."
)

Clock = Callable[[], datetime]


def _io_error(what: str, session_id: str, path: Path, exc: OSError, advice: str) -> StorageError:
    return StorageError(
        f"Cannot {what} of session {session_id} ({path}): {exc.strerror}. {advice}",
        sessionId=session_id,
        path=str(path),
    )


def _existing_log(data_dir: DataDir, session_id: str) -> Path:
    if not is_valid_session_id(session_id) or not data_dir.log_path(session_id).is_file():
        raise session_not_found(data_dir, session_id)
    return data_dir.log_path(session_id)


def _read_log(data_dir: DataDir, session_id: str) -> tuple[Path, bytes]:
    path = _existing_log(data_dir, session_id)
    try:
        return path, path.read_bytes()
    except FileNotFoundError:
        raise session_not_found(data_dir, session_id) from None
    except OSError as exc:
        raise _io_error("read the log", session_id, path, exc, "Check the data dir's permissions.") from exc


def read_records(
    data_dir: DataDir | str | os.PathLike[str], session_id: str, *, tolerate_torn: bool = True
) -> tuple[list[dict[str, Any]], list[str]]:
    """Read a session's log without locking or changing any byte (CONTRACTS.md §9 read-only replay).

    Returns (records in log order including unknown kinds, warnings). A torn last line is skipped with a
    warning, or raises StorageError if `tolerate_torn` is False. Raises SessionNotFound, StorageError
    (`data.line` names a damaged line), UnsupportedSessionVersion.
    """
    dd = as_data_dir(data_dir)
    path, data = _read_log(dd, session_id)
    scan = scan_log(data, session_id, str(path))
    if not scan.torn:
        return scan.records, []
    if not tolerate_torn:
        raise StorageError(
            f"Session {session_id}: the last line of {path} is torn; open the session to repair it.",
            sessionId=session_id,
            path=str(path),
            line=len(scan.records) + 1,
        )
    return scan.records, [
        f"Session {session_id}: skipped a torn last line of log.jsonl ({len(scan.torn)} bytes after "
        f"record {scan.last_seq}); it is set aside the next time the session is opened."
    ]


def read_blob(data_dir: DataDir | str | os.PathLike[str], session_id: str, ref: str) -> bytes:
    """The bytes of blob `ref` (sha256 hex) of a session. Raises ValueError for a malformed ref, StorageError."""
    if not isinstance(ref, str) or not _BLOB_REF.fullmatch(ref):
        raise ValueError(f"invalid blob ref {ref!r}: expected 64 lowercase hex digits")
    path = as_data_dir(data_dir).blobs_dir(session_id) / ref
    try:
        return path.read_bytes()
    except OSError as exc:
        raise _io_error(
            f"read blob {ref}", session_id, path, exc, "The blob is missing or unreadable."
        ) from exc


class SessionStore:
    """The open session: owns the lock and the O_APPEND fd of `log.jsonl` (0600) until `close()`.

    Build it with `create()` or `open()`. Not thread-safe: one task appends at a time.
    """

    def __init__(
        self, data_dir: DataDir, session_id: str, lock: SessionLock, fd: int, scan: LogScan, clock: Clock
    ) -> None:
        self.data_dir = data_dir
        self.session_id = session_id
        self.log_path = data_dir.log_path(session_id)
        self.warnings: list[str] = []
        self._lock = lock
        self._fd: int | None = fd
        self._fd_lock = threading.Lock()  # `sync` may run in a worker thread (Journal.durable); close waits
        self._last_seq = scan.last_seq
        self._size = scan.good_len
        self._opened_len = scan.good_len  # what `records()` reads back
        self._needs_newline = scan.needs_newline
        self._clock = clock
        self._meta: dict[str, Any] = {}
        self._broken = False
        self.tally = Tally()  # whole-log facts (agentd/persistence/logindex.py), current with every append
        self.entries: list[Entry] = []  # the index: one entry per durable compaction record, in log order
        self._unindexed: list[Entry] = []  # entries of compaction records awaiting their fsync
        self._index_lock = threading.Lock()
        self._first: dict[str, Any] | None = None  # record 1 (the meta record), read at open
        self._last_at: str | None = None

    # ---- opening -------------------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        data_dir: DataDir | str | os.PathLike[str],
        session_id: str,
        meta: Mapping[str, Any],
        *,
        clock: Clock | None = None,
    ) -> SessionStore:
        """Create `sessions/<id>/` (0700), lock it, write the `meta` record (seq 1) and `meta.json`.

        `meta` is the meta record's payload (cwd, directories, provider, model, ...); `sessionId` and
        `agentdVersion` are put first. `clock` returns the wall-clock time for `at` (default: now, UTC).
        Raises ValueError for an invalid id or a `sessionId` that differs, FileExistsError if the session
        exists, StorageError if the data dir cannot be written.
        """
        dd = as_data_dir(data_dir)
        sdir = dd.session_dir(session_id)
        if meta.get("sessionId", session_id) != session_id:
            raise ValueError(f"meta sessionId {meta['sessionId']!r} != {session_id!r}")
        advice = "Check the data dir's permissions and free space, or set --data-dir."
        try:
            ensure_dir(dd.sessions_dir)
            sdir.mkdir(mode=0o700)
            os.chmod(sdir, 0o700)
            fsync_dir(dd.sessions_dir)
            lock = SessionLock.acquire(dd.lock_path(session_id), session_id=session_id)
        except FileExistsError:
            raise
        except OSError as exc:
            raise _io_error("create the folder", session_id, sdir, exc, advice) from exc
        store: SessionStore | None = None
        try:
            fd = open_private(dd.log_path(session_id), os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL)
            store = cls(dd, session_id, lock, fd, LogScan([], 0, b"", False), clock or _utcnow)
            payload = {"sessionId": session_id, "agentdVersion": agentd.__version__, **meta}
            record = store.append("meta", payload)
            store._first, store._opened_len = record, store._size
            fsync_dir(sdir)
            store._meta = initial_meta(session_id, meta, record["at"])
            store._write_meta()
        except OSError as exc:
            _abandon(store, lock)
            raise _io_error("create the files", session_id, sdir, exc, advice) from exc
        except BaseException:
            _abandon(store, lock)
            raise
        return store

    @classmethod
    def open(
        cls, data_dir: DataDir | str | os.PathLike[str], session_id: str, *, clock: Clock | None = None
    ) -> SessionStore:
        """Open an existing session for writing (CONTRACTS.md §9): lock, read the log, repair a torn tail.

        A torn last line is cut off the log and its bytes moved to `log.jsonl.torn-<seq>` (fsynced, with a
        warning in `.warnings` and the log). Nothing else is written. Raises SessionNotFound (the message
        points to `agentd sessions list`), SessionLocked, StorageError (`data.line` names a damaged line),
        UnsupportedSessionVersion.
        """
        dd = as_data_dir(data_dir)
        _existing_log(dd, session_id)
        try:
            lock = SessionLock.acquire(dd.lock_path(session_id), session_id=session_id)
        except FileNotFoundError:
            raise session_not_found(dd, session_id) from None
        fd = -1
        try:
            path = _existing_log(dd, session_id)
            fd = open_private(path, os.O_RDWR | os.O_APPEND)
            store = cls._opened(dd, session_id, lock, fd, clock or _utcnow)
            store._meta = store._load_meta()
            store._remove_stale_tmp()
        except FileNotFoundError:
            if fd >= 0:
                os.close(fd)
            lock.release()
            raise session_not_found(dd, session_id) from None
        except BaseException:
            if fd >= 0:
                os.close(fd)
            lock.release()
            raise
        return store

    @classmethod
    def _opened(cls, dd: DataDir, session_id: str, lock: SessionLock, fd: int, clock: Clock) -> SessionStore:
        """Read the index and the log after its last entry (all of it without one), repair a torn tail, and
        rewrite the index when it was not exactly right."""
        path = dd.log_path(session_id)
        try:
            size = os.fstat(fd).st_size
            entries, exact = load_entries(dd.index_path(session_id), fd, size)
        except OSError as exc:
            raise _io_error(
                "read the log", session_id, path, exc, "Check the data dir's permissions."
            ) from exc
        tally = Tally()
        start, last_seq = 0, 0
        if entries:
            tally.resume(entries)
            start, last_seq = entries[-1].offset + entries[-1].length, entries[-1].seq
        try:
            tail = scan_tail(fd, start, size, tally, last_seq, (session_id, str(path)))
        except OSError as exc:
            raise _io_error(
                "read the log", session_id, path, exc, "Check the data dir's permissions."
            ) from exc
        store = cls(
            dd, session_id, lock, fd, LogScan([], tail.good_len, tail.torn, tail.needs_newline), clock
        )
        store._last_seq, store.tally, store._last_at = tail.last_seq, tally, tail.last_at
        store._first = tail.first if start == 0 else None
        store.entries = entries + tail.entries
        if tail.torn:
            store._set_aside_torn(tail.good_len, tail.torn, tail.last_seq)
        if tail.entries or not exact:
            store._rewrite_index()
        return store

    def _set_aside_torn(self, good_len: int, torn: bytes, last_seq: int) -> None:
        seq = last_seq + 1
        target = self.log_path.with_name(f"log.jsonl.torn-{seq}")
        n = 1
        try:
            while target.exists() and target.read_bytes() != torn:
                target = self.log_path.with_name(f"log.jsonl.torn-{seq}.{n}")
                n += 1
            if not target.exists():
                atomic_write(target, torn)
            assert self._fd is not None
            os.ftruncate(self._fd, good_len)
            os.fsync(self._fd)
            fsync_dir(self.log_path.parent)
        except OSError as exc:
            advice = "Free space or check the data dir's permissions, then retry."
            raise _io_error("repair the torn last line", self.session_id, self.log_path, exc, advice) from exc
        msg = (
            f"Session {self.session_id}: the last line of log.jsonl was torn (a crash during a write); "
            f"its {len(torn)} bytes were moved to {target.name} and the log ends at record {seq - 1}."
        )
        self.warnings.append(msg)
        log.warning("%s", msg)

    def _load_meta(self) -> dict[str, Any]:
        meta = read_meta(self.data_dir, self.session_id)
        if meta is not None:
            return meta
        first = self.first_record() or {}
        first = first if first.get("kind") == "meta" else {}
        rebuilt = initial_meta(self.session_id, first, first.get("at") or format_at(self._clock()))
        if self._last_at:
            rebuilt["updatedAt"] = self._last_at
        msg = f"Session {self.session_id}: meta.json is missing or unreadable; rebuilt it from the log."
        self.warnings.append(msg)
        log.warning("%s", msg)
        return rebuilt

    def _remove_stale_tmp(self) -> None:
        sdir = self.data_dir.session_dir(self.session_id)
        for tmp in [*sdir.glob("*.tmp"), *self.data_dir.blobs_dir(self.session_id).glob("*.tmp")]:
            with contextlib.suppress(OSError):
                tmp.unlink()

    # ---- reading -------------------------------------------------------------------------------------

    @property
    def last_seq(self) -> int:
        """The seq of the last record written (0 for an empty log)."""
        return self._last_seq

    @property
    def meta(self) -> dict[str, Any]:
        """A copy of the current meta.json content (fields: META_FIELDS)."""
        return json.loads(json.dumps(self._meta))

    def records(self) -> list[dict[str, Any]]:
        """The records that were in the log at open (for `create()`: the meta record), in log order, unknown
        kinds included, read back from disk now (a list of the whole log: for tests and small logs; a resume
        reads `read_sparse` and `iter_records`). Raises StorageError."""
        return [rec for _, rec in self.iter_records(0, self._opened_len)]

    def iter_records(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
        """(byte offset, decoded record) of each record of the log in bytes [start, end) (default: to its end
        now), streamed; `start` must be where a record starts (0, or a `Sparse`/`Entry` offset). Raises
        StorageError."""
        fd = self._require_open()
        stop = self._size if end is None else end
        try:
            yield from iter_decoded(fd, start, stop)
        except (OSError, ValueError) as exc:
            raise StorageError(
                f"Session {self.session_id}: cannot read {self.log_path} at byte {start} ({exc}).",
                sessionId=self.session_id, path=str(self.log_path),
            ) from None  # fmt: skip

    def read_sparse(self, where: Sparse | Entry) -> dict[str, Any]:
        """The record an index item points at, checked: it decodes and has the item's seq (and kind). Raises
        StorageError when it does not (the caller falls back to reading the whole log)."""
        fd = self._require_open()
        kind = where.kind if isinstance(where, Sparse) else "compaction"
        try:
            rec = decode_line(read_line(fd, where.offset, where.length))
        except (OSError, ValueError):
            rec = {}
        if rec.get("seq") != where.seq or rec.get("kind") != kind:
            raise StorageError(
                f"Session {self.session_id}: the index of {self.log_path} does not match record {where.seq}.",
                sessionId=self.session_id, path=str(self.log_path),
            )  # fmt: skip
        return rec

    def active_branch(self) -> ActiveBranch:
        """The active branch (agentd/persistence/branches.py) from the log's `rewind` records, read through
        the index. Raises StorageError."""
        rewinds = [self.read_sparse(x) for x in self.tally.sparse if x.kind == "rewind"]
        return ActiveBranch(rewinds, self._last_seq)

    def starts_on_branch(self, offset: int, branch: ActiveBranch) -> bool:
        """Whether a record of `branch` (a checkpoint or prompt) starts at byte `offset`. Raises StorageError."""
        rec = self.record_at(offset) or {}
        return rec.get("kind") in ("checkpoint", "prompt") and rec.get("seq") in branch

    def has_kind_after(self, offset: int, kind: str) -> bool:
        """Whether a record of `kind` may follow byte `offset` (its `"kind":"<kind>"` is in a line; read, not
        parsed). Raises StorageError."""
        needle = b'"kind":"' + kind.encode() + b'"'
        try:
            return any(needle in line for _, line in iter_lines(self._require_open(), offset, self._size))
        except OSError as exc:
            raise StorageError(
                f"Session {self.session_id}: cannot read {self.log_path} at byte {offset} ({exc}).",
                sessionId=self.session_id, path=str(self.log_path),
            ) from None  # fmt: skip

    def record_at(self, offset: int) -> dict[str, Any] | None:
        """The record that starts at byte `offset` (only its line is parsed), None at the end of the log.
        Raises StorageError."""
        fd = self._require_open()
        try:
            line = next((line for _, line in iter_lines(fd, offset, self._size)), None)
            return None if line is None else decode_line(line)
        except (OSError, ValueError) as exc:
            raise StorageError(
                f"Session {self.session_id}: cannot read {self.log_path} at byte {offset} ({exc}).",
                sessionId=self.session_id, path=str(self.log_path),
            ) from None  # fmt: skip

    def offset_of(self, seq: int) -> int | None:
        """The byte offset of record `seq` (binary search, `logindex.find_seq`), None when the log has no
        such record. Raises StorageError."""
        try:
            return find_seq(self._require_open(), self._size, seq)
        except OSError as exc:
            raise StorageError(
                f"Session {self.session_id}: cannot read {self.log_path} ({exc}).",
                sessionId=self.session_id, path=str(self.log_path),
            ) from None  # fmt: skip

    def head_at(self, offset: int) -> tuple[int, str, str | None] | None:
        """(seq, kind, role or None) of the record at byte `offset` (`logindex.head_at`: its line's head,
        not parsed), None if none starts there. Raises StorageError."""
        try:
            return head_at(self._require_open(), offset)
        except OSError as exc:
            raise StorageError(
                f"Session {self.session_id}: cannot read {self.log_path} at byte {offset} ({exc}).",
                sessionId=self.session_id, path=str(self.log_path),
            ) from None  # fmt: skip

    def iter_records_back(self, start: int, end: int) -> Iterator[tuple[int, int, dict[str, Any]]]:
        """(byte offset, line length, decoded record) of each record in bytes [start, end), last first, read
        backwards (`logindex.iter_lines_back`); both bounds where records start. Raises StorageError."""
        fd = self._require_open()
        at = end
        try:
            for at, line in iter_lines_back(fd, start, end):
                yield at, len(line), decode_line(line)
        except (OSError, ValueError) as exc:
            raise StorageError(
                f"Session {self.session_id}: cannot read {self.log_path} before byte {at} ({exc}).",
                sessionId=self.session_id, path=str(self.log_path),
            ) from None  # fmt: skip

    def first_record(self) -> dict[str, Any] | None:
        """Record 1 (the `meta` record), or None for an empty log. Raises StorageError."""
        if self._first is None and self._size:
            self._first = self.record_at(0)
        return self._first

    def read_blob(self, ref: str) -> bytes:
        """The bytes of blob `ref`. Raises ValueError for a malformed ref, StorageError if unreadable."""
        return read_blob(self.data_dir, self.session_id, ref)

    # ---- writing -------------------------------------------------------------------------------------

    def append(self, kind: str, payload: Mapping[str, Any], *, fsync: bool = True) -> dict[str, Any]:
        """Append one record of `kind` (CONTRACTS.md §9): seq = last + 1, `at` = now; fsync unless told not to.

        Returns the record as written (`{"v", "seq", "at", "kind", **payload}`). Raises ValueError for an
        unknown kind or unencodable payload, StorageError (PROTOCOL.md §11 text) if the write fails; then
        the log is rolled back to its previous end and the store stays usable.
        """
        return self.append_many([(kind, payload)], fsync=fsync)[0]

    def append_many(
        self, items: Iterable[tuple[str, Mapping[str, Any]]], *, fsync: bool = True
    ) -> list[dict[str, Any]]:
        """Append several records with one write and one fsync (e.g. synthetic tool_results + the next prompt).

        Returns the records as written, in order. Errors as `append`.
        """
        at = format_at(self._clock())
        records: list[dict[str, Any]] = []
        lines: list[bytes] = []
        for i, (kind, payload) in enumerate(items, start=self._last_seq + 1):
            lines.append(encode_record(i, kind, payload, at))
            records.append({"v": LOG_VERSION, "seq": i, "at": at, "kind": kind, **payload})
        if records:
            offset = self._size + self._needs_newline
            self._write(b"".join(lines), fsync)
            self._last_seq = records[-1]["seq"]
            for rec, line in zip(records, lines, strict=True):
                self.tally.observe(rec, offset, len(line))
                if rec["kind"] == "compaction":
                    self._unindexed.append(self.tally.entry(rec["seq"], offset, line))
                offset += len(line)
            if fsync:
                self._index_durable()
        return records

    def _write(self, data: bytes, fsync: bool) -> None:
        fd = self._require_open()
        if self._broken:
            raise self._write_error(OSError(0, "an earlier write failed and could not be rolled back"))
        if self._needs_newline:
            data = b"\n" + data
        failpoints.hit("store.append.before")
        act = failpoints.action("store.append.mid")
        try:
            if act == "kill-mid-write":
                write_all(fd, data[: len(data) // 2])
                os.fsync(fd)
                failpoints.kill_now()
            elif act == "kill":
                failpoints.kill_now()
            elif act == "raise":
                raise failpoints.FailpointError("failpoint store.append.mid")
            write_all(fd, data)
            if fsync:
                os.fsync(fd)
        except OSError as exc:
            try:
                os.ftruncate(fd, self._size)
            except OSError:
                self._broken = (
                    True  # a partial line may remain: refuse appends until the next open repairs it
                )
            raise self._write_error(exc) from exc
        self._size += len(data)
        self._needs_newline = False
        failpoints.hit("store.append.after")

    def sync(self) -> None:
        """fsync the log (after appends made with `fsync=False`); safe from a worker thread. Raises
        StorageError."""
        with self._fd_lock:
            fd = self._require_open()
            pending = len(self._unindexed)
            try:
                os.fsync(fd)
            except OSError as exc:
                raise self._write_error(exc) from exc
            self._index_durable(pending)

    def _index_durable(self, upto: int | None = None) -> None:
        """Append the entries of the compaction records now durable (the first `upto` waiting) to `log.idx`,
        fsynced. The index is a cache: a failure is logged and the next open rebuilds it."""
        with self._index_lock:  # the loop thread's append and a worker's `sync` may both get here
            done = self._unindexed[: len(self._unindexed) if upto is None else upto]
            if not done:
                return
            del self._unindexed[: len(done)]
            self.entries.extend(done)
            append_entries(self.data_dir.index_path(self.session_id), done, self.session_id)

    def _rewrite_index(self) -> None:
        """Write `log.idx` afresh from `entries` after fsyncing the log, so no entry points at a record that is
        not durable (a failure is logged: the index is a cache)."""
        try:
            os.fsync(self._require_open())
        except OSError as exc:
            log.warning(
                "session %s: cannot fsync the log (%s); the index is left as it is", self.session_id, exc
            )
            return
        rewrite_entries(self.data_dir.index_path(self.session_id), self.entries, self.session_id)

    def write_blob(self, data: bytes) -> str:
        """Store `data` once as `blobs/<sha256>` (0600; temp file, fsync, rename) and return the sha256 hex ref.

        Writing the same bytes again is a no-op. Raises StorageError.
        """
        ref = hashlib.sha256(data).hexdigest()
        bdir = self.data_dir.blobs_dir(self.session_id)
        path = bdir / ref
        try:
            if not bdir.exists():
                ensure_dir(bdir)
                fsync_dir(bdir.parent)
            if not path.exists():
                atomic_write(path, data)
        except OSError as exc:
            raise self._write_error(exc, path) from exc
        return ref

    def update_meta(self, **fields: Any) -> dict[str, Any]:
        """Set fields of meta.json and rewrite it atomically (temp file, fsync, rename, folder fsync).

        Allowed fields: META_FIELDS except `id` and `logVersion`; `tokens` is replaced whole
        (`{input, output, cacheRead, cacheWrite}`). `updatedAt` defaults to now. Returns the new content.
        Raises TypeError for an unknown field, StorageError if the file cannot be written.
        """
        bad = sorted((set(fields) - set(META_FIELDS)) | (set(fields) & {"id", "logVersion"}))
        if bad:
            raise TypeError(f"update_meta: unknown or read-only fields: {', '.join(bad)}")
        self._require_open()
        fields.setdefault("updatedAt", format_at(self._clock()))
        new = {**self._meta, **fields}
        self._write_meta(new)
        self._meta = new
        return self.meta

    def _write_meta(self, meta: dict[str, Any] | None = None) -> None:
        path = self.data_dir.meta_path(self.session_id)
        data = json.dumps(self._meta if meta is None else meta, ensure_ascii=False, separators=(",", ":"))
        try:
            atomic_write(path, data.encode("utf-8") + b"\n", before_rename="meta.before_rename")
        except OSError as exc:
            raise self._write_error(exc, path) from exc

    # ---- closing -------------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._fd is None

    def close(self) -> None:
        """Close the log and release the session lock. Idempotent."""
        with self._fd_lock:
            fd, self._fd = self._fd, None
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        if fd is not None:
            self._lock.release()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _require_open(self) -> int:
        if self._fd is None:
            raise ValueError(f"the store of session {self.session_id} is closed")
        return self._fd

    def _write_error(self, exc: OSError, path: Path | None = None) -> StorageError:
        return StorageError(
            _WRITE_FAILED,
            sessionId=self.session_id,
            path=str(path or self.log_path),
            reason=exc.strerror or str(exc),
        )


def _abandon(store: SessionStore | None, lock: SessionLock) -> None:
    if store is not None:
        store.close()
    else:
        lock.release()


def _utcnow() -> datetime:
    return datetime.now(UTC)
