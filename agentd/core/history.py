"""The `session/load` replay as session updates (PROTOCOL.md §6.2), for every adapter (issue 10 Part 1).

Owns: `replay_updates(session, records)`: from the session log, in this order, a `session_info_update`
(stored title and `updatedAt`) and a `current_mode_update` when the mode is not `default`; the conversation
in log order (a `checkpoint` per checkpoint on the active branch, `user_message_chunk` per stored prompt block, `agent_thought_chunk` / `agent_message_chunk` per
stored assistant block with the original `messageId`, one `tool_call` per tool use carrying its final state,
a `plan` at each successful `todo_write`); then the closing `plan` (if the session ever had todos) and a
`usage_update` (the context estimate). A tool use without a final record (the previous process stopped or
the turn was cancelled before it finished) is replayed `failed` with `_meta.agentd.interrupted: true`.
Built with the builders of a live turn (agentd.protocol.updates, agentd.core.events), so a replayed
session shows what its live turns showed. Reads only; writes nothing. Must not import pygls, lsprotocol, acp
or adapters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentd.core import events
from agentd.persistence import records as r
from agentd.persistence.branches import active_seqs, on_branch
from agentd.protocol import updates

if TYPE_CHECKING:
    from agentd.core.session import Session

Block = dict[str, Any]


def replay_updates(session: Session, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every replay update of §6.2, in order (see the module docstring). `records`: the whole log, decoded;
    only the active branch is replayed (issue 13: what a conversation rewind left behind is not shown)."""
    active = active_seqs(records)
    typed = [(rec, m) for rec in records if on_branch(rec, active) and (m := r.parse_record(rec)) is not None]
    meta = session.journal.meta
    out = [updates.session_info_update(meta.get("title"), meta.get("updatedAt"))]
    if session.mode != "default":
        out.append(updates.current_mode_update(session.mode))
    finals = {m.tool_call_id: m for _, m in typed if isinstance(m, r.ToolCallRecord)}
    results = _result_texts(session, typed)
    had_todos = False
    for rec, m in typed:
        if isinstance(m, r.CheckpointRecord) and rec.get("seq") in active:
            out.append(events.checkpoint(rec))
        elif isinstance(m, r.PromptRecord):
            out += [updates.user_message_chunk(m.message_id, _prompt_content(b)) for b in m.content]
        elif isinstance(m, r.MessageRecord) and m.message.get("role") == "assistant":
            out += _assistant(session, m, finals, results)
        elif isinstance(m, r.TodosRecord):
            had_todos = True
            out.append(events.stored_plan(m.todos))
    if had_todos:
        out.append(events.plan(session.tracker))
    used = session.context.estimated_tokens()
    out.append(events.context_usage(used, session.totals, session.window_tokens, session.model))
    return out


def _prompt_content(block: Block) -> Block:
    """A stored prompt block as a ContentBlock: text as is, an image as `{type, data, mimeType}`, anything
    else as a `[type]` placeholder text."""
    if block.get("type") == "text":
        return block
    if block.get("type") == "image":
        src = block.get("source") or {}
        return {"type": "image", "data": src.get("data", ""), "mimeType": src.get("media_type", "")}
    return {"type": "text", "text": f"[{block.get('type')}]"}


def _assistant(
    session: Session, m: r.MessageRecord, finals: dict[str, r.ToolCallRecord], results: dict[str, str]
) -> list[dict[str, Any]]:
    out = []
    for block in m.message.get("content", []):
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            out.append(updates.agent_message_chunk(m.message_id, block["text"]))
        elif kind == "thinking" and block.get("thinking"):
            out.append(updates.agent_thought_chunk(m.message_id, block["thinking"]))
        elif kind == "tool_use":
            tid = str(block.get("id"))
            final = finals.get(tid)
            result = results.get(tid)
            out.append(
                _final(session, block, final, result) if final else _interrupted(session, block, result)
            )
    return out


def _final(session: Session, block: Block, final: r.ToolCallRecord, result: str | None) -> dict[str, Any]:
    """The tool call in its final state, as its terminal update left it (decidedBy only: the rest of the
    live `_meta` describes that moment, not the call)."""
    return updates.tool_call(
        str(block.get("id", "")), final.title or str(block.get("name")), final.tool_kind or "other",
        final.raw_input if "raw_input" in final.model_fields_set else block.get("input"), final.status,
        content=updates.tool_content(_diff(session, final.diff), result), rawOutput=final.raw_output,
        locations=final.locations, meta={"decidedBy": final.decided_by} if final.decided_by else None,
    )  # fmt: skip


def _interrupted(session: Session, block: Block, result: str | None) -> dict[str, Any]:
    """A tool use the log has no final state for: `failed`, marked `interrupted`."""
    call = session.toolbox.prepare({**block, "id": str(block.get("id", ""))})
    return updates.tool_call(call.id, call.title, call.kind, block.get("input"), "failed",
                             content=updates.tool_content(None, result), meta={"interrupted": True})  # fmt: skip


def _diff(session: Session, diff: dict[str, Any] | None) -> dict[str, Any] | None:
    """A logged diff with blob-backed texts read back (`oldTextBlob` / `newTextBlob`, case C07)."""
    if not diff:
        return diff
    out = dict(diff)
    for key in ("oldText", "newText"):
        ref = out.pop(key + "Blob", None)
        if isinstance(ref, str):
            out[key] = session.journal.read_blob(ref).decode("utf-8")
    return out


def _result_texts(session: Session, typed: list[tuple[dict[str, Any], r.Record]]) -> dict[str, str]:
    """The tool_result text of each tool_use id (blob-backed texts read back)."""
    out: dict[str, str] = {}
    for _, m in typed:
        if not isinstance(m, r.MessageRecord) or m.message.get("role") != "user":
            continue
        for block in m.restore(session.journal.read_blob).get("content", []):
            if block.get("type") == "tool_result":
                content = block.get("content")
                out[str(block.get("tool_use_id"))] = content if isinstance(content, str) else str(content)
    return out
