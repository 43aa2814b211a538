"""Rewind a session to one of its checkpoints: the files, the conversation, or both (issue 13; docs/checkpoints.md).

Owns: `rewind(session, to, ...)` (the `agentd/session/rewind` result), `find_checkpoint()` (a target by id or
prompt number), `listing()` (the `agentd/session/checkpoints` result, from the log alone, so the read-only
CLI view uses it too) and `recover()` (finishing a rewind a crash interrupted, when the session opens).

A rewind, in order: a checkpoint of the workspace as it is now (`rK`, so the rewind can be undone); the
files the user changed after the target (agentd.core.checkpoints) are kept unless `overwrite` names them;
the plan is written to the intent file; the files are restored; a checkpoint of the result (`rK.end`);
the `rewind` record (`toSeq` moves the conversation back when `conversation`, agentd.persistence.branches);
the intent file is removed; the conversation, the plan and the reminder counter are rebuilt as replay
would rebuild them at that point. A kill anywhere before the intent file exists leaves the files as they
were; after it, the next open runs the plan again and writes the record (`recover`). Failpoint:
`rewind.recorded`. Must not import pygls, lsprotocol, acp or adapters.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentd import failpoints
from agentd.checkpoints import restore
from agentd.core.checkpoints import CheckpointError, FilesPlan
from agentd.core.replay import preview_branch
from agentd.errors import UsageError
from agentd.persistence.branches import active_seqs
from agentd.persistence.records import RewindRecord

if TYPE_CHECKING:
    from agentd.core.session import Session

log = logging.getLogger("agentd.rewind")

CONVERSATION_TARGETS = ("prompt", "turn_end", "rewind")


def target_id(to: int | str) -> str:
    """`3` and `"3"` name the checkpoint before prompt 3; other ids are used as given."""
    return str(to).strip()


def find_checkpoint(records: Iterable[Mapping[str, Any]], to: int | str) -> dict[str, Any]:
    """The checkpoint record named `to` (the last one of that id). Raises CheckpointError naming the ids."""
    want = target_id(to)
    found: dict[str, Any] | None = None
    ids: list[str] = []
    for rec in records:
        if rec.get("kind") == "checkpoint":
            ids.append(str(rec.get("id")))
            if str(rec.get("id")) == want:
                found = dict(rec)
    if found is None:
        known = ", ".join(i for i in ids if "." not in i) or "none yet"
        raise CheckpointError(
            f"no checkpoint {want!r} in this session (before prompts: {known}); list them with "
            "agentd sessions checkpoints ID"
        )
    return found


def listing(records: Sequence[Mapping[str, Any]], pending: bool) -> dict[str, Any]:
    """The `agentd/session/checkpoints` result (PROTOCOL.md §6.12) from a session's records. `active`: for a
    prompt's checkpoint, that prompt is in the conversation now; for the others, the checkpoint is on the
    conversation's branch."""
    active = active_seqs(records)
    shown = _prompts_in(records, active)
    checkpoints = []
    for rec in records:
        if rec.get("kind") != "checkpoint":
            continue
        on = rec.get("messageId") in shown if rec.get("before") == "prompt" else rec.get("seq") in active
        item: dict[str, Any] = {
            "id": rec.get("id"), "before": rec.get("before"), "prompt": rec.get("prompt", 0), "at": rec.get("at"),
            "active": on,
        }  # fmt: skip
        for key in ("messageId", "text", "toolCallId", "files", "bytes", "error"):
            if rec.get(key) is not None:
                item[key] = rec[key]
        item["changed"] = rec.get("changedTotal") or len(rec.get("changed") or [])
        item["notCovered"] = rec.get("notCovered") or 0
        checkpoints.append(item)
    rewinds = [
        {"id": r.get("id"), "at": r.get("at"), "to": r.get("to"), "files": bool(r.get("files")),
         "conversation": bool(r.get("conversation")), "before": r.get("before")}
        for r in records if r.get("kind") == "rewind"
    ]  # fmt: skip
    return {"checkpoints": checkpoints, "rewinds": rewinds, "pendingRewind": pending}


def _check_target(target: Mapping[str, Any], files: bool, conversation: bool) -> None:
    cid = target.get("id")
    if conversation and target.get("before") not in CONVERSATION_TARGETS:
        raise CheckpointError(
            f"checkpoint {cid} is in the middle of a turn (before a command): the conversation can only go "
            f"back to before a prompt; rewind the files only (--files-only), or the conversation to "
            f"{target.get('prompt')}"
        )
    if files and target.get("roots") is None:
        why = target.get("error") or "checkpoints were off (checkpoints.enabled = false)"
        raise CheckpointError(
            f"checkpoint {cid} holds no files ({why}); rewind the conversation only (--conversation-only)"
        )


def _prompts_in(records: Sequence[Mapping[str, Any]], active: set[int]) -> set[Any]:
    """The messageIds of the prompts in the conversation now (their `prompt` record is on the active branch;
    a prompt's checkpoint record can be on it while the prompt is not: a rewind to it keeps it)."""
    return {r.get("messageId") for r in records if r.get("kind") == "prompt" and r.get("seq") in active}


def _abandoned(records: Sequence[Mapping[str, Any]], target_seq: int) -> list[int]:
    """Prompt numbers in the conversation now from the target on: the turns a conversation rewind abandons
    (not those an earlier rewind abandoned already)."""
    shown = _prompts_in(records, active_seqs(records))
    return [
        int(r.get("prompt") or 0)
        for r in records
        if r.get("kind") == "checkpoint" and r.get("before") == "prompt"
        and int(r.get("seq") or 0) >= target_seq and r.get("messageId") in shown
    ]  # fmt: skip


def _would_write(records: Sequence[Mapping[str, Any]], target: Mapping[str, Any]) -> dict[str, Any]:
    """The `rewind` record a conversation rewind to `target` would append (a dry run writes none)."""
    last = max((int(r.get("seq") or 0) for r in records), default=0)
    return {"kind": "rewind", "seq": last + 1, "id": "dry-run", "to": str(target["id"]),
            "toSeq": int(target["seq"]), "files": False, "conversation": True}  # fmt: skip


def _files_result(plan: FilesPlan) -> dict[str, Any]:
    restored = sorted(set(plan.shown("write", "symlink", "mkdir", "chmod")))
    return {
        "restored": restored,
        "removed": plan.shown("unlink", "rmdir"),
        "kept": [{"path": p, "reason": why} for p, why in plan.kept],
    }


async def rewind(
    s: Session,
    to: int | str,
    *,
    files: bool = True,
    conversation: bool = True,
    overwrite: bool | list[str] = False,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Rewind `s` (module docstring); returns the `agentd/session/rewind` result (PROTOCOL.md §6.13).
    Raises UsageError (nothing to rewind), CheckpointError (no such checkpoint, or it cannot serve), the
    session's busy error, OSError (the files; the next open finishes), StorageError."""
    if not files and not conversation:
        raise UsageError("Nothing to rewind: choose the files, the conversation, or both.")
    records = s.journal.all_records()
    target = find_checkpoint(records, to)
    _check_target(target, files, conversation)
    ck = s.checkpointer
    result: dict[str, Any] = {"to": target["id"], "done": not dry_run}
    plan = FilesPlan()
    now: dict[str, Any] | None = None
    if files:
        now = await (ck.peek() if dry_run else ck.take("rewind"))
        if now is None or now.get("roots") is None:
            raise CheckpointError(
                f"the workspace could not be read before the rewind: {(now or {}).get('error')}"
            )
        user = ck.user_changes(records, int(target["seq"]), now)
        keep = set() if overwrite is True else user - set(overwrite or [])
        plan = ck.files_plan(target, now, keep)
        result["files"] = _files_result(plan)
        if not dry_run:
            result["checkpoint"] = now.get("id")  # a dry run takes none: there is nothing to undo
    if conversation:
        result["conversation"] = {"messagesBefore": len(s.context), "messagesAfter": None,
                                  "abandonedPrompts": _abandoned(records, int(target["seq"]))}  # fmt: skip
    if dry_run:
        if conversation:
            result["conversation"]["messagesAfter"] = preview_branch(
                s, [*records, _would_write(records, target)]
            )
        return result
    rid = str(now["id"]) if now is not None else ck.next_id("rewind")[0]
    record = RewindRecord(id=rid, to=str(target["id"]), to_seq=int(target["seq"]), files=files,
                          conversation=conversation)  # fmt: skip
    if now is not None:
        record.before = rid
        record.kept = [[p, why] for p, why in plan.kept]
        restore.write_intent(
            ck.store.root, {"record": record.payload(), "plans": restore.plans_to_json(plan.plans)}
        )
        await asyncio.to_thread(ck.apply, plan, lambda p, why: plan.kept.append((p, why)))
        await ck.take("turn_end", cid=f"{rid}.end")
        record.kept = [[p, why] for p, why in plan.kept]
        result["files"] = _files_result(plan)
    s.journal.write(record)
    ck.observe(record.payload() | {"kind": "rewind"})
    failpoints.hit("rewind.recorded")
    restore.clear_intent(ck.store.root)
    if conversation:
        s.rebuild_branch()
        result["conversation"]["messagesAfter"] = len(s.context)
    s.lines(f"[rewind {rid}] to checkpoint {target['id']}" + (" (files" if files else " (")
            + (" and conversation)" if files and conversation else "conversation)" if conversation else ")"))  # fmt: skip
    return result


def recover(s: Session, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Finish a rewind a crash interrupted (its intent file exists): run its plan again, then write its record
    unless the log has it (`records`: the log's `rewind` records at least). Returns the records written (the
    replay that follows reads them from the log). Called when the session opens,
    before replay. Raises OSError, StorageError (the session then does not open; the intent file stays)."""
    ck = s.checkpointer
    intent = restore.read_intent(ck.store.root)
    if intent is None:
        return []
    payload = dict(intent.get("record") or {})
    rid = str(payload.get("id"))
    plans = restore.plans_from_json(intent.get("plans") or [])
    ws = s.toolbox.ctx.workspace
    for p in plans:
        root = p.root
        restore.apply(p, lambda: ws.open_root(root), ck.store, lambda *_: None)  # noqa: B023 - used at once
    written: list[dict[str, Any]] = []
    if not any(r.get("kind") == "rewind" and str(r.get("id")) == rid for r in records):
        written = s.journal.write(RewindRecord.model_validate(payload))
    restore.clear_intent(ck.store.root)
    s.lines(f"[rewind {rid}] an interrupted rewind to checkpoint {payload.get('to')} was finished")
    log.warning("session %s: finished the interrupted rewind %s", s.id, rid)
    return written
