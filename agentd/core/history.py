"""The `session/load` replay as session updates (PROTOCOL.md §6.2), for every adapter (issue 10 Part 1).

Owns: `replay_updates(session, records)`, `last_page_updates` (the same from the records of the last page
only), `conversation_updates` and `summary_update` (the parts agentd/core/pages.py answers
`agentd/session/history` with, read through the index) and `earlier_updates(session, records, before)` (a
whole page before a compaction from the whole log: the reference those answers must equal; tests and small
logs, issue 16): from the session log, in this order, a `session_info_update`
(stored title and `updatedAt`) and a `current_mode_update` when the mode is not `default`; the conversation
in log order (a `checkpoint` per checkpoint on the active branch, `user_message_chunk` per stored prompt block, `agent_thought_chunk` / `agent_message_chunk` per
stored assistant block with the original `messageId`, one `tool_call` per tool use carrying its final state,
a `plan` at each successful `todo_write`), from the turn of the last compaction on (its summary first); then the closing `plan` (if the session ever had todos) and a
`usage_update` (the context estimate). A tool use without a final record (the previous process stopped or
the turn was cancelled before it finished) is replayed `failed` with `_meta.agentd.interrupted: true`.
Built with the builders of a live turn (agentd.protocol.updates, agentd.core.events), so a replayed
session shows what its live turns showed. Reads only; writes nothing. Must not import pygls, lsprotocol, acp
or adapters.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from typing import TYPE_CHECKING, Any

from agentd.core import events
from agentd.errors import UsageError
from agentd.persistence import records as r
from agentd.persistence.branches import active_seqs, on_branch
from agentd.protocol import updates

if TYPE_CHECKING:
    from agentd.core.session import Session

Block = dict[str, Any]


def replay_updates(session: Session, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every replay update of §6.2, in order (see the module docstring). `records`: the whole log, decoded;
    only the active branch is replayed (issue 13: what a conversation rewind left behind is not shown), and
    only its last page (issue 16): from the start of the turn of the last compaction, that compaction's
    summary first; `earlier_updates` gives the pages before."""
    active = active_seqs(records)
    typed = _typed(records, active)
    starts = _page_starts(typed)
    start = starts[-1] if starts else 0
    todos = any(isinstance(m, r.TodosRecord) for _, m in typed)
    return _load(session, _page(session, typed, active, start, len(typed)), todos)


def last_page_updates(
    session: Session, records: Iterable[dict[str, Any]], active: Container[int], *, todos: bool
) -> list[dict[str, Any]]:
    """As `replay_updates`, from `records` that start where the last page starts (the turn of the last
    compaction on the active branch, found through the log's index; not the first turn): that page, its
    summary first. `todos`: whether the branch ever had a todos snapshot."""
    typed = _typed(records, active)
    return _load(session, _page(session, typed, active, 0, len(typed), paged=True), todos)


def _load(session: Session, page: list[dict[str, Any]], todos: bool) -> list[dict[str, Any]]:
    meta = session.journal.meta
    out = [updates.session_info_update(meta.get("title"), meta.get("updatedAt"))]
    if session.mode != "default":
        out.append(updates.current_mode_update(session.mode))
    out += page
    if todos:
        out.append(events.plan(session.tracker))
    used = session.context.estimated_tokens()
    out.append(events.context_usage(used, session.totals, session.window_tokens, session.model))
    return out


def earlier_updates(session: Session, records: list[dict[str, Any]], before: int) -> dict[str, Any]:
    """The whole-log reference of `agentd/session/history` (agentd/core/pages.py answers it without reading the
    whole log, in bounded parts that put together equal this): `{updates, before}`, the conversation
    updates of the page that ends where the page starting at record seq `before` starts, and the next
    `before` (None on the first page). Raises UsageError when `before` is not where a page starts."""
    active = active_seqs(records)
    typed = _typed(records, active)
    starts = _page_starts(typed)
    ends = [i for i in starts if typed[i][0].get("seq") == before]
    if not ends:
        raise UsageError(
            f"agentd/session/history: before={before!r} is not a page of this session; pass the "
            "_meta.agentd.earlier.before of a replayed summary, or the `before` of the previous page."
        )
    earlier = [i for i in starts if i < ends[0]]
    start = earlier[-1] if earlier else 0
    return {"updates": _page(session, typed, active, start, ends[0]),
            "before": typed[start][0].get("seq") if earlier else None}  # fmt: skip


def conversation_updates(
    session: Session, records: Iterable[dict[str, Any]], active: Container[int]
) -> list[dict[str, Any]]:
    """The conversation updates of `records` (in log order, no summary first), as a page of `_page` shows
    them; a part of a page whose tool uses have their final records within it gives what the page gives
    for it (agentd/core/pages.py)."""
    typed = _typed(records, active)
    return _page(session, typed, active, 0, len(typed))


def summary_update(rec: dict[str, Any], before: Any) -> dict[str, Any] | None:
    """The summary update of compaction record `rec` (`earlier.before` = `before`), None if malformed."""
    m = r.parse_record(rec)
    return _summary(rec, m, before=before) if isinstance(m, r.CompactionRecord) else None


def _typed(records: Iterable[dict[str, Any]], active: Any) -> list[tuple[dict[str, Any], r.Record]]:
    return [(rec, m) for rec in records if on_branch(rec, active) and (m := r.parse_record(rec)) is not None]


def _page_starts(typed: list[tuple[dict[str, Any], r.Record]]) -> list[int]:
    """Where pages start: for each compaction, the start of its turn (its checkpoint, else its prompt: the
    messages the compaction kept are shown after its summary), in order, without repeats; never the first
    turn (what precedes it is no page)."""
    out: list[int] = []
    turn, first = None, None
    for i, (_, m) in enumerate(typed):
        if isinstance(m, r.PromptRecord):
            turn = i
            while turn > 0 and isinstance(typed[turn - 1][1], r.CheckpointRecord):
                turn -= 1  # the turn's checkpoint goes with it
            first = turn if first is None else first
        elif isinstance(m, r.CompactionRecord) and turn is not None and turn != first and turn not in out:
            out.append(turn)
    return out


def _page(
    session: Session,
    typed: list[tuple[dict[str, Any], r.Record]],
    active: Any,
    start: int,
    end: int,
    *,
    paged: bool = False,
) -> list[dict[str, Any]]:
    """The conversation updates of `typed[start:end]`, after the summary of its last compaction (an
    `agent_message_chunk` with `_meta.agentd.summary: true` and `earlier.before` = the seq where the page
    starts) when one is there and a page precedes (`paged`: it does, though `start` is 0)."""
    part = typed[start:end]
    finals = {m.tool_call_id: m for _, m in part if isinstance(m, r.ToolCallRecord)}
    results = _result_texts(session, part)
    out: list[dict[str, Any]] = []
    compactions = [(rec, m) for rec, m in part if isinstance(m, r.CompactionRecord)]
    if (start > 0 or paged) and compactions:
        out.append(_summary(*compactions[-1], before=typed[start][0].get("seq")))
    for rec, m in part:
        if isinstance(m, r.CheckpointRecord) and rec.get("seq") in active:
            out.append(events.checkpoint(rec))
        elif isinstance(m, r.PromptRecord):
            out += [updates.user_message_chunk(m.message_id, _prompt_content(b)) for b in m.content]
        elif isinstance(m, r.MessageRecord) and m.message.get("role") == "assistant":
            out += _assistant(session, m, finals, results)
        elif isinstance(m, r.TodosRecord):
            out.append(events.stored_plan(m.todos))
    return out


def _summary(rec: dict[str, Any], m: r.CompactionRecord, *, before: Any) -> dict[str, Any]:
    text = "".join(str(b.get("text", "")) for b in m.summary.get("content", []) if isinstance(b, dict))
    update = updates.agent_message_chunk(f"compaction_{rec.get('seq')}", text)
    update["_meta"] = {"agentd": {"summary": True, "earlier": {"before": before}}}
    return update


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
