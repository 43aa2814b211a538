"""Listing and deleting sessions (CONTRACTS.md §9, PROTOCOL.md §3.1 `sessions list|rm`, §6.3).

Owns: the meta.json shape (`META_FIELDS`, `initial_meta`, `read_meta`), `list_sessions`, `newest_session`
(for `agentd run --continue`), `delete_session` and the SessionNotFound text. Listing reads
only each session's `meta.json` plus its lock record (never a log, never taking a lock); there is no
shared index file. Must not import pygls, lsprotocol, acp or agentd.adapters.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentd.errors import SessionNotFound
from agentd.persistence.lock import SessionLock, holder
from agentd.persistence.paths import DataDir, as_data_dir, fsync_dir, is_valid_session_id
from agentd.persistence.records import LOG_VERSION

log = logging.getLogger(__name__)

# The fields of meta.json, in file order (CONTRACTS.md §9).
META_FIELDS = (
    "id", "cwd", "title", "model", "provider", "createdAt", "updatedAt", "turns", "tokens", "logVersion",
)  # fmt: skip


def initial_meta(session_id: str, meta: Mapping[str, Any], at: str) -> dict[str, Any]:
    """meta.json of a new session: cwd, title, model, provider from `meta`; created/updated `at`; zero totals."""
    return {
        "id": session_id,
        "cwd": meta.get("cwd"),
        "title": meta.get("title"),
        "model": meta.get("model"),
        "provider": meta.get("provider"),
        "createdAt": at,
        "updatedAt": at,
        "turns": 0,
        "tokens": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        "logVersion": LOG_VERSION,
    }


def session_not_found(data_dir: DataDir, session_id: str) -> SessionNotFound:
    """SessionNotFound for `session_id`; the message points to `agentd sessions list` (PROTOCOL.md §3.1)."""
    return SessionNotFound(
        f"Session {session_id} is not in the data dir ({data_dir.root}); "
        "run agentd sessions list to see sessions, or start a new session.",
        sessionId=session_id,
    )


def read_meta(data_dir: DataDir | str | os.PathLike[str], session_id: str) -> dict[str, Any] | None:
    """The parsed `meta.json` of a session, or None if it is absent or not a JSON object."""
    dd = as_data_dir(data_dir)
    if not is_valid_session_id(session_id):
        return None
    try:
        meta = json.loads(dd.meta_path(session_id).read_bytes())
    except (OSError, ValueError) as exc:
        log.debug("session %s: no readable meta.json (%s)", session_id, exc)
        return None
    return meta if isinstance(meta, dict) else None


def _meta_from_log(dd: DataDir, session_id: str) -> dict[str, Any] | None:
    """What `list` shows of a session without a readable meta.json: its log's first record (the `meta`
    record, one line), read only; None when that is not there either."""
    if not is_valid_session_id(session_id):
        return None
    path = dd.log_path(session_id)
    try:
        with path.open("rb") as f:
            first = json.loads(f.readline(1 << 20))
        mtime = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    except (OSError, ValueError):
        return None
    if not isinstance(first, dict) or first.get("kind") != "meta":
        return None
    meta = initial_meta(session_id, first, str(first.get("at") or ""))
    meta["updatedAt"] = mtime.strftime("%Y-%m-%dT%H:%M:%SZ")
    meta["metaRebuilt"] = True
    return meta


def _same_dir(a: object, b: str) -> bool:
    return isinstance(a, str) and os.path.realpath(a) == b


def list_sessions(
    data_dir: DataDir | str | os.PathLike[str], workspace: Path | str | None = None
) -> list[dict[str, Any]]:
    """Every session with a readable meta.json, newest first by `updatedAt` (ties: newest id first).

    Each item is the meta.json object (id, cwd, title, model, provider, createdAt, updatedAt, turns,
    tokens, logVersion) plus `lockedBy`: `{pid, hostname, since}` of a live holder, else None.
    With `workspace`, only sessions whose stored `cwd` is the same folder (compared as real paths).
    A session whose meta.json is missing or damaged but whose log starts with its `meta` record is listed
    from that record (`metaRebuilt: true`; totals 0, `updatedAt` the log's mtime), as the next write to it
    rebuilds meta.json: it is not hidden from `list` and `--continue` (break9, H12 class). Others are
    skipped.
    """
    dd = as_data_dir(data_dir)
    want = os.path.realpath(workspace) if workspace is not None else None
    try:
        entries = sorted(os.scandir(dd.sessions_dir), key=lambda e: e.name)
    except FileNotFoundError:
        return []
    out: list[dict[str, Any]] = []
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        meta = read_meta(dd, entry.name) or _meta_from_log(dd, entry.name)
        if meta is None or (want is not None and not _same_dir(meta.get("cwd"), want)):
            continue
        meta["lockedBy"] = holder(dd.lock_path(entry.name))
        out.append(meta)
    out.sort(key=lambda m: (str(m.get("updatedAt") or ""), str(m.get("id") or "")), reverse=True)
    return out


def newest_session(data_dir: DataDir | str | os.PathLike[str], workspace: Path | str | None) -> str | None:
    """The id of the most recently updated session of `workspace` (any workspace if None), or None."""
    sessions = list_sessions(data_dir, workspace)
    return str(sessions[0]["id"]) if sessions else None


def delete_session(data_dir: DataDir | str | os.PathLike[str], session_id: str) -> None:
    """Delete `sessions/<id>/` and everything in it (`agentd sessions rm`).

    Takes the session lock first, so a session open anywhere is refused. Raises SessionNotFound,
    SessionLocked (PROTOCOL.md §11; `sameProcess: true` if this process holds it), OSError.
    """
    dd = as_data_dir(data_dir)
    if not is_valid_session_id(session_id) or not dd.session_dir(session_id).is_dir():
        raise session_not_found(dd, session_id)
    try:
        lock = SessionLock.acquire(dd.lock_path(session_id), session_id=session_id)
    except FileNotFoundError:
        raise session_not_found(dd, session_id) from None
    try:
        shutil.rmtree(dd.session_dir(session_id))
        fsync_dir(dd.sessions_dir)
    finally:
        lock.release()
