"""Session updates as they cross the wire (PROTOCOL.md §7), in ACP v1 shape. LEAF: imports only agentd.protocol.

Owns: one pydantic model per §7.2 variant agentd sends (`AgentMessageChunk`, `AgentThoughtChunk`,
`UserMessageChunk`, `ToolCall`, `ToolCallUpdate`, `Plan`, `UsageUpdate`, `SessionInfoUpdate`,
`CurrentModeUpdate`, and the agentd-only `Retry`), `SessionUpdate` (their union, discriminated on `sessionUpdate`), and the builders the
core calls. The models are the single source of the editor clients' update types (PROTOCOL.md §13); they
allow unknown properties and keep `_meta`, so they accept both a builder's output and what the LSP bridge
sends after normalising it (`agentd.adapters.lsp.bridge`: `messageId` moved to the top level of chunks,
`used`/`size`/`cost` filled in on usage updates, `decision`/`durationMs` added to terminal tool updates).

Each builder returns the `update` object of `agentd/session/update {sessionId, update}`; agentd's own data
goes under `_meta.agentd`. The core only ever calls the builders; their output dicts are the contract the
core and its tests rely on, and `tests/unit/test_protocol_codegen.py` validates each against its model.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from agentd.protocol.base import WireModel
from agentd.protocol.session import ContentBlock, Cost

# ---- models (§7.2) -----------------------------------------------------------------------------------

ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]
ToolCallStatus = Literal["pending", "in_progress", "completed", "failed"]
PlanEntryStatus = Literal["pending", "in_progress", "completed"]


class _Update(WireModel):
    """The base of the update models: unknown properties are allowed and kept (PROTOCOL.md §2)."""

    model_config = ConfigDict(extra="allow")


class _Chunk(_Update):
    content: ContentBlock
    message_id: str | None = Field(
        None,
        description="Chunks with one messageId form one message. On the wire it is top-level; the core's "
        "builder keeps it under `_meta.agentd` until the adapter normalises it.",
    )


class AgentMessageChunk(_Chunk):
    """Streamed assistant text; `_meta.agentd.retracts` names a message the client drops (§7.2)."""

    session_update: Literal["agent_message_chunk"]


class AgentThoughtChunk(_Chunk):
    """Extended-thinking text."""

    session_update: Literal["agent_thought_chunk"]


class UserMessageChunk(_Chunk):
    """One stored prompt content block, only during `agentd/session/load` replay."""

    session_update: Literal["user_message_chunk"]


class ToolCallLocation(_Update):
    path: str
    line: int | None = None


class ToolCallContentBlock(_Update):
    """Tool output as a content block (`{"type":"content","content":{...}}`)."""

    type: Literal["content"]
    content: ContentBlock


class ToolCallDiff(_Update):
    """A file change; `path` is absolute, `oldText` is null for a new file."""

    type: Literal["diff"]
    path: str
    old_text: str | None = Field(None, json_schema_extra={"x-nullable": True})
    new_text: str


ToolCallContent = Annotated[ToolCallContentBlock | ToolCallDiff, Field(discriminator="type")]


class ToolCall(_Update):
    """Sent once per tool use, when the model has finished streaming its input (§7.2, §7.3)."""

    session_update: Literal["tool_call"]
    tool_call_id: str
    title: str
    kind: ToolKind
    status: ToolCallStatus
    raw_input: Any = None
    raw_output: Any = None
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None


class ToolCallUpdate(_Update):
    """Only `toolCallId` is required; the other fields replace the displayed ones (§7.2)."""

    session_update: Literal["tool_call_update"]
    tool_call_id: str
    title: str | None = None
    kind: ToolKind | None = None
    status: ToolCallStatus | None = None
    raw_input: Any = None
    raw_output: Any = None
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None


class PlanEntry(_Update):
    content: str
    priority: Literal["high", "medium", "low"]
    status: PlanEntryStatus


class Plan(_Update):
    """The complete TODO list after a successful `todo_write`; the client replaces its plan (§7.4)."""

    session_update: Literal["plan"]
    entries: list[PlanEntry]


class UsageUpdate(_Update):
    """After every model response and after compression (§7.2). `used`/`size` are always set on the wire
    (the core's builder carries the raw usage under `_meta.agentd` and the adapter fills them in)."""

    session_update: Literal["usage_update"]
    used: int | None = None
    size: int | None = None
    cost: Cost | None = None


class SessionInfoUpdate(_Update):
    """Patches the stored values: omitted = unchanged, `null` = cleared (§7.2)."""

    session_update: Literal["session_info_update"]
    title: str | None = Field(None, json_schema_extra={"x-nullable": True})
    updated_at: str | None = Field(None, json_schema_extra={"x-nullable": True})


class CurrentModeUpdate(_Update):
    """Only when modes are supported; after `setMode`, and during replay."""

    session_update: Literal["current_mode_update"]
    current_mode_id: str


class Retry(_Update):
    """agentd-only (§7.2): a model request failed and is retried after `delayS` seconds. `attempt` is the
    number of the attempt that failed (1-based); `message` says why, as the provider error reads. Transient:
    not stored, not replayed."""

    session_update: Literal["retry"]
    attempt: int
    delay_s: float
    message: str
    http_status: int | None = None


SessionUpdate = Annotated[
    AgentMessageChunk
    | AgentThoughtChunk
    | UserMessageChunk
    | ToolCall
    | ToolCallUpdate
    | Plan
    | UsageUpdate
    | SessionInfoUpdate
    | CurrentModeUpdate
    | Retry,
    Field(discriminator="session_update"),
]

# ---- builders (what the core calls) ------------------------------------------------------------------


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


def retry(attempt: int, delay_s: float, message: str, http_status: int | None = None) -> dict[str, Any]:
    """The `retry` update (§7.2): attempt `attempt` (1-based) failed; the next starts in `delay_s` seconds."""
    update: dict[str, Any] = {
        "sessionUpdate": "retry",
        "attempt": attempt,
        "delayS": round(delay_s, 3),
        "message": message,
    }
    if http_status is not None:
        update["httpStatus"] = http_status
    return update
