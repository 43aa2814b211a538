"""The `agentd/session/load` replay as session updates (PROTOCOL.md §6.2).

Owns: `replay_updates(session, records, meta)`: from the session log, in this order, a
`session_info_update` (stored title and `updatedAt`) and a `current_mode_update` when the mode is not
`default`; the conversation in log order (`user_message_chunk` per stored prompt block, `agent_thought_chunk`
/ `agent_message_chunk` per stored assistant block with the original `messageId`, one `tool_call` per tool
use carrying its final state, a `plan` at each successful `todo_write`); then the closing `plan` (if the
session ever had todos) and a `usage_update`. A tool use without a final record (the previous process
stopped or the turn was cancelled before it finished) is replayed `failed` with
`_meta.agentd.interrupted: true`. Reads only; writes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentd.core.todos import TodoItem, snapshot_bytes
from agentd.persistence.replay import restore_message

if TYPE_CHECKING:
    from agentd.core.session import Session

PLAN_STATUS = {"pending": "pending", "in_progress": "in_progress", "done": "completed"}


def plan_update(todos: list[dict[str, Any]]) -> dict[str, Any]:
    items = [TodoItem.model_validate(t) for t in todos]
    return {
        "sessionUpdate": "plan",
        "entries": [
            {"content": i.content, "priority": "medium", "status": PLAN_STATUS[i.status]} for i in items
        ],
        "_meta": {"agentd": {"planId": "main", "snapshot": snapshot_bytes(items)}},
    }


def _result_texts(records: list[dict[str, Any]], session: Session) -> dict[str, str]:
    out: dict[str, str] = {}
    for rec in records:
        if rec.get("kind") != "message" or (rec.get("message") or {}).get("role") != "user":
            continue
        msg = restore_message(rec, session.p.store.read_blob)
        for block in msg.get("content", []):
            if block.get("type") == "tool_result":
                content = block.get("content")
                out[str(block.get("tool_use_id"))] = content if isinstance(content, str) else str(content)
    return out


def _tool_call(
    block: dict[str, Any], final: dict[str, Any] | None, result: str | None, session: Session
) -> dict[str, Any]:
    tid = block.get("id", "")
    if final is not None:
        u: dict[str, Any] = {"sessionUpdate": "tool_call", "toolCallId": tid, "title": final.get("title") or block.get("name"),
                             "kind": final.get("toolKind") or "other", "status": final.get("status"),
                             "rawInput": final.get("rawInput", block.get("input"))}  # fmt: skip
        content: list[dict[str, Any]] = []
        if final.get("diff"):
            content.append({"type": "diff", **final["diff"]})
        if result is not None:
            content.append({"type": "content", "content": {"type": "text", "text": result}})
        if content:
            u["content"] = content
        if final.get("rawOutput") is not None:
            u["rawOutput"] = final["rawOutput"]
        if final.get("locations"):
            u["locations"] = final["locations"]
        if final.get("decidedBy"):
            u["_meta"] = {"agentd": {"decidedBy": final["decidedBy"]}}
        return u
    tool = session.p.registry.get(block.get("name", ""))
    title, kind = block.get("name", ""), "other"
    if tool is not None:
        kind = tool.kind
        args, _ = tool.validate(block.get("input"), session.p.tool_ctx)
        if args is not None:
            title = tool.title(args)
    u = {"sessionUpdate": "tool_call", "toolCallId": tid, "title": title, "kind": kind, "status": "failed",
         "rawInput": block.get("input")}  # fmt: skip
    if result is not None:
        u["content"] = [{"type": "content", "content": {"type": "text", "text": result}}]
    u["_meta"] = {"agentd": {"interrupted": True}}
    return u


def replay_updates(
    session: Session, records: list[dict[str, Any]], meta: dict[str, Any], closing_usage: dict[str, Any]
) -> list[dict[str, Any]]:
    """Every replay update of §6.2, in order (see the module docstring)."""
    out: list[dict[str, Any]] = [
        {
            "sessionUpdate": "session_info_update",
            "title": meta.get("title"),
            "updatedAt": meta.get("updatedAt"),
        }
    ]
    if session.p.gate.mode != "default":
        out.append({"sessionUpdate": "current_mode_update", "currentModeId": session.p.gate.mode})
    finals = {r["toolCallId"]: r for r in records if r.get("kind") == "tool_call" and "toolCallId" in r}
    results = _result_texts(records, session)
    had_todos = False
    for rec in records:
        kind = rec.get("kind")
        if kind == "prompt":
            for block in rec.get("content") or []:
                content = (
                    block
                    if block.get("type") == "text"
                    else {"type": "text", "text": f"[{block.get('type')}]"}
                )
                if block.get("type") == "image":
                    src = block.get("source") or {}
                    content = {
                        "type": "image",
                        "data": src.get("data", ""),
                        "mimeType": src.get("media_type", ""),
                    }
                out.append(
                    {
                        "sessionUpdate": "user_message_chunk",
                        "content": content,
                        "messageId": rec.get("messageId"),
                    }
                )
        elif kind == "message" and (rec.get("message") or {}).get("role") == "assistant":
            for block in rec["message"].get("content", []):
                btype = block.get("type")
                if btype == "text" and block.get("text"):
                    out.append({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": block["text"]},
                                "messageId": rec.get("messageId")})  # fmt: skip
                elif btype == "thinking" and block.get("thinking"):
                    out.append({"sessionUpdate": "agent_thought_chunk",
                                "content": {"type": "text", "text": block["thinking"]}, "messageId": rec.get("messageId")})  # fmt: skip
                elif btype == "tool_use":
                    tid = str(block.get("id"))
                    out.append(_tool_call(block, finals.get(tid), results.get(tid), session))
        elif kind == "todos":
            had_todos = True
            out.append(plan_update(rec.get("todos") or []))
    if had_todos:
        out.append(plan_update(session.p.todos.as_dicts()))
    out.append(closing_usage)
    return out
