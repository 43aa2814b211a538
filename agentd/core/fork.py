"""Fork a session: a new session whose history is a copy of another's up to a checkpoint (issue 13).

Owns: `fork_session(data_dir, source_id, at)` (the `agentd/session/fork` result). The source is read without
its lock (it may be open in another process, mid-turn or not), so both sessions go on independently. The
fork gets, under a new id, with its own log, lock, plan and audit log:
- a `meta` record naming the same workspace, provider, model and stored project instructions, plus
  `forkedFrom` {sessionId, at, seq};
- the records of the source's branch that ends at the checkpoint `at` (default: the active branch to its end):
  prompts, messages, tool calls, plan snapshots, compactions, instruction reloads and checkpoints, with the
  same payloads, so the fork's first request repeats the source's prefix byte for byte (a cache hit); `usage`
  records come along marked `inherited` (they set the known context size, not the fork's token totals);
- the source's permission grants and mode, signed again for the fork (agentd.permissions.signing binds a
  record to its session), only those the source honours;
- the audit records of every tool call it copies, chained anew in its own audit log (`forkedFrom` names
  the source), so `agentd audit verify` holds for the fork;
- hard links to the source's blobs and checkpoint packs (a copy where links fail): the fork can rewind to
  checkpoints from before the fork.
Order on disk: the new folder with only its meta record, then blobs, packs and the audit log, then all
copied records in one write: a kill before that write leaves an empty session, never a log whose tool calls
lack their audit records. Must not import pygls, lsprotocol, acp or adapters.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentd.audit import AuditLog
from agentd.checkpoints.objects import ObjectStore
from agentd.core.checkpoints import CHECKPOINTS_DIR, CheckpointError
from agentd.core.journal import Journal
from agentd.core.rewind import CONVERSATION_TARGETS, find_checkpoint
from agentd.permissions.signing import RecordSigner
from agentd.persistence.branches import BRANCH_KINDS, active_seqs, branch_seqs
from agentd.persistence.paths import DataDir, ensure_dir, fsync_dir, new_session_id
from agentd.persistence.records import GrantRecord, ModeRecord, Record, TitleRecord, parse_record
from agentd.persistence.store import SessionStore, read_records

COPIED = BRANCH_KINDS | {"checkpoint"}


def fork_session(
    data_dir: DataDir, source_id: str, at: int | str | None, *, signer: RecordSigner, blob_min_bytes: int
) -> dict[str, Any]:
    """Create the fork (module docstring); returns `{sessionId, forkedFrom, at, title, messages}`. `signer`:
    a RecordSigner with the user's grant key (any session's). Raises SessionNotFound, CheckpointError,
    StorageError."""
    records, _warnings = read_records(data_dir, source_id)
    if at is None:
        chain, cut = active_seqs(records), None
    else:
        target = find_checkpoint(records, at)
        if target.get("before") not in CONVERSATION_TARGETS:
            raise CheckpointError(
                f"checkpoint {target.get('id')} is in the middle of a turn; fork at a prompt (e.g. "
                f"{target.get('prompt')}) or at the end"
            )
        chain, cut = branch_seqs(records, int(target["seq"])), target
    meta = _meta(records, source_id, cut)
    copied = [r for r in records if r.get("kind") in COPIED and r.get("seq") in chain]
    new_id = new_session_id()
    store = SessionStore.create(data_dir, new_id, meta)
    try:
        _link_files(data_dir, source_id, new_id)
        _copy_audit(data_dir, source_id, new_id, copied)
        journal = Journal(store, blob_min_bytes)
        title = _title(records)
        typed = [_typed(r) for r in copied]
        typed += _permissions(records, signer.for_session(source_id), signer.for_session(new_id))
        if title:
            typed.append(TitleRecord(title=title))
        journal.write(*typed)
        prompts = sum(1 for r in copied if r.get("kind") == "prompt")
        journal.update_meta(title=title, turns=prompts)
    finally:
        store.close()
    return {
        "sessionId": new_id,
        "forkedFrom": source_id,
        "at": str(cut["id"]) if cut else None,
        "title": title,
        "messages": sum(1 for r in copied if r.get("kind") == "message"),
    }


def _meta(records: list[dict[str, Any]], source_id: str, cut: Mapping[str, Any] | None) -> dict[str, Any]:
    first = records[0] if records and records[0].get("kind") == "meta" else {}
    keep = ("cwd", "provider", "model", "directories", "instructions")
    meta: dict[str, Any] = {k: first[k] for k in keep if k in first}
    meta["forkedFrom"] = {"sessionId": source_id, "at": str(cut["id"]) if cut else None,
                          "seq": int(cut["seq"]) if cut else int(records[-1].get("seq") or 0)}  # fmt: skip
    return meta


def _title(records: list[dict[str, Any]]) -> str | None:
    title = None
    for r in records:
        if r.get("kind") == "title":
            title = r.get("title")
    return f"{title} (fork)" if title else None


def _typed(rec: dict[str, Any]) -> Record:
    model = parse_record(rec)
    assert model is not None, rec.get("kind")
    if rec.get("kind") == "usage":
        model.inherited = True  # type: ignore[attr-defined]
    return model


def _permissions(records: list[dict[str, Any]], check: RecordSigner, sign: RecordSigner) -> list[Record]:
    """The grants and mode the source honours (`check`: its signatures hold, in order), signed by `sign`."""
    out: list[Record] = []
    for r in records:
        kind = r.get("kind")
        if kind not in ("grant", "mode") or not check.accept(kind, r):
            continue
        model = parse_record(r)
        assert model is not None
        payload = {k: v for k, v in model.payload().items() if k not in ("n", "mac")}
        out.append((GrantRecord if kind == "grant" else ModeRecord)(**sign.sign(kind, payload)))
    return out


def _link_files(data_dir: DataDir, source_id: str, new_id: str) -> None:
    """Hard links to the source's blobs and checkpoint packs (immutable once written)."""
    src_blobs, dst_blobs = data_dir.blobs_dir(source_id), data_dir.blobs_dir(new_id)
    if src_blobs.is_dir():
        ensure_dir(dst_blobs)
        for blob in src_blobs.iterdir():
            if blob.suffix != ".tmp":
                _link(blob, dst_blobs / blob.name)
        fsync_dir(dst_blobs)
    src = ObjectStore(data_dir.session_dir(source_id) / CHECKPOINTS_DIR)
    src.link_into(ObjectStore(data_dir.session_dir(new_id) / CHECKPOINTS_DIR))


def _link(src: Path, dst: Path) -> None:
    with contextlib.suppress(FileExistsError):
        try:
            os.link(src, dst)
        except OSError:
            shutil.copyfile(src, dst)
            os.chmod(dst, 0o600)


def _copy_audit(data_dir: DataDir, source_id: str, new_id: str, copied: list[dict[str, Any]]) -> None:
    """The source's audit records of the copied tool calls, appended to the fork's own chain."""
    ids = {
        str(b.get("id"))
        for r in copied if r.get("kind") == "message"
        for b in (r.get("message") or {}).get("content") or [] if isinstance(b, dict) and b.get("type") == "tool_use"
    }  # fmt: skip
    entries = [
        e for e in AuditLog(data_dir.audit_path(source_id)).records() if str(e.get("toolUseId")) in ids
    ]
    if entries:
        AuditLog(data_dir.audit_path(new_id)).copy(entries, new_id, forked_from=source_id)
