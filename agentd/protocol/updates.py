"""Session updates as they cross the wire (PROTOCOL.md §7), in ACP v1 shape. LEAF: imports nothing of agentd.

Each builder returns the `update` object of `agentd/session/update {sessionId, update}`; agentd's own data
goes under `_meta.agentd`. The daemon issue will replace these builders with pydantic models of the same
shape; the core only ever calls the builders.
"""

from __future__ import annotations

from typing import Any


def _meta(**agentd: Any) -> dict[str, Any]:
    return {"agentd": {k: v for k, v in agentd.items() if v is not None}}


def agent_message_chunk(message_id: str, text: str, retracts: str | None = None) -> dict[str, Any]:
    return {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": text},
        "_meta": _meta(messageId=message_id, retracts=retracts),
    }


def tool_call(
    tool_call_id: str, title: str, kind: str, raw_input: Any, status: str = "pending"
) -> dict[str, Any]:
    return {
        "sessionUpdate": "tool_call",
        "toolCallId": tool_call_id,
        "title": title,
        "kind": kind,
        "status": status,
        "rawInput": raw_input,
    }


def tool_call_update(tool_call_id: str, status: str, **fields: Any) -> dict[str, Any]:
    update: dict[str, Any] = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": tool_call_id,
        "status": status,
    }
    meta = fields.pop("meta", None)
    update.update({k: v for k, v in fields.items() if v is not None})
    if meta:
        update["_meta"] = {"agentd": meta}
    return update


def plan(entries: list[dict[str, Any]], snapshot: str) -> dict[str, Any]:
    return {"sessionUpdate": "plan", "entries": entries, "_meta": _meta(planId="main", snapshot=snapshot)}


def usage_update(usage: dict[str, Any], totals: dict[str, Any], line: str) -> dict[str, Any]:
    return {"sessionUpdate": "usage_update", "_meta": _meta(usage=usage, totals=totals, line=line)}
