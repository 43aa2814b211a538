"""The session's one writer of its log (CONTRACTS.md §9): typed records in, JSONL lines out.

Owns: `Journal`, held by the Session: the only code that appends to `sessions/<id>/log.jsonl` (through
`SessionStore`, which owns the bytes, fsync, rollback, torn-line repair and the lock). It turns the typed
records of `agentd.persistence.records` into appends with the fsync policy of §9 (after each model response,
each tool result, and before a tool runs), moves large texts to blobs (tool_result texts, diff texts and
whole tool outputs of `store.blob_min_bytes` or more, case C07), refreshes meta.json, and remembers when the
last todos snapshot was written (`agentd/session/todos` `updatedAt`).
Must not import pygls, lsprotocol, acp or adapters.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from ulid import ULID

from agentd.persistence.paths import DataDir
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

    # ---- appending ---------------------------------------------------------------------------------
    def write(self, *records: Record, fsync: bool = True) -> list[dict[str, Any]]:
        """Append `records` with one write (and one fsync unless `fsync=False`); returns them as written
        (`{"v", "seq", "at", "kind", ...payload}`). Raises StorageError (the log is rolled back)."""
        written = self._store.append_many(((r.kind, r.payload()) for r in records), fsync=fsync)
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
        """fsync the log (after appends made with `fsync=False`). Raises StorageError."""
        self._store.sync()

    def update_meta(self, **fields: Any) -> dict[str, Any]:
        """Rewrite meta.json with `fields` changed (temp file, fsync, rename). Raises StorageError."""
        return self._store.update_meta(**fields)

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
