"""The session's one writer of its log (CONTRACTS.md §9): typed records in, JSONL lines out.

Owns: `Journal`, held by the Session: the only code that appends to `sessions/<id>/log.jsonl` (through
`SessionStore`, which owns the bytes, fsync, rollback, torn-line repair and the lock). It turns the typed
records of `agentd.persistence.records` into appends with the fsync policy of §9 (after each model response,
each tool result, and before a tool runs), moves large texts to blobs (tool_result texts, diff texts and
whole tool outputs of `store.blob_min_bytes` or more, case C07), refreshes meta.json, and remembers when the
last todos snapshot was written (`agentd/session/todos` `updatedAt`).

fsync off the event loop (issue 16): while `defer_fsync` is set (the Session sets it for a turn, the hot
path) and a loop runs, `write(fsync=True)` writes the bytes at once (in order, rolled back on error) and
leaves the fsync to `await durable()`, which runs one fsync in a worker
thread for every write made so far (group commit: one fsync covers all the sessions' writes queued behind
it). Whoever acts on durability awaits it: the Session before it sends an update (its outbox) and before a
turn's answer, the loop before a tool runs. Otherwise (between turns, the CLI's readers) `write` fsyncs at
once. An fsync that fails makes the next `write` raise the StorageError.
Must not import pygls, lsprotocol, acp or adapters.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

from ulid import ULID

from agentd.errors import StorageError
from agentd.persistence.paths import DataDir, off_loop
from agentd.persistence.records import MessageRecord, Record, TodosRecord
from agentd.persistence.store import SessionStore, read_records


def new_message_id() -> str:
    """A time-sortable id for a message (`msg_<ulid>`), stable across replay: it is stored in the log."""
    return "msg_" + str(ULID()).lower()


class Journal:
    """Appends typed records to one session's log. `blob_min_bytes`: texts of at least this many UTF-8
    bytes go to `blobs/<sha256>` and the record holds the reference (`store.blob_min_bytes`)."""

    def __init__(self, store: SessionStore, blob_min_bytes: int) -> None:
        self._store = store
        self.blob_min_bytes = blob_min_bytes
        self.todos_at: str | None = None  # `at` of the last todos record (written or replayed)
        self._written = 0  # writes made that wanted an fsync (a counter)
        self._synced = 0  # of those, how many an fsync has covered
        self._sync_lock: asyncio.Lock | None = None
        self._failed: StorageError | None = None  # a deferred fsync failed: the next write raises it
        self.defer_fsync = False  # set by the Session while a turn runs

    # ---- appending ---------------------------------------------------------------------------------
    def write(self, *records: Record, fsync: bool = True) -> list[dict[str, Any]]:
        """Append `records` with one write (and one fsync unless `fsync=False`); returns them as written
        (`{"v", "seq", "at", "kind", ...payload}`). Inside a running event loop the fsync is deferred to
        `durable()` (module docstring). Raises StorageError (the log is rolled back)."""
        if self._failed is not None:
            raise self._failed
        defer = fsync and self.defer_fsync and _loop_running()
        written = self._store.append_many(((r.kind, r.payload()) for r in records), fsync=fsync and not defer)
        if defer:
            self._written += 1
        for rec in written:
            if rec["kind"] == TodosRecord.kind:
                self.todos_at = rec["at"]
        return written

    def message(
        self, message: dict[str, Any], message_id: str, *, cut: dict[str, str] | None = None
    ) -> MessageRecord:
        """The `message` record of an API message as sent (not yet written): tool_result texts of
        `blob_min_bytes` or more go to blobs (`blobs`: block index -> ref); `cut` as in MessageRecord."""
        msg = copy.deepcopy(message)
        blobs: dict[str, str] = {}
        for j, block in enumerate(msg.get("content", [])):
            content = block.get("content") if block.get("type") == "tool_result" else None
            if isinstance(content, str) and self._large(content):
                blobs[str(j)] = self.blob(content.encode("utf-8"))
                block["content"] = ""
        record = MessageRecord(message_id=message_id, message=msg)
        if blobs:
            record.blobs = blobs
        if cut:
            record.cut = cut
        return record

    def diff(self, diff: dict[str, Any] | None) -> dict[str, Any] | None:
        """A diff as logged: texts of `blob_min_bytes` or more become `oldTextBlob` / `newTextBlob` refs, so
        one edit of a huge file does not put megabytes in the log (case C07)."""
        if not diff:
            return diff
        out = dict(diff)
        for key in ("oldText", "newText"):
            text = out.get(key)
            if isinstance(text, str) and self._large(text):
                out[key + "Blob"] = self.blob(text.encode("utf-8"))
                del out[key]
        return out

    def large_output(self, text: str) -> str | None:
        """The blob ref of a whole tool output of `blob_min_bytes` or more (case C07), else None."""
        return self.blob(text.encode("utf-8")) if self._large(text) else None

    def _large(self, text: str) -> bool:
        return len(text.encode("utf-8")) >= self.blob_min_bytes

    def blob(self, data: bytes) -> str:
        """Store `data` once as a blob; returns its sha256 ref. Raises StorageError."""
        return self._store.write_blob(data)

    def sync(self) -> None:
        """fsync the log now, on the calling thread (after appends made with `fsync=False`; at close).
        Raises StorageError."""
        upto = self._written
        self._store.sync()
        self._synced = max(self._synced, upto)

    @property
    def pending(self) -> bool:
        """Whether a write is waiting for its deferred fsync."""
        return self._synced < self._written

    async def durable(self) -> None:
        """Return once every write made before the call is fsynced: one fsync in a worker thread covers all
        writes made until it starts; concurrent callers share it. Raises StorageError (and every later
        write raises it too)."""
        target = self._written
        if self._synced >= target:
            return
        if self._sync_lock is None:
            self._sync_lock = asyncio.Lock()
        async with self._sync_lock:
            if self._synced >= target or self._store.closed:  # closing fsyncs on its own
                return
            if self._failed is not None:
                raise self._failed
            upto = self._written
            try:
                await off_loop(self._store.sync)
            except ValueError:  # closed meanwhile: `Session.close` fsynced
                return
            except StorageError as exc:
                self._failed = exc
                raise
            self._synced = max(self._synced, upto)

    def update_meta(self, **fields: Any) -> dict[str, Any]:
        """Rewrite meta.json with `fields` changed (temp file, fsync, rename). Raises StorageError."""
        return self._store.update_meta(**fields)

    async def save_meta(self, **fields: Any) -> dict[str, Any]:
        """`update_meta` in a durability thread (`off_loop`), so its fsyncs never block the event loop.
        meta.json is a summary of the log, never what an update waits for. Raises StorageError."""
        return await off_loop(self._store.update_meta, **fields)

    # ---- reading -----------------------------------------------------------------------------------
    @property
    def store(self) -> SessionStore:
        """The SessionStore underneath (its paths, meta, records); only the journal appends to it."""
        return self._store

    @property
    def meta(self) -> dict[str, Any]:
        """A copy of meta.json as last written."""
        return self._store.meta

    def opened_records(self) -> list[dict[str, Any]]:
        """The records read when the session was opened, in log order (unknown kinds included)."""
        return self._store.records()

    def all_records(self) -> list[dict[str, Any]]:
        """Every record on disk now (the ones appended since opening included), read without changing a
        byte; a torn last line is skipped. Raises StorageError."""
        return read_records(self._store.data_dir, self._store.session_id)[0]

    @property
    def data_dir(self) -> DataDir:
        """The data dir the session lives in."""
        return self._store.data_dir

    def read_blob(self, ref: str) -> bytes:
        return self._store.read_blob(ref)

    @property
    def blob_reader(self) -> Callable[[str], bytes]:
        return self._store.read_blob

    # ---- closing -----------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._store.closed

    def close(self) -> None:
        """Close the log and release the session lock (`Session.close` fsyncs first). Idempotent."""
        self._store.close()


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
